package volume

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// loopPool opens a fresh loop-file pool, unmounted when the test ends.
func loopPool(t *testing.T) (*Pool, string) {
	t.Helper()
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	dir := t.TempDir()
	p, err := OpenLoop(context.Background(), dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	return p, dir
}

func TestSnapshotsShareTheTreeAndReadOnlyOnesRefuseWrites(t *testing.T) {
	ctx := context.Background()
	p, _ := loopPool(t)
	img := p.TempPath("img")
	if err := p.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(img, "f"), []byte("base"), 0o644)
	if err := p.Snapshot(ctx, img, p.ImagePath("base"), true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.ImagePath("base"), "g"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write into a read-only image: %v, want EROFS", err)
	}
	root := p.SandboxPath("sb1")
	if err := p.Snapshot(ctx, p.ImagePath("base"), root, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.ImagePath("base"), "f")); string(b) != "base" {
		t.Fatalf("image changed through a snapshot: %q", b)
	}
	if ok, _ := IsSubvolume(root); !ok {
		t.Fatal("sandbox root is not a subvolume")
	}
	if err := p.Delete(ctx, root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("deleted subvolume still there: %v", err)
	}
	if err := p.Delete(ctx, root); err != nil {
		t.Fatalf("deleting a missing subvolume: %v", err)
	}
}

func TestPoolIsRemountedAndTheWorkAreaSwept(t *testing.T) {
	ctx := context.Background()
	p, dir := loopPool(t)
	if err := p.Create(ctx, p.ImagePath("kept")); err != nil {
		t.Fatal(err)
	}
	if err := p.Create(ctx, p.TempPath("half-built")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("umount", filepath.Join(dir, "pool")).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	p2, err := OpenLoop(ctx, dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := IsSubvolume(p2.ImagePath("kept")); !ok {
		t.Fatal("image lost across remount")
	}
	if _, err := os.Stat(p2.TempPath("half-built")); !os.IsNotExist(err) {
		t.Fatalf("leftover in the work area not swept: %v", err)
	}
	// Opening again while mounted is fine too.
	if _, err := OpenLoop(ctx, dir, 1<<30); err != nil {
		t.Fatal(err)
	}
}

func TestOpenDirRefusesNonBtrfs(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type == unix.BTRFS_SUPER_MAGIC {
		t.Skip("the temp dir is on btrfs")
	}
	if _, err := OpenDir(dir); err == nil {
		t.Fatal("OpenDir accepted a directory that is not on btrfs")
	}
}

func TestChangeMarkerMovesOnWritesOnly(t *testing.T) {
	ctx := context.Background()
	p, _ := loopPool(t)
	sub := p.SandboxPath("m")
	if err := p.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(sub, "f"), []byte("1"), 0o644)
	m1, err := ChangeMarker(sub)
	if err != nil {
		t.Fatal(err)
	}
	// Reads, commits and snapshots leave it alone.
	os.ReadFile(filepath.Join(sub, "f"))
	exec.Command("sync").Run()
	if err := p.Snapshot(ctx, sub, p.CheckpointPath("c1"), true); err != nil {
		t.Fatal(err)
	}
	exec.Command("sync").Run()
	if m2, _ := ChangeMarker(sub); m2 != m1 {
		t.Fatalf("marker moved without a write: %d -> %d", m1, m2)
	}
	// A write moves it at once, before any commit.
	os.WriteFile(filepath.Join(sub, "g"), []byte("2"), 0o644)
	if m3, _ := ChangeMarker(sub); m3 == m1 {
		t.Fatal("marker did not move after a write")
	}
}

func TestSnapshotsKeepQuotaConsistentAndExact(t *testing.T) {
	ctx := context.Background()
	p, _ := loopPool(t)
	img := p.TempPath("img")
	if err := p.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	if err := p.Snapshot(ctx, img, p.ImagePath("i"), true); err != nil {
		t.Fatal(err)
	}
	root := p.SandboxPath("r")
	if err := p.Snapshot(ctx, p.ImagePath("i"), root, false); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "data"), make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ck := p.CheckpointPath("c")
	if err := p.Snapshot(ctx, root, ck, true); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "data")); err != nil {
		t.Fatal(err)
	}
	usage, err := p.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u := usage["checkpoints/c"]; u.Exclusive < 8<<20 {
		t.Fatalf("the checkpoint alone holds %d bytes, want 8 MiB", u.Exclusive)
	}
	out, _ := exec.Command("btrfs", "qgroup", "show", p.Root()).CombinedOutput()
	if strings.Contains(string(out), "inconsistent") {
		t.Fatalf("snapshots left quota data inconsistent:\n%s", out)
	}
	if used, err := p.ContentUsage(ctx); err != nil || used < 8<<20 {
		t.Fatalf("content usage %d, %v", used, err)
	}
}

// Subvolumes made and deleted by ioctl: a created one is in the pool's
// quota group (its data counts in ContentUsage), read-only snapshots are
// deleted like writable ones, and a missing path is no error.
func TestCreateAndDeleteByIoctl(t *testing.T) {
	ctx := context.Background()
	p, _ := loopPool(t)
	before, err := p.ContentUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub := p.TempPath("made")
	if err := p.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if ok, _ := IsSubvolume(sub); !ok {
		t.Fatal("Create made no subvolume")
	}
	if err := os.WriteFile(filepath.Join(sub, "data"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if after, err := p.ContentUsage(ctx); err != nil || after-before < 4<<20 {
		t.Fatalf("content usage %d → %d (%v): the created subvolume is not in the pool group", before, after, err)
	}
	ro := p.CheckpointPath("ro")
	if err := p.Snapshot(ctx, sub, ro, true); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{ro, sub, sub} { // the second delete of sub: already gone
		if err := p.Delete(ctx, path); err != nil {
			t.Fatalf("delete %s: %v", path, err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s still there after Delete: %v", path, err)
		}
	}
}

// ReclaimAll deletes several subvolumes and plain directories at once, and
// their space is free when it returns.
func TestReclaimAllFreesTheSpaceOfEveryPath(t *testing.T) {
	p, _ := loopPool(t)
	ctx := context.Background()
	var paths []string
	for _, name := range []string{"a", "b", "c"} {
		src := filepath.Join(p.Root(), "src-"+name)
		if err := p.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		if err := fill(t, filepath.Join(src, "data"), 60<<20); err != nil {
			t.Fatal(err)
		}
		// A read-only snapshot, as a checkpoint's disk; its source goes
		// first, so the snapshot alone holds the data.
		dst := filepath.Join(p.Root(), "ck-"+name)
		if err := p.Snapshot(ctx, src, dst, true); err != nil {
			t.Fatal(err)
		}
		if err := p.Delete(ctx, src); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, dst)
	}
	dir := filepath.Join(p.Root(), "memory-image")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fill(t, filepath.Join(dir, "pages"), 20<<20); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, dir, filepath.Join(p.Root(), "never-there"))
	if err := exec.Command("btrfs", "filesystem", "sync", p.Root()).Run(); err != nil {
		t.Fatal(err)
	}
	before, err := p.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if failed := p.ReclaimAll(ctx, paths); len(failed) != 0 {
		t.Fatalf("ReclaimAll: %v", failed)
	}
	after, err := p.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", path, err)
		}
	}
	if freed := after.Free - before.Free; freed < 190<<20 {
		t.Errorf("ReclaimAll freed %d MiB at once, want the 200 MiB the paths held", freed>>20)
	}
}
