package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// ReclaimAll deletes the subvolumes (or plain directories) at paths and
// waits until btrfs has freed their space (the cleaner works in the
// background otherwise), so the pool's free space reflects the deletions
// when it returns, with one commit and one wait for all of them: one per
// path serialised deletes under load. It returns the error of each path it
// could not delete; the others are deleted, and their space freed, or on
// its way if something holds one open past reclaimWait (a sandbox that
// browsed it under /.cairn/checkpoints).
func (p *Pool) ReclaimAll(ctx context.Context, paths []string) map[string]error {
	failed := map[string]error{}
	var ids []string
	for _, path := range paths {
		sub, err := IsSubvolume(path)
		if err == nil && sub {
			var id uint64
			if id, err = subvolumeID(path); err == nil {
				if err = destroyIoctl(path); err == nil {
					ids = append(ids, strconv.FormatUint(id, 10))
				}
			}
		} else if err == nil {
			err = p.Delete(ctx, path)
		}
		if err != nil {
			failed[path] = err
		}
	}
	if len(ids) == 0 {
		return failed
	}
	// Commit, which also wakes the cleaner (it may otherwise sleep until
	// the next periodic commit), then wait for these subvolumes only:
	// another deleted one may stay while something holds it open.
	if err := run(ctx, "btrfs", "filesystem", "sync", p.root); err != nil {
		// The deletes are made, not yet durable: a power cut could bring
		// one back, with no row naming it, for the sweep at the next start.
		slog.Warn("reclaim: commit the deletes", "err", err)
		return failed
	}
	sctx, cancel := context.WithTimeout(ctx, reclaimWait)
	defer cancel()
	if err := run(sctx, "btrfs", append([]string{"subvolume", "sync", p.root}, ids...)...); err != nil && sctx.Err() == nil {
		slog.Warn("reclaim: wait for the cleaner", "err", err)
	}
	return failed
}

// reclaimWait bounds how long ReclaimAll waits for btrfs to free the space.
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
