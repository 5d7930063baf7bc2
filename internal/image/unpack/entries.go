package unpack

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
)

// meta is what an entry says of its object besides its content.
type meta struct {
	uid, gid int
	mode     uint32 // permissions with setuid, setgid and sticky
	ts       [2]unix.Timespec
	xattrs   []xattr // sorted by name
}

type xattr struct {
	name  string
	value []byte
}

// xattrRecord prefixes the PAX records that carry extended attributes.
const xattrRecord = "SCHILY.xattr."

// xattrNameMax is the kernel's XATTR_NAME_MAX.
const xattrNameMax = 255

func metaOf(hdr *tar.Header) (meta, error) {
	m := meta{uid: hdr.Uid, gid: hdr.Gid, mode: uint32(hdr.Mode) & 0o7777}
	// 2³²-1 is chown's "leave it".
	if hdr.Uid < 0 || hdr.Uid >= math.MaxUint32 || hdr.Gid < 0 || hdr.Gid >= math.MaxUint32 {
		return m, fmt.Errorf("%w: owner %d:%d out of range", ErrInvalid, hdr.Uid, hdr.Gid)
	}
	m.ts[1] = timespec(hdr.ModTime)
	m.ts[0] = m.ts[1]
	if !hdr.AccessTime.IsZero() {
		m.ts[0] = timespec(hdr.AccessTime)
	}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, xattrRecord)
		if !ok {
			continue
		}
		if name == "" || len(name) > xattrNameMax {
			return m, fmt.Errorf("%w: an extended attribute named %q", ErrInvalid, name)
		}
		m.xattrs = append(m.xattrs, xattr{name: name, value: []byte(v)})
	}
	slices.SortFunc(m.xattrs, func(a, b xattr) int { return strings.Compare(a.name, b.name) })
	return m, nil
}

// timespec is t for utimensat; the zero time leaves the time as it is.
func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

// applied says whether cairn sets an extended attribute of a layer; see
// docs/image-layers.md. The others are host policy (SELinux, Smack, IMA
// and EVM labels: a layer must not pick the host's labels), overlayfs
// metadata, which would change what the tree means to an overlay, or
// another file system's controls (btrfs.* properties).
func applied(name string) bool {
	switch {
	case strings.HasPrefix(name, "user."):
		return true
	case name == "security.capability":
		return true
	case name == "system.posix_acl_access", name == "system.posix_acl_default":
		return true
	case strings.HasPrefix(name, "trusted.overlay."):
		return false
	case strings.HasPrefix(name, "trusted."):
		return true
	}
	return false
}

// object is what an entry made, for its attributes: open (a regular file
// or directory), or by its name in its directory (a symbolic link, a
// device or FIFO, which are never opened for I/O).
type object struct {
	fd   int // -1 if not open
	dir  *hosttree.Dir
	name string
	path string // below the root, for errors
	kind uint32 // S_IFREG…
}

// setMeta sets owner, mode and extended attributes, in that order: chown
// clears setuid, setgid and security.capability. Times are set apart
// (directories' at the end). merge removes the attributes of the
// namespaces cairn applies that the entry does not have (an existing
// directory takes the entry's attributes).
func (a *applier) setMeta(o object, m meta, merge bool) error {
	dfd, err := o.dir.Fd()
	if err != nil {
		return err
	}
	if o.fd >= 0 {
		err = unix.Fchown(o.fd, m.uid, m.gid)
	} else {
		err = unix.Fchownat(dfd, o.name, m.uid, m.gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return &os.PathError{Op: "chown", Path: hosttree.Quote(o.path), Err: err}
	}
	switch {
	case o.kind == unix.S_IFLNK:
	case o.fd >= 0:
		err = unix.Fchmod(o.fd, m.mode)
	default:
		err = chmodSpecial(dfd, o.name, o.kind, m.mode)
	}
	if err != nil {
		return &os.PathError{Op: "chmod", Path: hosttree.Quote(o.path), Err: err}
	}
	return a.setXattrs(o, m, merge)
}

// chmodSpecial changes the mode of the device or FIFO name in dfd,
// through an O_PATH descriptor of it (chmod has no form that does not
// follow a symbolic link on every kernel).
func chmodSpecial(dfd int, name string, kind, mode uint32) error {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != kind {
		return fmt.Errorf("mode %o, not %o: %w", st.Mode&unix.S_IFMT, kind, ErrInvalid)
	}
	return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), mode, 0)
}

