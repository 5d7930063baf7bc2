package buildctx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrDest: a destination a COPY or ADD cannot copy to: several sources
// to a path that does not end in "/", a directory onto a file, a file
// onto a directory, a path through a file.
var ErrDest = errors.New("bad destination")

// ErrUnsupported: a source that is a device, socket or FIFO (inside a
// directory copied, those are left out).
var ErrUnsupported = errors.New("cannot be copied")

// CopyOptions say how Copy copies.
type CopyOptions struct {
	// UID and GID own everything copied and every directory made for
	// the destination (--chown; 0:0 without it), but what an archive
	// extracts, which keeps the archive's owners.
	UID, GID uint32
	// Chmod, if not nil, is the mode of every file and directory copied
	// (--chmod); symbolic links keep theirs, the directories made for
	// the destination's path are 0755, and what an archive extracts
	// keeps the archive's modes.
	Chmod *fs.FileMode
	// ExtractArchives makes Copy an ADD: a source that is a regular file
	// holding a tar (plain, gzip, bzip2 or zstd; detected by content,
	// not by name) is extracted into the destination (a directory, made
	// if missing, whether or not its name ends in "/") instead of
	// copied, by the layer applier (package unpack): no entry may leave
	// the destination or pass a symbolic link, and whiteouts are
	// applied. An xz-compressed tar is an error wrapping ErrArchive.
	ExtractArchives bool
	// MaxBytes bounds the file content an archive extracts (0: the
	// layer applier's default).
	MaxBytes int64
	// WorkDir is what a relative destination is below ("" is "/").
	WorkDir string
}

// Copy copies sources (from Sources) into the image root root, the open
// directory of the step's writable tree, to dest, a path of the image
// (relative ones below WorkDir), by Docker's rules:
//
//   - a directory source copies what it holds, not itself, into dest
//     (made if missing, with the source directory's mode);
//   - a file or symbolic link goes to dest/NAME when dest ends in "/" or
//     is a directory, else to dest itself;
//   - more than one source needs a dest that ends in "/";
//   - the missing directories of dest's path are made 0755, owned by
//     UID:GID (as Docker does with --chown, and root without).
//
// What is copied gets UID:GID, its modes (or Chmod) and modification
// times; files already there are replaced (a symbolic link at the name
// is replaced itself, never written through), directories already there
// are merged into and keep their own owner, mode and times (a link to a
// directory of the root is merged into too); inside a directory copied, a
// file or other link where a directory goes is replaced by it, but the
// destination itself must be a directory or missing, and a directory
// where a file goes is an error (ErrDest). Devices, sockets and FIFOs inside a
// directory are left out; one as a source is an error (ErrUnsupported).
//
// The root's content is untrusted (earlier steps ran in it). Every path
// of the image is resolved as a container would resolve it, its symbolic
// links followed but inside the root (openat2 with RESOLVE_IN_ROOT: a link
// to "/etc" leads to the root's /etc, and ".." stops at the root's top),
// and every name is made, replaced, chowned and chmodded through the
// descriptor of its directory without following a link: nothing outside
// the root is ever read, written or changed. Copy stops at the first
// error and leaves what it had done (the step's tree is thrown away).
func Copy(ctx context.Context, root *os.File, sources []Source, dest string, opts CopyOptions) error {
	if len(sources) == 0 {
		return errors.New("copy: no sources")
	}
	comps, dirDest, err := destPath(dest, opts.WorkDir)
	if err != nil {
		return err
	}
	if len(sources) > 1 && !dirDest {
		return fmt.Errorf("%w: %q: when copying more than one source, the destination must be a directory and end with a /", ErrDest, dest)
	}
	c := &copier{ctx: ctx, rootfd: fdOf(root), opts: opts, buf: make([]byte, 256<<10)}
	if !dirDest {
		dirDest = c.isDir(comps)
	}
	for i := range sources {
		s := &sources[i]
		switch {
		case s.IsDir():
			err = c.copyDir(s, comps)
		case opts.ExtractArchives && s.Mode.IsRegular():
			var done bool
			if done, err = c.extract(s, comps); err == nil && !done {
				err = c.copyOne(s, comps, dirDest)
			}
		default:
			err = c.copyOne(s, comps, dirDest)
		}
		if err != nil {
			return fmt.Errorf("copy %q to %q: %w", s.Path, dest, err)
		}
	}
	return nil
}

// destPath returns the components of dest below the image's root, and
// whether dest names a directory by its form (a trailing "/" or "/.").
func destPath(dest, workDir string) ([]string, bool, error) {
	if dest == "" {
		return nil, false, fmt.Errorf("%w: an empty destination", ErrDest)
	}
	if strings.IndexByte(dest, 0) >= 0 {
		return nil, false, fmt.Errorf("%w: a NUL byte in %q", ErrDest, dest)
	}
	dir := strings.HasSuffix(dest, "/") || strings.HasSuffix(dest, "/.") || dest == "."
	p := dest
	if !path.IsAbs(p) {
		if workDir == "" {
			workDir = "/"
		}
		p = path.Join("/", workDir, p)
	}
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	comps := splitRel(rel)
	return comps, dir || len(comps) == 0, nil
}

