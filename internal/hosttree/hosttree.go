// Package hosttree reads and writes a sandbox's file tree on the host
// through directory descriptors, never through full paths: every call is
// an *at system call (openat2, fstatat, readlinkat, mkdirat…) on one name in
// an open directory, so no path is ever longer than a name, and no
// symbolic link is ever followed. A sandbox can make a tree of any depth
// (1,000 nested directories already pass PATH_MAX), names of 255 bytes,
// and names with any byte but '/' and NUL; all of them are handled here.
//
// Names are Go strings holding the exact bytes of the name, valid UTF-8 or
// not. Relative paths join names with '/', "." being the root.
package hosttree

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// resolve is how OpenBeneath resolves a path: below the directory, through
// no symbolic link at all and onto no other mount.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// pathPiece bounds the part of a path given to one openat2 call, below
// PATH_MAX (4,096 bytes with its NUL).
const pathPiece = 4000

// Dir is an open directory of a tree. The root of a tree is opened with
// OpenRoot; the others are opened below it. A Dir below the root may be
// released (its descriptor closed) to bound the descriptors a deep walk
// holds; it is opened again, from the root and checked to be the same
// directory, when next used.
type Dir struct {
	fd       int
	root     *Dir   // nil for a root
	rel      string // below root; "." for a root
	dev, ino uint64
}

// OpenRoot opens the directory at path (an ordinary host path, which must
// not end in a symbolic link) as the root of a tree.
func OpenRoot(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	d := &Dir{fd: fd, rel: "."}
	if err := d.identify(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return d, nil
}

// RootAt makes a root of a tree of the open directory fd, with a
// descriptor of its own (a duplicate: the caller still closes fd).
func RootAt(fd int) (*Dir, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate the root's descriptor: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(dup, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(dup)
		if err == nil {
			err = unix.ENOTDIR
		}
		return nil, fmt.Errorf("root: %w", err)
	}
	return &Dir{fd: dup, rel: ".", dev: st.Dev, ino: st.Ino}, nil
}

func (d *Dir) identify() error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return err
	}
	d.dev, d.ino = st.Dev, st.Ino
	return nil
}

// Rel is the directory's path below its tree's root ("." for the root).
func (d *Dir) Rel() string { return d.rel }

// Fd returns the directory's descriptor, opening it again if it was
// released. It stays valid until Close or Release.
func (d *Dir) Fd() (int, error) {
	if d.fd >= 0 {
		return d.fd, nil
	}
	fd, err := OpenBeneath(d.root, d.rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Dev != d.dev || st.Ino != d.ino {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", Quote(d.rel), ErrMoved)
	}
	d.fd = fd
	return fd, nil
}

// ErrMoved says a released directory is no longer where it was: the tree
// changed during the walk (only a live tree can).
var ErrMoved = errors.New("directory moved during the walk")

// Release closes the descriptor of a directory below the root until it is
// next used. A root is never released.
func (d *Dir) Release() {
	if d.root != nil && d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// Close closes the directory.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// treeRoot is the root of d's tree.
func (d *Dir) treeRoot() *Dir {
	if d.root == nil {
		return d
	}
	return d.root
}

// Join returns the path below the root of name in d.
func (d *Dir) Join(name string) string {
	if d.rel == "." {
		return name
	}
	return d.rel + "/" + name
}

// OpenDir opens the directory name in d (not a symbolic link to one).
func (d *Dir) OpenDir(name string) (*Dir, error) {
	fd, err := d.openat(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	c := &Dir{fd: fd, root: d.treeRoot(), rel: d.Join(name)}
	if err := c.identify(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return c, nil
}

func (d *Dir) openat(name string, flags int, mode uint32) (int, error) {
	dfd, err := d.Fd()
	if err != nil {
		return -1, err
	}
	for {
		fd, err := unix.Openat(dfd, name, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, mode)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "openat", Path: Quote(d.Join(name)), Err: err}
		}
		return fd, nil
	}
}

// OpenFile opens the file name in d with flags (O_NOFOLLOW is added: a
// symbolic link is never opened through). A name of "" opens d itself.
func (d *Dir) OpenFile(name string, flags int, mode uint32) (*os.File, error) {
	if name == "" {
		name = "."
	}
	fd, err := d.openat(name, flags, mode)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), d.Join(name)), nil
}

