package sandbox

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSandboxOfContainer(t *testing.T) {
	later := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, c := range []struct {
		name, id string
		gen      bool // a generation above 0
	}{
		{newContainerName("3f2a9c0e11d2b4a7"), "3f2a9c0e11d2b4a7", true},
		{"3f2a9c0e11d2b4a7", "3f2a9c0e11d2b4a7", false},         // an earlier cairn's name
		{"3f2a9c0e11d2b4a7." + later, "3f2a9c0e11d2b4a7", true}, // idem, unpadded
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
	_, b := sandboxOfContainer(newContainerName("x"))
	if a >= b {
		t.Errorf("generations out of order: %d, %d", a, b)
	}
}

// TestContainerNamesArePrefixFree: runsc takes an id as a prefix and
// refuses one that begins two names, even one that is a name in full, so
// no name cairn makes may begin another of the same sandbox.
func TestContainerNamesArePrefixFree(t *testing.T) {
	const id = "3f2a9c0e11d2b4a7"
	first := newContainerName(id)
	time.Sleep(time.Microsecond)
	second := newContainerName(id)
	if first == second {
		t.Fatalf("two containers made apart in time got the same name %q", first)
	}
	if strings.HasPrefix(second, first) || strings.HasPrefix(first, second) {
		t.Errorf("%q and %q: one begins the other", first, second)
	}
	if len(first) != len(second) || len(first) != len(id)+1+genDigits {
		t.Errorf("names of different widths: %q, %q", first, second)
	}
	// The width holds for small times too (a clock near 1970).
	if _, gen := sandboxOfContainer(id + "." + strings.Repeat("0", genDigits-1) + "1"); gen != 1 {
		t.Errorf("a padded generation does not parse: %d", gen)
	}
}