func (a *applier) setXattrs(o object, m meta, merge bool) error {
	var proc string
	for _, x := range m.xattrs {
		plain := o.kind == unix.S_IFREG || o.kind == unix.S_IFDIR
		// The kernel keeps user.* for regular files and directories only.
		if !applied(x.name) || !plain && strings.HasPrefix(x.name, "user.") {
			a.stats.XattrsSkipped++
			continue
		}
		var err error
		if o.fd >= 0 {
			err = unix.Fsetxattr(o.fd, x.name, x.value, 0)
		} else {
			if proc == "" {
				if proc, err = o.dir.ProcPath(o.name); err != nil {
					return err
				}
			}
			err = unix.Lsetxattr(proc, x.name, x.value, 0)
		}
		if errors.Is(err, unix.ENOTSUP) {
			a.stats.XattrsSkipped++
			continue
		}
		if err != nil {
			return fmt.Errorf("set extended attribute %q of %s: %w", x.name, hosttree.Quote(o.path), err)
		}
	}
	if merge && o.fd >= 0 {
		return removeOtherXattrs(o, m)
	}
	return nil
}

// removeOtherXattrs removes the attributes of o, in the namespaces cairn
// applies, that m does not have.
func removeOtherXattrs(o object, m meta) error {
	names, err := listXattrs(o.fd)
	if errors.Is(err, unix.ENOTSUP) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "listxattr", Path: hosttree.Quote(o.path), Err: err}
	}
	for _, name := range names {
		if !applied(name) || slices.ContainsFunc(m.xattrs, func(x xattr) bool { return x.name == name }) {
			continue
		}
		if err := unix.Fremovexattr(o.fd, name); err != nil && !errors.Is(err, unix.ENODATA) {
			return fmt.Errorf("remove extended attribute %q of %s: %w", name, hosttree.Quote(o.path), err)
		}
	}
	return nil
}

func listXattrs(fd int) ([]string, error) {
	for {
		size, err := unix.Flistxattr(fd, nil)
		if err != nil || size == 0 {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Flistxattr(fd, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grew meanwhile
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for name := range strings.SplitSeq(string(buf[:n]), "\x00") {
			if name != "" {
				names = append(names, name)
			}
		}
		return names, nil
	}
}

// setTimes sets the times of name in d, not following a symbolic link.
func setTimes(d *hosttree.Dir, name string, ts [2]unix.Timespec) error {
	dfd, err := d.Fd()
	if err != nil {
		return err
	}
	if err := unix.UtimesNanoAt(dfd, name, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: hosttree.Quote(d.Join(name)), Err: err}
	}
	return nil
}

// clear makes way for a new object named name in d: whatever is there
// goes, a directory with all it holds (and so the layer's nodes below n).
func (a *applier) clear(d *hosttree.Dir, name string, n *node) error {
	dfd, err := d.Fd()
	if err != nil {
		return err
	}
	err = unix.Unlinkat(dfd, name, 0)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EISDIR):
		a.forget(n)
		return a.remove(d, name)
	}
	return &os.PathError{Op: "unlinkat", Path: hosttree.Quote(d.Join(name)), Err: err}
}

