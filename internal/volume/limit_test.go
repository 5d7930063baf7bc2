package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// fill writes random-free data into dir/name until a write fails or n
// bytes are written, and returns the error of the failed write (nil if all
// of it fit).
func fill(t *testing.T, path string, n int64) error {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	for written := int64(0); written < n; written += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return f.Sync()
}

func TestSubvolumeLimitStopsItsWritesOnly(t *testing.T) {
	p, _ := loopPool(t)
	ctx := context.Background()
	root, other := p.SandboxPath("a"), p.SandboxPath("b")
	for _, path := range []string{root, other} {
		if err := p.Create(ctx, path); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.LimitSubvolume(root, 32<<20); err != nil {
		t.Fatal(err)
	}
	err := fill(t, filepath.Join(root, "big"), 64<<20)
	if !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("writing 64 MiB into a 32 MiB disk: %v, want EDQUOT", err)
	}
	if err := fill(t, filepath.Join(other, "f"), 48<<20); err != nil {
		t.Fatalf("another subvolume cannot write once the first is full: %v", err)
	}
	limit, used, err := p.SubvolumeLimit(ctx, root)
	if err != nil || limit != 32<<20 || used > limit || used < 24<<20 {
		t.Fatalf("SubvolumeLimit = %d, %d, %v; want 32 MiB and nearly all of it used", limit, used, err)
	}
	// At its limit a subvolume can still be snapshotted (a checkpoint),
	// the snapshot inherits the limit (a root made from a checkpoint), and
	// deleting frees room to write again.
	ck := p.CheckpointPath("c")
	if err := p.Snapshot(ctx, root, ck, true); err != nil {
		t.Fatalf("snapshot of a full subvolume: %v", err)
	}
	copyRoot := p.SandboxPath("copy")
	if err := p.Snapshot(ctx, ck, copyRoot, false); err != nil {
		t.Fatal(err)
	}
	if limit, _, err := p.SubvolumeLimit(ctx, copyRoot); err != nil || limit != 32<<20 {
		t.Fatalf("limit of a root made from the checkpoint: %d, %v; want 32 MiB", limit, err)
	}
	if err := os.Remove(filepath.Join(root, "big")); err != nil {
		t.Fatalf("delete in a full subvolume: %v", err)
	}
	if err := p.LimitSubvolume(root, 0); err != nil {
		t.Fatal(err)
	}
	if limit, _, _ := p.SubvolumeLimit(ctx, root); limit != 0 {
		t.Fatalf("limit after removing it: %d", limit)
	}
}

func TestPoolReserveKeepsSnapshotsWorking(t *testing.T) {
	p, _ := loopPool(t) // 1 GiB
	ctx := context.Background()
	// A reserve of all but ~200 MiB of the pool, so the test fills it fast.
	size, _, err := p.statfs()
	if err != nil {
		t.Fatal(err)
	}
	limit, err := p.KeepReserve(ctx, size-200<<20)
	if err != nil {
		t.Fatal(err)
	}
	if want := size / 2; limit != size-want {
		// Reserve is capped at half the pool.
		t.Fatalf("limit %d, want %d (the reserve is at most half the pool)", limit, size-want)
	}
	if _, err := p.KeepReserve(ctx, 800<<20); err != nil {
		t.Fatal(err)
	}
	sp, err := p.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Limit <= 0 || sp.Limit >= sp.Size || sp.Size < 900<<20 {
		t.Fatalf("Space = %+v: want a pool-group limit below the size", sp)
	}
	root := p.SandboxPath("a")
	if err := p.Create(ctx, root); err != nil {
		t.Fatal(err)
	}
	if err := fill(t, filepath.Join(root, "big"), sp.Limit+64<<20); !errors.Is(err, unix.EDQUOT) {
		t.Fatalf("writing past the pool's limit: %v, want EDQUOT", err)
	}
	sp, _ = p.Space(ctx)
	if sp.Free < 300<<20 { // 800 MiB reserved, less btrfs' own metadata (DUP)
		t.Fatalf("the reserve was written into: %+v", sp)
	}
	for i, name := range []string{"c1", "c2", "c3"} {
		if err := p.Snapshot(ctx, root, p.CheckpointPath(name), true); err != nil {
			t.Fatalf("snapshot %d of a full pool: %v", i, err)
		}
	}
	if err := p.Delete(ctx, p.CheckpointPath("c1")); err != nil {
		t.Fatalf("delete in a full pool: %v", err)
	}
}
