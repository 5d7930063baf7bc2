package repo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
)

// statNode fills a node's metadata from an lstat of p (the path relative to
// the tree's root is rel). Regular files get their size but no extents yet.
func statNode(p, rel string) (manifest.Node, *syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return manifest.Node{}, nil, fmt.Errorf("lstat %s: %w", p, err)
	}
	n := manifest.Node{
		Path:  rel,
		Mode:  st.Mode & 0o7777,
		UID:   st.Uid,
		GID:   st.Gid,
		Mtime: st.Mtim.Nano(),
		Ctime: st.Ctim.Nano(),
		Inode: st.Ino,
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		n.Type = manifest.Dir
	case syscall.S_IFREG:
		n.Type, n.Size = manifest.File, uint64(st.Size)
	case syscall.S_IFLNK:
		n.Type = manifest.Symlink
		t, err := os.Readlink(p)
		if err != nil {
			return n, nil, fmt.Errorf("readlink %s: %w", p, err)
		}
		n.Target = t
	case syscall.S_IFIFO:
		n.Type = manifest.Fifo
	case syscall.S_IFCHR:
		n.Type, n.Rdev = manifest.CharDev, st.Rdev
	case syscall.S_IFBLK:
		n.Type, n.Rdev = manifest.BlockDev, st.Rdev
	case syscall.S_IFSOCK:
		n.Type = manifest.Socket
	default:
		return n, nil, fmt.Errorf("%s: unknown file type %o", p, st.Mode&syscall.S_IFMT)
	}
	x, err := readXattrs(p)
	if err != nil {
		return n, nil, err
	}
	n.Xattrs = x
	return n, &st, nil
}

func readXattrs(p string) ([]manifest.Xattr, error) {
	size, err := unix.Llistxattr(p, nil)
	if errors.Is(err, unix.ENOTSUP) || size == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs of %s: %w", p, err)
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(p, buf)
	if err != nil {
		return nil, fmt.Errorf("list xattrs of %s: %w", p, err)
	}
	var out []manifest.Xattr
	for _, name := range strings.Split(string(buf[:size]), "\x00") {
		if name == "" {
			continue
		}
		vsize, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return nil, fmt.Errorf("get xattr %s of %s: %w", name, p, err)
		}
		val := make([]byte, vsize)
		vsize, err = unix.Lgetxattr(p, name, val)
		if err != nil {
			return nil, fmt.Errorf("get xattr %s of %s: %w", name, p, err)
		}
		out = append(out, manifest.Xattr{Name: name, Value: val[:vsize]})
	}
	return out, nil
}

// dataExtents returns the data ranges of an open file of the given size,
// using SEEK_DATA/SEEK_HOLE; a file system without them gives one extent.
func dataExtents(f *os.File, size int64) ([]manifest.Extent, error) {
	if size == 0 {
		return nil, nil
	}
	fd := int(f.Fd())
	var out []manifest.Extent
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return []manifest.Extent{{Offset: 0, Length: uint64(size)}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("seek data in %s: %w", f.Name(), err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("seek hole in %s: %w", f.Name(), err)
		}
		end = min(end, size)
		if end > start {
			out = append(out, manifest.Extent{Offset: uint64(start), Length: uint64(end - start)})
		}
		off = end
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return out, nil
}

// streamReader reads a file's extents back to back, from stream offset
// from (the offset in that back-to-back stream) on.
func streamReader(f *os.File, extents []manifest.Extent, from uint64) io.Reader {
	rs := make([]io.Reader, 0, len(extents))
	for _, x := range extents {
		if from >= x.Length {
			from -= x.Length
			continue
		}
		rs = append(rs, io.NewSectionReader(f, int64(x.Offset+from), int64(x.Length-from)))
		from = 0
	}
	return io.MultiReader(rs...)
}

// makeNode creates the file system object of n at p (without its data and
// final metadata). Hard links are made to the already restored target.
func makeNode(root, p string, n *manifest.Node) error {
	var err error
	switch n.Type {
	case manifest.Dir:
		if n.Path == "." {
			return nil
		}
		err = os.Mkdir(p, 0o700)
	case manifest.File:
		var f *os.File
		if f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			err = f.Truncate(int64(n.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	case manifest.Symlink:
		err = os.Symlink(n.Target, p)
	case manifest.Hardlink:
		err = os.Link(filepath.Join(root, filepath.FromSlash(n.Target)), p)
	case manifest.Fifo:
		err = unix.Mkfifo(p, 0o600)
	case manifest.CharDev:
		err = unix.Mknod(p, unix.S_IFCHR|0o600, int(n.Rdev))
	case manifest.BlockDev:
		err = unix.Mknod(p, unix.S_IFBLK|0o600, int(n.Rdev))
	case manifest.Socket:
		err = unix.Mknod(p, unix.S_IFSOCK|0o600, 0)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", n.Path, err)
	}
	return nil
}

// applyMeta sets owner, xattrs, mode and times of n on p. Owner comes before
// mode, because chown clears setuid and setgid.
func applyMeta(p string, n *manifest.Node) error {
	if err := os.Lchown(p, int(n.UID), int(n.GID)); err != nil {
		return fmt.Errorf("chown %s: %w", n.Path, err)
	}
	for _, x := range n.Xattrs {
		if err := unix.Lsetxattr(p, x.Name, x.Value, 0); err != nil {
			return fmt.Errorf("set xattr %s on %s: %w", x.Name, n.Path, err)
		}
	}
	if n.Type != manifest.Symlink {
		if err := unix.Chmod(p, n.Mode); err != nil {
			return fmt.Errorf("chmod %s: %w", n.Path, err)
		}
	}
	t := unix.NsecToTimespec(n.Mtime)
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", n.Path, err)
	}
	return nil
}
