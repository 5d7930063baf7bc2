package volume

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// subvolInfoSize is sizeof(struct btrfs_ioctl_get_subvol_info_args).
const subvolInfoSize = 504

// ctransidOffset is the offset of ctransid in that struct: treeid (8),
// name (256), parent_id, dirid, generation, flags (4×8), three uuids (3×16).
const ctransidOffset = 8 + 256 + 4*8 + 3*16

// BTRFS_IOC_GET_SUBVOL_INFO = _IOR(0x94, 60, struct btrfs_ioctl_get_subvol_info_args)
var iocGetSubvolInfo = uintptr(2<<30 | subvolInfoSize<<16 | 0x94<<8 | 60)

// subvolumeID returns the btrfs tree id of the subvolume at path.
func subvolumeID(path string) (uint64, error) {
	info, err := subvolInfo(path)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(info[0:]), nil
}

func subvolInfo(path string) ([subvolInfoSize]byte, error) {
	var buf [subvolInfoSize]byte
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), iocGetSubvolInfo, uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
		return buf, fmt.Errorf("btrfs subvolume info %s: %w", path, errno)
	}
	return buf, nil
}

// ChangeMarker returns the transaction id of the last change to any file
// in the subvolume at path (btrfs' ctransid). It moves as soon as a file is
// written, created or removed, is untouched by reads and by snapshots of
// the subvolume, and costs one ioctl: comparing two markers tells whether
// the disk changed in between without scanning anything.
func ChangeMarker(path string) (uint64, error) {
	info, err := subvolInfo(path)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(info[ctransidOffset:]), nil
}

// SubvolumeID returns the btrfs tree id of the subvolume at path. Two
// subvolumes that exist at the same time never share one, so comparing the
// id found at a path with one recorded earlier tells whether another
// subvolume was swapped in there meanwhile (Exchange).
func (p *Pool) SubvolumeID(path string) (uint64, error) {
	return subvolumeID(path)
}
