package volume

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Subvolumes are made and deleted by ioctl, as the btrfs CLI does, without
// starting a process for each (2-8 ms, on the paths of checkpoints and
// restores).
//
// BTRFS_IOC_SNAP_CREATE_V2 = _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2),
// a 4096-byte struct: fd, transid, flags, a 32-byte union holding the
// size and address of a qgroup inherit list, then the name (4040 bytes).
const (
	volArgsV2Size       = 4096
	volArgsV2NameOffset = 56
	volArgsV2NameMax    = 4039
	subvolReadOnly      = 1 << 1 // BTRFS_SUBVOL_RDONLY
	subvolQgroupInherit = 1 << 2 // BTRFS_SUBVOL_QGROUP_INHERIT
)

var iocSnapCreateV2 = uintptr(1<<30 | volArgsV2Size<<16 | 0x94<<8 | 23)

// poolGroupID is poolGroup ("1/1") as btrfs encodes a qgroup id:
// level << 48 | id.
const poolGroupID = 1<<48 | 1

// snapshotIoctl snapshots the subvolume src to dst in one ioctl, without
// starting a process: the same as `btrfs subvolume snapshot [-r] -i 1/1`.
func snapshotIoctl(src, dst string, readOnly bool) error {
	srcf, err := os.Open(src)
	if err != nil {
		return err
	}
	defer srcf.Close()
	flags := uint64(0)
	if readOnly {
		flags |= subvolReadOnly
	}
	if err := volumeIoctlV2(iocSnapCreateV2, dst, srcf.Fd(), flags); err != nil {
		return fmt.Errorf("snapshot %s to %s: %w", src, dst, err)
	}
	return nil
}

// BTRFS_IOC_SUBVOL_CREATE_V2 = _IOW(0x94, 24, struct btrfs_ioctl_vol_args_v2).
var iocSubvolCreateV2 = uintptr(1<<30 | volArgsV2Size<<16 | 0x94<<8 | 24)

// createIoctl creates the empty subvolume path in one ioctl: the same as
// `btrfs subvolume create -i 1/1`.
func createIoctl(path string) error {
	if err := volumeIoctlV2(iocSubvolCreateV2, path, 0, 0); err != nil {
		return fmt.Errorf("create subvolume %s: %w", path, err)
	}
	return nil
}

// volumeIoctlV2 makes subvolume dst (a snapshot of the subvolume open as
// fd, for iocSnapCreateV2) in the pool's quota group, with flags.
func volumeIoctlV2(ioc uintptr, dst string, fd uintptr, flags uint64) error {
	dir, name, err := openParent(dst, volArgsV2NameMax)
	if err != nil {
		return err
	}
	defer dir.Close()

	// struct btrfs_qgroup_inherit: flags, num_qgroups, num_ref_copies,
	// num_excl_copies, a 40-byte limit, then the qgroup ids.
	inherit := make([]byte, 72+8)
	binary.LittleEndian.PutUint64(inherit[8:], 1) // num_qgroups
	binary.LittleEndian.PutUint64(inherit[72:], poolGroupID)

	var args [volArgsV2Size]byte
	binary.LittleEndian.PutUint64(args[0:], uint64(fd))
	binary.LittleEndian.PutUint64(args[16:], flags|subvolQgroupInherit)
	binary.LittleEndian.PutUint64(args[24:], uint64(len(inherit)))
	binary.LittleEndian.PutUint64(args[32:], uint64(uintptr(unsafe.Pointer(&inherit[0]))))
	copy(args[volArgsV2NameOffset:], name)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, dir.Fd(), ioc, uintptr(unsafe.Pointer(&args[0])))
	runtime.KeepAlive(inherit)
	if errno != 0 {
		return errno
	}
	return nil
}

// BTRFS_IOC_SNAP_DESTROY = _IOW(0x94, 15, struct btrfs_ioctl_vol_args): a
// 4096-byte struct, an fd (unused) then the name.
const (
	volArgsSize    = 4096
	volArgsNameMax = 4087
)

var iocSnapDestroy = uintptr(1<<30 | volArgsSize<<16 | 0x94<<8 | 15)

// destroyIoctl deletes the subvolume path in one ioctl: the same as `btrfs
// subvolume delete` (which makes this call). Like it, it leaves the space
// to btrfs' cleaner.
func destroyIoctl(path string) error {
	dir, name, err := openParent(path, volArgsNameMax)
	if err != nil {
		return fmt.Errorf("delete subvolume %s: %w", path, err)
	}
	defer dir.Close()
	var args [volArgsSize]byte
	copy(args[8:], name)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, dir.Fd(), iocSnapDestroy, uintptr(unsafe.Pointer(&args[0]))); errno != 0 {
		return fmt.Errorf("delete subvolume %s: %w", path, errno)
	}
	return nil
}

// openParent opens the directory path is in, for an ioctl on the entry
// named by path's last element, which must fit in nameMax bytes.
func openParent(path string, nameMax int) (*os.File, string, error) {
	name := filepath.Base(path)
	if len(name) > nameMax || name == "." || name == "/" {
		return nil, "", fmt.Errorf("bad name %q", name)
	}
	dir, err := os.Open(filepath.Dir(path))
	return dir, name, err
}
