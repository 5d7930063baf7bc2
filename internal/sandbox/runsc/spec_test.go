package runsc

import (
	"slices"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/container"
)

// tmpfsSizes returns the tmpfs mounts of spec s by destination, with
// their size= option ("" for none).
func tmpfsSizes(s Spec) map[string]string {
	out := map[string]string{}
	for _, m := range oci(s).Mounts {
		if m.Type != "tmpfs" {
			continue
		}
		out[m.Destination] = ""
		if i := slices.IndexFunc(m.Options, func(o string) bool { return len(o) > 5 && o[:5] == "size=" }); i >= 0 {
			out[m.Destination] = m.Options[i][5:]
		}
	}
	return out
}

// With a memory limit, /dev/shm and /tmp are tmpfs of half of it; without
// one, or to resume an image saved before /tmp was sized, /tmp is left to
// gVisor.
func TestTmpfsMountsAreHalfTheMemoryLimit(t *testing.T) {
	limited := Spec{Options: container.Options{MemoryBytes: 256 << 20}}
	got := tmpfsSizes(limited)
	if got["/dev/shm"] != "134217728" || got["/tmp"] != "134217728" {
		t.Errorf("tmpfs mounts with 256 MiB: %v, want /dev/shm and /tmp of 134217728", got)
	}
	legacy := limited
	legacy.Options.RuntimeTmp = true
	if got := tmpfsSizes(legacy); got["/dev/shm"] != "134217728" || got["/tmp"] != "" {
		t.Errorf("tmpfs mounts with RuntimeTmp: %v, want /dev/shm alone", got)
	}
	if got := tmpfsSizes(Spec{}); len(got) != 1 || got["/dev"] != "" {
		t.Errorf("tmpfs mounts without a limit: %v, want /dev alone", got)
	}
}
