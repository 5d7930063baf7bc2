package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// btrfs' first subvolume inode number: every subvolume root has it.
const subvolumeInode = 256

// IsSubvolume reports whether path is the root of a btrfs subvolume.
func IsSubvolume(path string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return st.Ino == subvolumeInode && st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// Create makes an empty writable subvolume at path.
func (p *Pool) Create(ctx context.Context, path string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return createIoctl(path)
}

// Snapshot makes dst a snapshot of the subvolume src: constant time, shares
// every extent. readOnly makes dst immutable.
func (p *Pool) Snapshot(ctx context.Context, src, dst string, readOnly bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return snapshotIoctl(src, dst, readOnly)
}

// Delete removes the subvolume or plain directory at path. A path that does
// not exist is not an error, so Delete is safe in undo steps.
func (p *Pool) Delete(ctx context.Context, path string) error {
	sub, err := IsSubvolume(path)
	if err != nil {
		return err
	}
	if !sub {
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	return destroyIoctl(path)
}

// SetReadOnly marks the subvolume at path read-only.
func (p *Pool) SetReadOnly(ctx context.Context, path string) error {
	if err := run(ctx, "btrfs", "property", "set", "-ts", path, "ro", "true"); err != nil {
		return fmt.Errorf("set read-only: %w", err)
	}
	return nil
}

// Reclaim deletes the subvolume at path and waits until btrfs has freed its
// space (the cleaner works in the background otherwise), so the pool's free
// space reflects the deletion when Reclaim returns.
func (p *Pool) Reclaim(ctx context.Context, path string) error {
	sub, err := IsSubvolume(path)
	if err != nil || !sub {
		return p.Delete(ctx, path)
	}
	id, err := subvolumeID(path)
	if err != nil {
		return err
	}
	if err := run(ctx, "btrfs", "subvolume", "delete", "--commit-after", path); err != nil {
		return fmt.Errorf("delete subvolume: %w", err)
	}
	// The cleaner may otherwise sleep until the next periodic commit.
	if err := run(ctx, "btrfs", "filesystem", "sync", p.root); err != nil {
		return fmt.Errorf("wake the btrfs cleaner: %w", err)
	}
	// Wait for this subvolume only: another deleted one may stay around
	// while something still holds it open (a sandbox browsing it).
	sctx, cancel := context.WithTimeout(ctx, reclaimWait)
	defer cancel()
	if err := run(sctx, "btrfs", "subvolume", "sync", p.root, strconv.FormatUint(id, 10)); err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			return nil // deleted; btrfs frees the space in the background
		}
		return fmt.Errorf("wait for subvolume cleanup: %w", err)
	}
	return nil
}

// reclaimWait bounds how long Reclaim waits for btrfs to free the space.
// Freeing takes well under a second, unless something holds the subvolume
// open (a sandbox that browsed it under /.cairn/checkpoints): then the
// space comes back when it lets go.
const reclaimWait = 5 * time.Second

// Exchange atomically swaps the entries at a and b (subvolumes or
// directories) on the pool: a crash leaves either both old or both new.
func (p *Pool) Exchange(a, b string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("exchange %s and %s: %w", a, b, err)
	}
	// Durable before the caller records the new state elsewhere (the
	// metadata store): a power cut must not undo the swap behind it.
	for _, dir := range []string{filepath.Dir(a), filepath.Dir(b)} {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("exchange %s and %s: %w", a, b, err)
		}
	}
	return nil
}

// syncDir flushes the entries of directory dir to disk.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
