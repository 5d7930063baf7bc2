package checkpoint

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/hosttree/hosttreetest"
	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Diff works on any tree a sandbox can make, between a btrfs snapshot and
// the live tree: a change at the bottom of 1,100 nested directories (a path
// past PATH_MAX), odd names added and removed with their exact bytes, and
// the symbolic links out of the tree reported, never followed.
func TestDiffOfATreePastPathMaxWithOddNames(t *testing.T) {
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	ctx := context.Background()
	dir := t.TempDir()
	pool, err := volume.OpenLoop(ctx, dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	live := pool.TempPath("live")
	if err := pool.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	hosttreetest.OddTree(t, live)
	snap := pool.TempPath("snap")
	if err := pool.Snapshot(ctx, live, snap, true); err != nil {
		t.Fatal(err)
	}
	root, err := hosttree.OpenRoot(live)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fd, _ := root.Fd()
	hosttreetest.WriteAt(t, root, hosttreetest.DeepFile, "changed at the bottom\n")
	hosttreetest.WriteAt(t, root, hosttreetest.DeepDir+"/added\n\x1b\xff", "x")
	if err := unix.Unlinkat(fd, hosttreetest.OddNames[3], 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unlinkat(fd, "passwd", 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Symlinkat("/etc/shadow", fd, "passwd"); err != nil {
		t.Fatal(err)
	}

	got, err := Diff(ctx, snap, live)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Path: "/" + hosttreetest.OddNames[3], Kind: Removed},
		{Path: "/" + hosttreetest.DeepDir + "/added\n\x1b\xff", Kind: Added},
		{Path: "/" + hosttreetest.DeepFile, Kind: Changed, What: []string{"content"}},
		{Path: "/passwd", Kind: Changed, What: []string{"content"}},
	}
	sortChanges(want)
	if !reflect.DeepEqual(got, want) {
		for _, c := range got {
			t.Logf("got %s %s %v", c.Kind, hosttree.Quote(c.Path), c.What)
		}
		t.Fatalf("diff: %d changes, want %d", len(got), len(want))
	}
}

func sortChanges(cs []Change) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
}
