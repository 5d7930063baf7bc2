package repo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
)

// ErrUnstorable marks a tree the repository cannot store, for a reason
// that stays true however often the upload is tried (a file of a type the
// format has no node for, a manifest over its size limit).
var ErrUnstorable = errors.New("the repository cannot store this tree")

// statNode fills a node's metadata from the entry's lstat. Regular files
// get their size but no extents yet.
func statNode(e *hosttree.Entry) (manifest.Node, error) {
	st := &e.Stat
	n := manifest.Node{
		Path:  e.Path,
		Mode:  st.Mode & 0o7777,
		UID:   st.Uid,
		GID:   st.Gid,
		Mtime: st.Mtim.Nano(),
		Ctime: st.Ctim.Nano(),
		Inode: st.Ino,
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		n.Type = manifest.Dir
	case unix.S_IFREG:
		n.Type, n.Size = manifest.File, uint64(st.Size)
	case unix.S_IFLNK:
		n.Type = manifest.Symlink
		t, err := e.Dir.Readlink(e.Name)
		if err != nil {
			return n, err
		}
		n.Target = t
	case unix.S_IFIFO:
		n.Type = manifest.Fifo
	case unix.S_IFCHR:
		n.Type, n.Rdev = manifest.CharDev, st.Rdev
	case unix.S_IFBLK:
		n.Type, n.Rdev = manifest.BlockDev, st.Rdev
	case unix.S_IFSOCK:
		n.Type = manifest.Socket
	default:
		return n, fmt.Errorf("%s: file type %o: %w", hosttree.Quote(e.Path), st.Mode&unix.S_IFMT, ErrUnstorable)
	}
	p, err := e.Dir.ProcPath(e.Name)
	if err != nil {
		return n, err
	}
	x, err := readXattrs(p)
	if err != nil {
		return n, fmt.Errorf("%s: %w", hosttree.Quote(e.Path), err)
	}
	n.Xattrs = x
	return n, nil
}

// sameFile checks that the open file f is the regular file of lstat st
// (not something put in its place since).
func sameFile(f *os.File, st *unix.Stat_t) error {
	var now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &now); err != nil {
		return err
	}
	if now.Mode&unix.S_IFMT != unix.S_IFREG || now.Ino != st.Ino || now.Dev != st.Dev {
		return errors.New("replaced while it was read")
	}
	return nil
}

// readXattrs reads the extended attributes of the file at p, a short path
// (hosttree's ProcPath), not following a symbolic link at its end.
func readXattrs(p string) ([]manifest.Xattr, error) {
	size, err := unix.Llistxattr(p, nil)
	if errors.Is(err, unix.ENOTSUP) || size == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(p, buf)
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	var out []manifest.Xattr
	for _, name := range strings.Split(string(buf[:size]), "\x00") {
		if name == "" {
			continue
		}
		vsize, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return nil, fmt.Errorf("get xattr %q: %w", name, err)
		}
		val := make([]byte, vsize)
		vsize, err = unix.Lgetxattr(p, name, val)
		if err != nil {
			return nil, fmt.Errorf("get xattr %q: %w", name, err)
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

// makeNode creates the file system object of n, named name in dir (without
// its data and final metadata). Hard links are made to the already
// restored target, found below root.
func makeNode(root, dir *hosttree.Dir, name string, n *manifest.Node) error {
	dfd, err := dir.Fd()
	if err != nil {
		return err
	}
	switch n.Type {
	case manifest.Dir:
		if n.Path == "." {
			return nil
		}
		err = unix.Mkdirat(dfd, name, 0o700)
	case manifest.File:
		var f *os.File
		if f, err = dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			err = f.Truncate(int64(n.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	case manifest.Symlink:
		err = unix.Symlinkat(n.Target, dfd, name)
	case manifest.Hardlink:
		err = linkTo(root, n.Target, dfd, name)
	case manifest.Fifo:
		err = unix.Mknodat(dfd, name, unix.S_IFIFO|0o600, 0)
	case manifest.CharDev:
		err = unix.Mknodat(dfd, name, unix.S_IFCHR|0o600, int(n.Rdev))
	case manifest.BlockDev:
		err = unix.Mknodat(dfd, name, unix.S_IFBLK|0o600, int(n.Rdev))
	case manifest.Socket:
		err = unix.Mknodat(dfd, name, unix.S_IFSOCK|0o600, 0)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", hosttree.Quote(n.Path), err)
	}
	return nil
}

// linkTo makes name in the directory dfd a hard link to target (below
// root).
func linkTo(root *hosttree.Dir, target string, dfd int, name string) error {
	tdir, tname := path.Split(target)
	tfd, err := hosttree.OpenBeneath(root, tdir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	return unix.Linkat(tfd, tname, dfd, name, 0)
}

// applyMeta sets owner, xattrs, mode and times of n, named name in dir
// ("" for dir itself). Owner comes before mode, because chown clears
// setuid and setgid.
func applyMeta(dir *hosttree.Dir, name string, n *manifest.Node) error {
	dfd, err := dir.Fd()
	if err != nil {
		return err
	}
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	q := hosttree.Quote(n.Path)
	if err := unix.Fchownat(dfd, name, int(n.UID), int(n.GID), flags); err != nil {
		return fmt.Errorf("chown %s: %w", q, err)
	}
	if len(n.Xattrs) > 0 {
		p, err := dir.ProcPath(name)
		if err != nil {
			return err
		}
		for _, x := range n.Xattrs {
			if err := unix.Lsetxattr(p, x.Name, x.Value, 0); err != nil {
				return fmt.Errorf("set xattr %q on %s: %w", x.Name, q, err)
			}
		}
	}
	if n.Type != manifest.Symlink {
		at := name
		if at == "" {
			at = "."
		}
		if err := unix.Fchmodat(dfd, at, n.Mode, 0); err != nil {
			return fmt.Errorf("chmod %s: %w", q, err)
		}
	}
	t := unix.NsecToTimespec(n.Mtime)
	at := name
	if at == "" {
		at = "."
	}
	if err := unix.UtimesNanoAt(dfd, at, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", q, err)
	}
	return nil
}
