// Package fiemap reads where a file's data lies on disk (the FS_IOC_FIEMAP
// ioctl) and finds the byte ranges two files share on a copy-on-write file
// system: on btrfs, two read-only snapshots' files that map a range to the
// same disk bytes hold the same data there, because shared extents are never
// written in place. That is how a backup reads only what changed in a file
// since the parent snapshot.
package fiemap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Extent is one mapping of a file's bytes to disk bytes.
type Extent struct {
	Logical, Physical, Length uint64
	Flags                     uint32
}

// Extent flags (linux/fiemap.h).
const (
	FlagLast      = 0x1
	FlagUnknown   = 0x2
	FlagDelalloc  = 0x4
	FlagEncoded   = 0x8 // compressed: Physical does not map byte for byte
	FlagEncrypted = 0x80
	FlagUnaligned = 0x100
	FlagInline    = 0x200 // kept in metadata: Physical means nothing
	FlagTail      = 0x400
	FlagUnwritten = 0x800
)

// untrusted are the flags under which equal Physical offsets do not prove
// equal data.
const untrusted = FlagUnknown | FlagDelalloc | FlagEncoded | FlagEncrypted | FlagUnaligned |
	FlagInline | FlagTail | FlagUnwritten

const (
	headerSize = 32 // struct fiemap
	extentSize = 56 // struct fiemap_extent
	batch      = 256
	// FS_IOC_FIEMAP = _IOWR('f', 11, struct fiemap)
	iocFiemap = 3<<30 | headerSize<<16 | 'f'<<8 | 11
)

// Extents returns f's extents in file order.
func Extents(f *os.File) ([]Extent, error) {
	buf := make([]byte, headerSize+batch*extentSize)
	var out []Extent
	start := uint64(0)
	for {
		clear(buf)
		binary.NativeEndian.PutUint64(buf[0:], start)
		binary.NativeEndian.PutUint64(buf[8:], ^uint64(0)-start) // to the end
		binary.NativeEndian.PutUint32(buf[24:], batch)
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), iocFiemap, uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
			return nil, fmt.Errorf("fiemap %s: %w", f.Name(), errno)
		}
		n := int(binary.NativeEndian.Uint32(buf[20:]))
		if n == 0 {
			return out, nil
		}
		for i := range min(n, batch) {
			e := buf[headerSize+i*extentSize:]
			x := Extent{
				Logical:  binary.NativeEndian.Uint64(e[0:]),
				Physical: binary.NativeEndian.Uint64(e[8:]),
				Length:   binary.NativeEndian.Uint64(e[16:]),
				Flags:    binary.NativeEndian.Uint32(e[40:]),
			}
			out = append(out, x)
			if x.Flags&FlagLast != 0 {
				return out, nil
			}
			start = x.Logical + x.Length
		}
	}
}

// Range is a byte range of a file.
type Range struct{ Offset, Length uint64 }

// End is the offset just past r.
func (r Range) End() uint64 { return r.Offset + r.Length }

// Shared returns, in order, the ranges of file offsets that a and b (both
// in file order, as Extents returns them) map to the same disk bytes, leaving
// out extents whose flags make that no proof of equal data.
func Shared(a, b []Extent) []Range {
	var out []Range
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		x, y := a[i], b[j]
		lo, hi := max(x.Logical, y.Logical), min(x.Logical+x.Length, y.Logical+y.Length)
		if lo < hi && (x.Flags|y.Flags)&untrusted == 0 && x.Physical-x.Logical == y.Physical-y.Logical {
			if k := len(out) - 1; k >= 0 && out[k].End() == lo {
				out[k].Length += hi - lo
			} else {
				out = append(out, Range{Offset: lo, Length: hi - lo})
			}
		}
		if x.Logical+x.Length <= y.Logical+y.Length {
			i++
		} else {
			j++
		}
	}
	return out
}

// BTRFS_IOC_FS_INFO = _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args)
const iocFsInfo = 2<<30 | 1024<<16 | 0x94<<8 | 31

// SameCopyOnWrite reports whether a and b are on one btrfs file system:
// the only case in which Shared's ranges are equal data. Other file
// systems (ext4, xfs without reflinks in use) write in place, so an
// unchanged mapping proves nothing there.
func SameCopyOnWrite(a, b string) (bool, error) {
	var ids [2][]byte
	for i, p := range []string{a, b} {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			return false, fmt.Errorf("statfs %s: %w", p, err)
		}
		if st.Type != unix.BTRFS_SUPER_MAGIC {
			return false, nil
		}
		f, err := os.Open(p)
		if err != nil {
			return false, err
		}
		var info [1024]byte
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), iocFsInfo, uintptr(unsafe.Pointer(&info[0])))
		f.Close()
		if errno != 0 {
			return false, fmt.Errorf("btrfs fs info %s: %w", p, errno)
		}
		ids[i] = bytes.Clone(info[16:32]) // fsid, after max_id and num_devices
	}
	return bytes.Equal(ids[0], ids[1]), nil
}
