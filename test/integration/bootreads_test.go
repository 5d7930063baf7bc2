package integration

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/accessorder"
)

// The reads of a sandbox's boot are recorded in the order they came (for
// the prefetch of a lazy restore): what its processes read in the window
// after the boot, first read first; each boot replaces the record of the
// one before. (The window's end is the unit tests'.)
func TestBootReadsAreRecordedInOrder(t *testing.T) {
	d := startDaemon(t, "--boot-reads", "4s")
	sb := d.create("reader", "--network", "none")
	// Written now, read after the next boot (gVisor keeps in its memory
	// what this boot wrote).
	d.sh("reader", "mkdir -p /srv/app && for f in config index data; do head -c 65536 /dev/urandom > /srv/app/$f; done")
	d.mustCLI("stop", "reader")
	d.mustCLI("start", "reader")
	d.sh("reader", "cat /srv/app/index /srv/app/config /srv/app/data > /dev/null")
	path := filepath.Join(d.dataDir, "sandboxes", sb.ID, accessorder.FileName)
	// The first boot's record is written when the second begins, the
	// second's at the end of its window.
	var order accessorder.Order
	for deadline := time.Now().Add(30 * time.Second); !slices.Contains(order.Files, "srv/app/data"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no record of the second boot's reads at %s after 30 s (last: %v)", path, order.Files)
		}
		if _, err := os.Stat(path); err == nil {
			var lerr error
			if order, lerr = accessorder.Load(path); lerr != nil {
				t.Fatal(lerr)
			}
		}
	}
	idx := func(f string) int { return slices.Index(order.Files, f) }
	i, c, da := idx("srv/app/index"), idx("srv/app/config"), idx("srv/app/data")
	if i < 0 || c < 0 || da < 0 || !(i < c && c < da) {
		t.Fatalf("recorded order %v: want srv/app/index, config, data in that order", order.Files)
	}
	t.Logf("recorded %d files: %v", len(order.Files), order.Files)
}
