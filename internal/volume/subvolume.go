package volume

import (
	"context"
	"errors"
	"fmt"
	"os"

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
	if err := run(ctx, "btrfs", "subvolume", "create", path); err != nil {
		return fmt.Errorf("create subvolume: %w", err)
	}
	return nil
}

// Snapshot makes dst a snapshot of the subvolume src: constant time, shares
// every extent. readOnly makes dst immutable.
func (p *Pool) Snapshot(ctx context.Context, src, dst string, readOnly bool) error {
	args := []string{"subvolume", "snapshot"}
	if readOnly {
		args = append(args, "-r")
	}
	args = append(args, src, dst)
	if err := run(ctx, "btrfs", args...); err != nil {
		return fmt.Errorf("snapshot %s: %w", src, err)
	}
	return nil
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
	if err := run(ctx, "btrfs", "subvolume", "delete", path); err != nil {
		return fmt.Errorf("delete subvolume: %w", err)
	}
	return nil
}

// SetReadOnly marks the subvolume at path read-only.
func (p *Pool) SetReadOnly(ctx context.Context, path string) error {
	if err := run(ctx, "btrfs", "property", "set", "-ts", path, "ro", "true"); err != nil {
		return fmt.Errorf("set read-only: %w", err)
	}
	return nil
}
