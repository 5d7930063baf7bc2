package fiemap

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

func TestShared(t *testing.T) {
	a := []Extent{{0, 1000, 100, 0}, {100, 5000, 100, 0}, {200, 9000, 100, FlagEncoded}, {300, 7000, 100, FlagLast}}
	b := []Extent{{0, 1000, 50, 0}, {50, 3000, 50, 0}, {100, 5000, 150, 0}, {250, 9050, 50, 0}, {300, 7000, 200, FlagLast}}
	// [0,50): same disk bytes; [50,100): moved; [100,200): same; [200,300):
	// compressed on one side, so equal offsets prove nothing; [300,400): same.
	want := []Range{{0, 50}, {100, 100}, {300, 100}}
	if got := Shared(a, b); !slices.Equal(got, want) {
		t.Fatalf("Shared = %v, want %v", got, want)
	}
	if got := Shared(b, a); !slices.Equal(got, want) {
		t.Fatalf("Shared is not symmetric: %v", got)
	}
}

// Extents reads a real file's map: a file of several batches of extents
// (every other 4 KiB block written, the rest holes) comes back whole, in
// order, ending with the last extent.
func TestExtentsOfAFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const blocks = 3 * batch
	for i := range blocks {
		if _, err := f.WriteAt(make([]byte, 4096), int64(2*i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	ext, err := Extents(f)
	if err != nil {
		t.Skipf("no FIEMAP here: %v", err)
	}
	var data uint64
	for i, e := range ext {
		if i > 0 && e.Logical < ext[i-1].Logical+ext[i-1].Length {
			t.Fatalf("extent %d overlaps or is out of order: %+v after %+v", i, e, ext[i-1])
		}
		data += e.Length
	}
	if data != blocks*4096 || ext[len(ext)-1].Flags&FlagLast == 0 {
		t.Fatalf("%d extents with %d bytes of data (want %d), last flags %#x", len(ext), data, blocks*4096, ext[len(ext)-1].Flags)
	}
}

// SameCopyOnWrite is what lets a backup trust equal extents: true for two
// subvolumes of one btrfs, false across two btrfs file systems and outside
// btrfs.
func TestSameCopyOnWrite(t *testing.T) {
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	ctx := context.Background()
	var pools [2]*volume.Pool
	for i := range pools {
		dir := t.TempDir()
		p, err := volume.OpenLoop(ctx, dir, 256<<20)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { exec.Command("umount", p.Root()).Run() })
		pools[i] = p
	}
	a, b, other := pools[0].TempPath("a"), pools[0].TempPath("b"), pools[1].TempPath("c")
	for _, p := range []struct {
		pool *volume.Pool
		path string
	}{{pools[0], a}, {pools[0], b}, {pools[1], other}} {
		if err := p.pool.Create(ctx, p.path); err != nil {
			t.Fatal(err)
		}
	}
	plain := t.TempDir() // the test machine's /tmp: not btrfs here
	for _, c := range []struct {
		x, y string
		want bool
	}{{a, b, true}, {a, other, false}, {a, plain, false}, {plain, plain, false}} {
		got, err := SameCopyOnWrite(c.x, c.y)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("SameCopyOnWrite(%s, %s) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
