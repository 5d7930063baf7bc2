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
	name := filepath.Base(dst)
	if len(name) > volArgsV2NameMax || name == "." || name == "/" {
		return fmt.Errorf("snapshot %s: bad name %q", dst, name)
	}
	srcf, err := os.Open(src)
	if err != nil {
		return err
	}
	defer srcf.Close()
	dir, err := os.Open(filepath.Dir(dst))
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
	binary.LittleEndian.PutUint64(args[0:], uint64(srcf.Fd()))
	flags := uint64(subvolQgroupInherit)
	if readOnly {
		flags |= subvolReadOnly
	}
	binary.LittleEndian.PutUint64(args[16:], flags)
	binary.LittleEndian.PutUint64(args[24:], uint64(len(inherit)))
	binary.LittleEndian.PutUint64(args[32:], uint64(uintptr(unsafe.Pointer(&inherit[0]))))
	copy(args[volArgsV2NameOffset:], name)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, dir.Fd(), iocSnapCreateV2, uintptr(unsafe.Pointer(&args[0])))
	runtime.KeepAlive(inherit)
	if errno != 0 {
		return fmt.Errorf("snapshot %s to %s: %w", src, dst, errno)
	}
	return nil
}