// rootDir applies a directory entry for the root itself.
func (a *applier) rootDir(m meta) error {
	fd, err := a.root.Fd()
	if err != nil {
		return err
	}
	o := object{fd: fd, dir: a.root, name: ".", path: ".", kind: unix.S_IFDIR}
	if err := a.setMeta(o, m, true); err != nil {
		return err
	}
	return a.keepDirTimes(fd, &a.layer, m)
}

func (a *applier) keepDirTimes(fd int, n *node, m meta) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if n.times > 0 {
		a.dirs[n.times-1].n = nil // a second entry for it
	}
	a.dirs = append(a.dirs, dirTimes{n: n, dev: st.Dev, ino: st.Ino, ts: m.ts})
	n.times = len(a.dirs)
	return nil
}

// forget drops what the layer knows of the directory n and below, as it
// is removed: their nodes and the times kept for them.
func (a *applier) forget(n *node) {
	if n.times > 0 {
		a.dirs[n.times-1].n = nil
		n.times = 0
	}
	for _, k := range n.kids {
		a.forget(k)
	}
	n.kids = nil
}

// dir applies a directory entry: a directory already there takes its
// attributes and keeps what it holds; anything else is replaced.
func (a *applier) dir(p *hosttree.Dir, name string, n *node, m meta) error {
	st, err := p.Lstat(name)
	merge := err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case merge:
	case err == nil || errors.Is(err, unix.ENOENT):
		if err == nil {
			if err := a.clear(p, name, n); err != nil {
				return err
			}
		}
		dfd, err := p.Fd()
		if err != nil {
			return err
		}
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return &os.PathError{Op: "mkdirat", Path: hosttree.Quote(p.Join(name)), Err: err}
		}
	default:
		return err
	}
	d, err := p.OpenDir(name)
	if err != nil {
		return err
	}
	defer d.Close()
	fd, err := d.Fd()
	if err != nil {
		return err
	}
	o := object{fd: fd, dir: p, name: name, path: d.Rel(), kind: unix.S_IFDIR}
	if err := a.setMeta(o, m, merge); err != nil {
		return err
	}
	return a.keepDirTimes(fd, n, m)
}

