package sandbox

import (
	"strconv"
	"testing"
	"time"
)

func TestSandboxOfContainer(t *testing.T) {
	later := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, c := range []struct {
		name, id string
		gen      bool // a generation above 0
	}{
		{"3f2a9c0e11d2b4a7", "3f2a9c0e11d2b4a7", false},
		{"3f2a9c0e11d2b4a7." + later, "3f2a9c0e11d2b4a7", true},
		{"3f2a9c0e11d2b4a7.", "3f2a9c0e11d2b4a7.", false},       // not a name cairn makes: an orphan
		{"3f2a9c0e11d2b4a7.x-y", "3f2a9c0e11d2b4a7.x-y", false}, // idem
		{"bench-copy", "bench-copy", false},
	} {
		id, gen := sandboxOfContainer(c.name)
		if id != c.id || (gen > 0) != c.gen {
			t.Errorf("sandboxOfContainer(%q) = %q, %d; want %q, generation above 0: %v", c.name, id, gen, c.id, c.gen)
		}
	}
	// Names made later have larger generations.
	_, a := sandboxOfContainer("x." + strconv.FormatInt(1_700_000_000_000_000_000, 36))
	_, b := sandboxOfContainer("x." + later)
	if a >= b {
		t.Errorf("generations out of order: %d, %d", a, b)
	}
}
