package volume

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Disk limits are btrfs quota-group limits on referenced bytes, enforced by
// the kernel as data is written:
//
//   - a sandbox root's own group (0/N) bounds what the sandbox's disk holds,
//     the image's files it shares included: past it, writes fail with
//     EDQUOT ("Disk quota exceeded") inside that sandbox only. Deleting
//     files and taking snapshots still work at the limit, and a snapshot
//     (a checkpoint, and a root made from one) inherits the limit.
//   - the pool group (1/1, every subvolume) is held below the file
//     system's size by a reserve, so that the sandboxes together can never
//     take the space btrfs needs for the metadata of snapshots and
//     deletes: checkpoints and cleanup keep working when the pool is
//     "full".

// BTRFS_IOC_QGROUP_LIMIT = _IOR(0x94, 43, struct
// btrfs_ioctl_qgroup_limit_args): a qgroup id (0: the subvolume the fd is
// in) and struct btrfs_qgroup_limit (flags, max_rfer, max_excl, rsv_rfer,
// rsv_excl), 48 bytes.
const qgroupLimitArgsSize = 48

var iocQgroupLimit = uintptr(2<<30 | qgroupLimitArgsSize<<16 | 0x94<<8 | 43)

const (
	qgroupLimitMaxRfer = 1 << 0 // BTRFS_QGROUP_LIMIT_MAX_RFER
	qgroupClearLimit   = ^uint64(0)
)

// setLimit sets the referenced-bytes limit of quota group id (0: the
// subvolume at path itself) through a file descriptor of path; bytes 0
// removes the limit.
func setLimit(path string, id uint64, bytes int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var args [qgroupLimitArgsSize]byte
	binary.LittleEndian.PutUint64(args[0:], id)
	binary.LittleEndian.PutUint64(args[8:], qgroupLimitMaxRfer)
	max := qgroupClearLimit
	if bytes > 0 {
		max = uint64(bytes)
	}
	binary.LittleEndian.PutUint64(args[16:], max)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), iocQgroupLimit, uintptr(unsafe.Pointer(&args[0]))); errno != 0 {
		return errno
	}
	return nil
}

// LimitSubvolume bounds what the subvolume at path may refer to: bytes is
// its disk size (the data it shares with its image and checkpoints
// included); 0 removes the limit.
func (p *Pool) LimitSubvolume(path string, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("limit %s: negative size %d", path, bytes)
	}
	if err := setLimit(path, 0, bytes); err != nil {
		return fmt.Errorf("limit the disk of %s to %d bytes: %w", path, bytes, err)
	}
	return nil
}

// Space is how full the pool is.
type Space struct {
	// Size is the file system's size; Free what statfs says is still
	// available to write.
	Size, Free int64
	// Used is what every subvolume of the pool takes, shared data counted
	// once (the pool group's exclusive bytes); Limit the pool group's limit
	// (0: none), past which sandboxes' writes fail while the reserve stays
	// free for the metadata of checkpoints and deletes.
	Used, Limit int64
}

// Reserve is the part of the pool kept from sandboxes' data: a tenth of
// it, at least 256 MiB and at most 4 GiB, unless reserve (from cairnd's
// config) says otherwise; never more than half the pool.
func Reserve(size, reserve int64) int64 {
	if reserve <= 0 {
		reserve = min(max(size/10, 256<<20), 4<<30)
	}
	return min(reserve, size/2)
}

// KeepReserve limits the pool group to the file system's size less the
// reserve (see Reserve) and returns the limit.
func (p *Pool) KeepReserve(ctx context.Context, reserve int64) (int64, error) {
	size, _, err := p.statfs()
	if err != nil {
		return 0, err
	}
	limit := size - Reserve(size, reserve)
	if err := setLimit(p.root, poolGroupID, limit); err != nil {
		return 0, fmt.Errorf("limit the pool group to %d bytes: %w", limit, err)
	}
	return limit, nil
}

// Space returns how full the pool is.
func (p *Pool) Space(ctx context.Context) (Space, error) {
	size, free, err := p.statfs()
	if err != nil {
		return Space{}, err
	}
	groups, err := p.qgroups(ctx)
	if err != nil {
		return Space{}, err
	}
	s := Space{Size: size, Free: free}
	for _, g := range groups {
		if g.id == poolGroup {
			s.Used, s.Limit = g.Exclusive, g.MaxReferenced
		}
	}
	return s, nil
}

// SubvolumeLimit returns the referenced-bytes limit of the subvolume at
// path (0: none) and what it refers to now.
func (p *Pool) SubvolumeLimit(ctx context.Context, path string) (limit, used int64, err error) {
	groups, err := p.qgroups(ctx)
	if err != nil {
		return 0, 0, err
	}
	rel := p.Rel(path)
	for _, g := range groups {
		if g.path == rel {
			return g.MaxReferenced, g.Referenced, nil
		}
	}
	return 0, 0, fmt.Errorf("no quota group for %s", rel)
}

// Size is the size of the pool's file system.
func (p *Pool) Size() (int64, error) {
	size, _, err := p.statfs()
	return size, err
}

func (p *Pool) statfs() (size, free int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(p.root, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs pool: %w", err)
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// IsFull reports whether err is a write refused for want of space: the
// pool full (ENOSPC) or a quota group's limit reached (EDQUOT), however
// the error was wrapped or rendered.
func IsFull(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) || strings.Contains(s, "no space left") || strings.Contains(s, "quota exceeded")
}