// file applies a regular file's entry, its content read from r.
func (a *applier) file(p *hosttree.Dir, name string, n *node, m meta, size int64, r io.Reader) error {
	if size < 0 {
		return fmt.Errorf("%w: size %d", ErrInvalid, size)
	}
	if size > a.maxBytes-a.stats.Bytes {
		return fmt.Errorf("%w: more than %d bytes of files", ErrLimit, a.maxBytes)
	}
	if err := a.clear(p, name, n); err != nil {
		return err
	}
	f, err := p.OpenFile(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	written, err := io.CopyBuffer(struct{ io.Writer }{f}, r, a.buf)
	a.stats.Bytes += written
	if err != nil {
		return fmt.Errorf("write %s: %w", hosttree.Quote(p.Join(name)), readError(err))
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var merr error
	if err := rc.Control(func(fd uintptr) {
		merr = a.setMeta(object{fd: int(fd), dir: p, name: name, path: p.Join(name), kind: unix.S_IFREG}, m, false)
	}); err != nil {
		return err
	}
	if merr != nil {
		return merr
	}
	if err := f.Close(); err != nil {
		return err
	}
	return setTimes(p, name, m.ts)
}

// symlink applies a symbolic link's entry. Its target is kept as it is
// and never followed by anything here.
func (a *applier) symlink(p *hosttree.Dir, name string, n *node, m meta, target string) error {
	if target == "" {
		return fmt.Errorf("%w: a symbolic link to nothing", ErrInvalid)
	}
	if err := a.clear(p, name, n); err != nil {
		return err
	}
	dfd, err := p.Fd()
	if err != nil {
		return err
	}
	if err := unix.Symlinkat(target, dfd, name); err != nil {
		return &os.PathError{Op: "symlinkat", Path: hosttree.Quote(p.Join(name)), Err: err}
	}
	o := object{fd: -1, dir: p, name: name, path: p.Join(name), kind: unix.S_IFLNK}
	if err := a.setMeta(o, m, false); err != nil {
		return err
	}
	return setTimes(p, name, m.ts)
}

// special applies a device's or FIFO's entry.
func (a *applier) special(p *hosttree.Dir, name string, n *node, m meta, hdr *tar.Header) error {
	kind := uint32(unix.S_IFIFO)
	var dev uint64
	if hdr.Typeflag != tar.TypeFifo {
		kind = unix.S_IFCHR
		if hdr.Typeflag == tar.TypeBlock {
			kind = unix.S_IFBLK
		}
		// The kernel's device numbers: 12 bits of major, 20 of minor.
		if hdr.Devmajor < 0 || hdr.Devmajor >= 1<<12 || hdr.Devminor < 0 || hdr.Devminor >= 1<<20 {
			return fmt.Errorf("%w: device %d:%d out of range", ErrInvalid, hdr.Devmajor, hdr.Devminor)
		}
		dev = unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
	}
	if err := a.clear(p, name, n); err != nil {
		return err
	}
	dfd, err := p.Fd()
	if err != nil {
		return err
	}
	if err := unix.Mknodat(dfd, name, kind|0o600, int(dev)); err != nil {
		return &os.PathError{Op: "mknodat", Path: hosttree.Quote(p.Join(name)), Err: err}
	}
	o := object{fd: -1, dir: p, name: name, path: p.Join(name), kind: kind}
	if err := a.setMeta(o, m, false); err != nil {
		return err
	}
	return setTimes(p, name, m.ts)
}

// hardlink applies a hard link's entry: name becomes another name of
// target (a path below the root, of this layer or one below), which is
// looked up without passing a symbolic link. The shared file keeps its
// attributes: a hard link's header changes none of them.
func (a *applier) hardlink(p *hosttree.Dir, name string, n *node, target string) error {
	if target == "" {
		return fmt.Errorf("%w: a hard link to nothing", ErrInvalid)
	}
	tcomps, err := splitName(target)
	if err != nil {
		return fmt.Errorf("hard link target: %w", err)
	}
	if len(tcomps) == 0 {
		return fmt.Errorf("%w: a hard link to the root", ErrInvalid)
	}
	tq := hosttree.Quote(strings.Join(tcomps, "/"))
	td, err := a.root.OpenSub(strings.Join(tcomps[:len(tcomps)-1], "/"))
	if err != nil {
		// Walk again, a name at a time, to say what is in the way.
		c := cursor{root: a.root}
		_, werr := c.to(tcomps[:len(tcomps)-1], nil)
		c.close()
		switch {
		case errors.Is(werr, errMissing):
			return fmt.Errorf("%w: the hard link's target %s does not exist", ErrInvalid, tq)
		case werr != nil:
			return fmt.Errorf("the hard link's target %s: %w", tq, werr)
		}
		return err
	}
	defer td.Close()
	tname := tcomps[len(tcomps)-1]
	tst, err := td.Lstat(tname)
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: the hard link's target %s does not exist", ErrInvalid, tq)
	case err != nil:
		return err
	case tst.Mode&unix.S_IFMT == unix.S_IFDIR:
		return fmt.Errorf("%w: a hard link to the directory %s", ErrInvalid, tq)
	}
	if st, err := p.Lstat(name); err == nil && st.Dev == tst.Dev && st.Ino == tst.Ino {
		return nil // already a name of it (a link to itself, or again)
	}
	if err := a.clear(p, name, n); err != nil {
		return err
	}
	tfd, err := td.Fd()
	if err != nil {
		return err
	}
	dfd, err := p.Fd()
	if err != nil {
		return err
	}
	if err := unix.Linkat(tfd, tname, dfd, name, 0); err != nil {
		return fmt.Errorf("link %s to %s: %w", hosttree.Quote(p.Join(name)), tq, err)
	}
	return nil
}