// Lstat returns the status of name in d, not following a symbolic link;
// "" is d itself.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	dfd, err := d.Fd()
	if err != nil {
		return st, err
	}
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Fstatat(dfd, name, &st, flags); err != nil {
		return st, &os.PathError{Op: "lstat", Path: Quote(d.Join(name)), Err: err}
	}
	return st, nil
}

// Readlink returns the target of the symbolic link name in d, whatever
// its length.
func (d *Dir) Readlink(name string) (string, error) {
	dfd, err := d.Fd()
	if err != nil {
		return "", err
	}
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: Quote(d.Join(name)), Err: err}
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// Names returns the names in d, sorted by their bytes.
func (d *Dir) Names() ([]string, error) {
	f, err := d.OpenFile(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", Quote(d.rel), err)
	}
	slices.Sort(names)
	return names, nil
}

// ProcPath returns a short host path that names name in d for the calls
// that have no *at form (extended attributes): /proc/self/fd/N/name. The
// last component is not followed by the l* calls (lgetxattr…); "" names d
// itself. It is valid while d's descriptor is.
func (d *Dir) ProcPath(name string) (string, error) {
	dfd, err := d.Fd()
	if err != nil {
		return "", err
	}
	if name == "" {
		name = "."
	}
	return "/proc/self/fd/" + strconv.Itoa(dfd) + "/" + name, nil
}

// OpenBeneath opens rel, a path below d's directory, with flags, refusing
// any path that would leave it, pass a symbolic link or cross a mount,
// whatever its length: a path longer than PATH_MAX is opened a few
// thousand bytes at a time, each piece below the last. rel "" or "." is d
// itself.
func OpenBeneath(d *Dir, rel string, flags int) (int, error) {
	dfd, err := d.Fd()
	if err != nil {
		return -1, err
	}
	return OpenBeneathFd(dfd, rel, flags)
}

// OpenBeneathFd is OpenBeneath from a directory descriptor.
func OpenBeneathFd(dirfd int, rel string, flags int) (int, error) {
	if rel == "" {
		rel = "."
	}
	cur := dirfd
	defer func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}()
	for len(rel) > pathPiece {
		cut := strings.LastIndexByte(rel[:pathPiece], '/')
		if cut <= 0 {
			return -1, &os.PathError{Op: "openat2", Path: Quote(rel[:min(len(rel), 64)]) + "…", Err: unix.ENAMETOOLONG}
		}
		fd, err := openat2(cur, rel[:cut], unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return -1, &os.PathError{Op: "openat2", Path: Quote(Shorten(rel[:cut], 200)), Err: err}
		}
		if cur != dirfd {
			unix.Close(cur)
		}
		cur, rel = fd, rel[cut+1:]
	}
	fd, err := openat2(cur, rel, flags)
	if err != nil {
		return -1, &os.PathError{Op: "openat2", Path: Quote(Shorten(rel, 200)), Err: err}
	}
	return fd, nil
}

func openat2(dirfd int, rel string, flags int) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: resolve}
	for {
		fd, err := unix.Openat2(dirfd, rel, how)
		// EAGAIN: a rename raced the resolution; try again.
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		return fd, err
	}
}

// Quote returns a relative path as printable text for errors and logs:
// quoted with Go escapes (a newline, an escape or an invalid byte never
// reaches a log raw) and cut to its first and last bytes when long.
func Quote(rel string) string {
	return strconv.Quote(Shorten(rel, 160))
}

// Shorten keeps at most n bytes of s: its start and end around "…".
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + "…" + s[len(s)-n/2:]
}

// OpenSub opens the directory rel below d (see OpenBeneath).
func (d *Dir) OpenSub(rel string) (*Dir, error) {
	if rel == "" || rel == "." {
		rel = "."
	}
	fd, err := OpenBeneath(d, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	c := &Dir{fd: fd, root: d.treeRoot(), rel: rel}
	if d.rel != "." {
		c.rel = d.Join(rel)
	}
	if err := c.identify(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return c, nil
}