type copier struct {
	ctx    context.Context
	rootfd int
	opts   CopyOptions
	buf    []byte
	// copyDir's destination, and the directories it is in, from the
	// destination down.
	destComps []string
	stack     []target
}

// target is a directory copied into: open, at cpath below the root (as
// the copy named it, symbolic links not resolved), made by the copy or
// not.
type target struct {
	dir   *os.File
	cpath string
	made  bool
}

// isDir reports whether comps is a directory of the image (following
// links inside the root).
func (c *copier) isDir(comps []string) bool {
	fd, err := openIn(c.rootfd, strings.Join(comps, "/"), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// mkdirAll opens the directory comps of the image, making what is
// missing of it: 0755, owned by UID:GID.
func (c *copier) mkdirAll(comps []string) (*os.File, error) {
	fd, err := unix.Openat(c.rootfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	cur := openFile(fd, "/")
	for i, name := range comps {
		cpath := strings.Join(comps[:i+1], "/")
		fd, err := openIn(c.rootfd, cpath, unix.O_RDONLY|unix.O_DIRECTORY)
		if errors.Is(err, unix.ENOENT) {
			var d *os.File
			if d, err = c.mkdir(cur, name, 0o755); err == nil {
				cur.Close()
				cur = d
				continue
			}
		}
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("%w: /%s: not a directory", ErrDest, cpath)
		}
		if err != nil {
			cur.Close()
			return nil, err
		}
		cur.Close()
		cur = openFile(fd, "/"+cpath)
	}
	return cur, nil
}

// mkdir makes the directory name in d (which must not exist), owned by
// UID:GID with mode, and opens it.
func (c *copier) mkdir(d *os.File, name string, mode uint32) (*os.File, error) {
	dfd := fdOf(d)
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return nil, &os.PathError{Op: "mkdirat", Path: d.Name() + "/" + name, Err: err}
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: d.Name() + "/" + name, Err: err}
	}
	f := openFile(fd, path.Join(d.Name(), name))
	if err := c.own(fd, mode); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "chown", Path: f.Name(), Err: err}
	}
	return f, nil
}

// own gives the open file fd its owner UID:GID, then mode (chown clears
// setuid and setgid).
func (c *copier) own(fd int, mode uint32) error {
	if err := unix.Fchown(fd, int(c.opts.UID), int(c.opts.GID)); err != nil {
		return err
	}
	return unix.Fchmod(fd, mode)
}

// mode is the mode a copied file or directory gets.
func (c *copier) mode(st *unix.Stat_t) uint32 {
	if c.opts.Chmod != nil {
		return unixMode(*c.opts.Chmod)
	}
	return st.Mode & 0o7777
}

// copyOne copies the file or symbolic link s to comps: into it as s's
// name when dir, else as comps itself.
func (c *copier) copyOne(s *Source, comps []string, dir bool) error {
	name := s.name
	if !dir {
		name = comps[len(comps)-1]
		comps = comps[:len(comps)-1]
	}
	d, err := c.mkdirAll(comps)
	if err != nil {
		return err
	}
	defer d.Close()
	c.stack = []target{{dir: d, cpath: strings.Join(comps, "/")}}
	defer func() { c.stack = nil }()
	parent, err := s.openParent()
	if err != nil {
		return err
	}
	defer parent.Close()
	st, err := lstatAt(fdOf(parent), s.name)
	if err != nil {
		return &os.PathError{Op: "lstat", Path: s.Path, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, err := openChild(fdOf(parent), s.name, s.Path, unix.O_RDONLY, &st)
		if err != nil {
			return err
		}
		defer f.Close()
		return c.put(name, &st, f, "")
	case unix.S_IFLNK:
		target, err := readlinkAt(fdOf(parent), s.name)
		if err != nil {
			return &os.PathError{Op: "readlink", Path: s.Path, Err: err}
		}
		return c.put(name, &st, nil, target)
	}
	return fmt.Errorf("%w: %s is a device, socket or FIFO", ErrUnsupported, s.Path)
}

// copyDir copies what the directory s holds into comps.
func (c *copier) copyDir(s *Source, comps []string) error {
	defer func() {
		for _, t := range c.stack {
			t.dir.Close()
		}
		c.stack = nil
	}()
	c.destComps = comps
	return s.walk(c.ctx, c)
}

var _ visitor = (*copier)(nil)

func (c *copier) top() *target { return &c.stack[len(c.stack)-1] }

func (c *copier) enter(rel string, st *unix.Stat_t) error {
	if rel == "." {
		return c.enterDest(st)
	}
	t := c.top()
	name := path.Base(rel)
	dfd := fdOf(t.dir)
	cpath := joinRel(t.cpath, name)
	cur, err := lstatAt(dfd, name)
	switch {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return &os.PathError{Op: "lstat", Path: "/" + cpath, Err: err}
	case cur.Mode&unix.S_IFMT == unix.S_IFDIR:
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "openat", Path: "/" + cpath, Err: err}
		}
		c.stack = append(c.stack, target{dir: openFile(fd, "/"+cpath), cpath: cpath})
		return nil
	case cur.Mode&unix.S_IFMT == unix.S_IFLNK:
		// A link to a directory (inside the root) is merged into, as a
		// container's cp would; any other link is replaced.
		if fd, err := openIn(c.rootfd, cpath, unix.O_RDONLY|unix.O_DIRECTORY); err == nil {
			c.stack = append(c.stack, target{dir: openFile(fd, "/"+cpath), cpath: cpath})
			return nil
		}
		fallthrough
	default:
		if err := unix.Unlinkat(dfd, name, 0); err != nil {
			return &os.PathError{Op: "unlinkat", Path: "/" + cpath, Err: err}
		}
	}
	d, err := c.mkdir(t.dir, name, c.mode(st))
	if err != nil {
		return err
	}
	c.stack = append(c.stack, target{dir: d, cpath: cpath, made: true})
	return nil
}

// enterDest opens the destination of a directory source, made with the
// source's mode if missing.
func (c *copier) enterDest(st *unix.Stat_t) error {
	comps := c.destComps
	if c.isDir(comps) {
		d, err := c.mkdirAll(comps)
		if err != nil {
			return err
		}
		c.stack = append(c.stack, target{dir: d, cpath: strings.Join(comps, "/")})
		return nil
	}
	if len(comps) == 0 {
		return fmt.Errorf("%w: the root is not a directory", ErrDest)
	}
	parent, err := c.mkdirAll(comps[:len(comps)-1])
	if err != nil {
		return err
	}
	defer parent.Close()
	name := comps[len(comps)-1]
	if _, err := lstatAt(fdOf(parent), name); err == nil {
		return fmt.Errorf("%w: /%s: cannot copy a directory onto something that is not one", ErrDest, strings.Join(comps, "/"))
	}
	d, err := c.mkdir(parent, name, c.mode(st))
	if err != nil {
		return err
	}
	c.stack = append(c.stack, target{dir: d, cpath: strings.Join(comps, "/"), made: true})
	return nil
}

func (c *copier) leave(rel string, st *unix.Stat_t) error {
	t := c.top()
	var err error
	if t.made {
		ts := []unix.Timespec{st.Atim, st.Mtim}
		ts[0] = ts[1]
		if err = unix.UtimesNanoAt(fdOf(t.dir), "", ts, unix.AT_EMPTY_PATH); err != nil {
			err = &os.PathError{Op: "utimensat", Path: t.dir.Name(), Err: err}
		}
	}
	t.dir.Close()
	c.stack = c.stack[:len(c.stack)-1]
	return err
}

func (c *copier) file(rel string, st *unix.Stat_t, f *os.File) error {
	return c.put(path.Base(rel), st, f, "")
}

func (c *copier) symlink(rel string, st *unix.Stat_t, target string) error {
	return c.put(path.Base(rel), st, nil, target)
}

// put makes name in the top directory: the regular file st with f's
// content, or (f nil) the symbolic link to target, replacing what is
// there (but a directory).
func (c *copier) put(name string, st *unix.Stat_t, f *os.File, target string) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	t := c.top()
	dfd := fdOf(t.dir)
	cpath := "/" + joinRel(t.cpath, name)
	if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		if errors.Is(err, unix.EISDIR) {
			return fmt.Errorf("%w: %s: cannot replace a directory with a file", ErrDest, cpath)
		}
		return &os.PathError{Op: "unlinkat", Path: cpath, Err: err}
	}
	ts := []unix.Timespec{st.Mtim, st.Mtim}
	if f == nil {
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return &os.PathError{Op: "symlinkat", Path: cpath, Err: err}
		}
		if err := unix.Fchownat(dfd, name, int(c.opts.UID), int(c.opts.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &os.PathError{Op: "chown", Path: cpath, Err: err}
		}
	} else {
		fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return &os.PathError{Op: "openat", Path: cpath, Err: err}
		}
		out := openFile(fd, cpath)
		defer out.Close()
		n, err := io.CopyBuffer(out, io.LimitReader(f, st.Size), c.buf)
		if err != nil {
			return fmt.Errorf("write %s: %w", cpath, err)
		}
		if n != st.Size {
			return fmt.Errorf("%s: the source changed while read (%d bytes, not %d)", cpath, n, st.Size)
		}
		if err := c.own(fd, c.mode(st)); err != nil {
			return &os.PathError{Op: "chown", Path: cpath, Err: err}
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	if err := unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: cpath, Err: err}
	}
	return nil
}
