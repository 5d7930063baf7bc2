package unpack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
)

// Errors that say what kind of layer failed; the errors Apply returns wrap
// one of them (or the context's error, or an I/O error of the file
// system or of the layer's reader) and name the entry.
var (
	// ErrInvalid: not a tar stream, a malformed header, a value out of
	// range, or an entry that cannot be applied (a file where a
	// directory should be, a hard link to nothing or to a directory).
	ErrInvalid = errors.New("invalid layer")
	// ErrUnsafe: an entry that would reach outside the root: a ".."
	// component, or a path through a symbolic link in the tree.
	ErrUnsafe = errors.New("unsafe path")
	// ErrLimit: the layer is over one of the limits.
	ErrLimit = errors.New("layer over a limit")
)

// Limits on one name (of an entry or a hard link's target); they are far
// past what images hold, and bound what walking to a name costs.
const (
	MaxNameLen = 64 << 10 // bytes
	MaxDepth   = 1024     // components
)

// Defaults of Options' limits.
const (
	DefaultMaxEntries = 1 << 20
	DefaultMaxBytes   = 64 << 30
)

// Options bound and observe one Apply.
type Options struct {
	// Progress, if not nil, is called (on Apply's goroutine) with the
	// bytes of the layer read so far, about every MiB and once at the end.
	Progress func(read int64)
	// MaxEntries bounds what the layer makes: its tar entries and the
	// directories made for entries whose parents have no entry of their
	// own. 0 is DefaultMaxEntries.
	MaxEntries int
	// MaxBytes bounds the file content the layer writes (the sizes the
	// headers give, holes of sparse files included). 0 is DefaultMaxBytes.
	// For a bound on a whole image, pass what earlier layers left of it.
	MaxBytes int64
	// Restricted, if not nil, applies the tar as a tree a user sent (a
	// build context), not as an image layer: files, directories and
	// symbolic links only, owned by its UID:GID, no setuid or setgid, no
	// extended attributes, names checked (restricted.go).
	Restricted *Restriction
}

// Stats says what one Apply did.
type Stats struct {
	Entries   int   // tar entries read
	Bytes     int64 // file content written
	Whiteouts int   // whiteouts and opaque markers applied
	// XattrsSkipped counts the extended attributes not set: those of
	// namespaces cairn does not apply, user.* on symbolic links and
	// devices, and those the file system does not support (ENOTSUP).
	XattrsSkipped int
	// SetIDCleared counts the entries whose setuid or setgid bit a
	// restricted Apply cleared.
	SetIDCleared int
}

// Apply applies one layer, an uncompressed tar stream, on top of what the
// directory root already holds (the layers below), and returns what it
// did. It reads layer to its end, past the tar's end marker, so that a
// digest computed over the reader covers all of it.
//
// An error names the entry that failed and wraps ErrInvalid, ErrUnsafe,
// ErrLimit, ctx's error, or the failing system call's. Apply stops at the
// first error and leaves the tree as it was then: the caller removes it
// (the image's subvolume is deleted whole). Apply does not sync; cairnd
// runs it as root, on a tree no one else changes meanwhile.
func Apply(ctx context.Context, root *os.File, layer io.Reader, opts Options) (Stats, error) {
	rc, err := root.SyscallConn()
	if err != nil {
		return Stats{}, err
	}
	var dir *hosttree.Dir
	var derr error
	if err := rc.Control(func(fd uintptr) { dir, derr = hosttree.RootAt(int(fd)) }); err != nil {
		return Stats{}, err
	}
	if derr != nil {
		return Stats{}, derr
	}
	defer dir.Close()
	a := newApplier(ctx, dir, opts)
	defer a.close()
	in := &countReader{ctx: ctx, r: layer, progress: opts.Progress}
	err = a.apply(tar.NewReader(in))
	if err == nil {
		if _, cerr := io.CopyBuffer(io.Discard, in, a.buf); cerr != nil {
			err = fmt.Errorf("read the layer past its end: %w", cerr)
		}
	}
	in.report()
	return a.stats, err
}

// applier applies one layer.
type applier struct {
	ctx  context.Context
	root *hosttree.Dir
	cur  cursor
	// layer holds every path this layer wrote, and their parents:
	// whiteouts and opaque markers keep those and remove the rest.
	layer node
	dirs  []dirTimes // directories' times, set at the end
	stack []*hosttree.Dir

	maxEntries int
	maxBytes   int64
	restricted *Restriction
	made       int // objects: entries and directories made for them
	stats      Stats
	buf        []byte
}

// dirTimes are the times of a directory an entry made or changed, set
// once the layer has made all it holds; dev and ino tell whether the path
// is still that directory.
type dirTimes struct {
	n        *node
	dev, ino uint64
	ts       [2]unix.Timespec
}

func newApplier(ctx context.Context, root *hosttree.Dir, opts Options) *applier {
	a := &applier{
		ctx:        ctx,
		root:       root,
		cur:        cursor{root: root},
		maxEntries: opts.MaxEntries,
		maxBytes:   opts.MaxBytes,
		restricted: opts.Restricted,
		buf:        make([]byte, 256<<10),
	}
	if a.maxEntries <= 0 {
		a.maxEntries = DefaultMaxEntries
	}
	if a.maxBytes <= 0 {
		a.maxBytes = DefaultMaxBytes
	}
	return a
}

func (a *applier) close() {
	a.cur.close()
}

func (a *applier) apply(tr *tar.Reader) error {
	last := ""
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, tar.ErrInsecurePath) && hdr != nil {
			err = nil // (with GODEBUG=tarinsecurepath=0) entry checks names itself
		}
		if err != nil {
			where := "at its start"
			if last != "" {
				where = "after entry " + hosttree.Quote(last)
			}
			return fmt.Errorf("read the layer %s: %w", where, readError(err))
		}
		a.stats.Entries++
		last = hdr.Name
		if err := a.entry(hdr, tr); err != nil {
			return fmt.Errorf("layer entry %s: %w", hosttree.Quote(hdr.Name), err)
		}
	}
	if err := a.setDirTimes(); err != nil {
		return fmt.Errorf("set the directories' times: %w", err)
	}
	return nil
}

// readError marks the errors of a malformed or cut tar stream as
// ErrInvalid; others (the context's, the reader's own) are kept as they
// are.
func readError(err error) error {
	if errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, tar.ErrFieldTooLong) {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

// count counts n objects against MaxEntries.
func (a *applier) count(n int) error {
	a.made += n
	if a.made > a.maxEntries {
		return fmt.Errorf("%w: more than %d entries and directories", ErrLimit, a.maxEntries)
	}
	return nil
}

// Whiteout names (see the OCI image-spec's layer.md).
const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
	aufsPrefix     = ".wh..wh." // AUFS's own files (.wh..wh.plnk…), not content
)

// entry applies one tar entry; r reads its content.
func (a *applier) entry(hdr *tar.Header, r io.Reader) error {
	if err := a.ctx.Err(); err != nil {
		return err
	}
	if err := a.count(1); err != nil {
		return err
	}
	if a.restricted != nil {
		if err := a.restricted.check(hdr); err != nil {
			return err
		}
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	comps, err := splitName(hdr.Name)
	if err != nil {
		return err
	}
	if len(comps) > 0 {
		if base := comps[len(comps)-1]; strings.HasPrefix(base, whiteoutPrefix) {
			return a.marker(comps[:len(comps)-1], base)
		}
	}
	m, err := metaOf(hdr)
	if err != nil {
		return err
	}
	if a.restricted != nil {
		a.restrict(&m)
	}
	if len(comps) == 0 {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%w: the root can only be a directory", ErrInvalid)
		}
		return a.rootDir(m)
	}
	p, err := a.cur.to(comps[:len(comps)-1], a.makeParent)
	if err != nil {
		return err
	}
	base := comps[len(comps)-1]
	n := a.layer.add(comps)
	switch hdr.Typeflag {
	case tar.TypeDir:
		return a.dir(p, base, n, m)
	case tar.TypeReg, tar.TypeCont, tar.TypeGNUSparse:
		return a.file(p, base, n, m, hdr.Size, r)
	case tar.TypeSymlink:
		return a.symlink(p, base, n, m, hdr.Linkname)
	case tar.TypeLink:
		return a.hardlink(p, base, n, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return a.special(p, base, n, m, hdr)
	}
	return fmt.Errorf("%w: entry type %q is not supported", ErrInvalid, hdr.Typeflag)
}

// marker applies a whiteout or opaque marker named base in the directory
// parent.
func (a *applier) marker(parent []string, base string) error {
	switch {
	case base == opaqueMarker:
		return a.opaque(parent)
	case strings.HasPrefix(base, aufsPrefix):
		return nil
	}
	victim := base[len(whiteoutPrefix):]
	if victim == "" || victim == "." || victim == ".." {
		return fmt.Errorf("%w: a whiteout of %q", ErrInvalid, victim)
	}
	return a.whiteout(parent, victim)
}

// makeParent makes the directory name in d for an entry below it that
// has no entry of its own: 0755, owned by root (or a restricted Apply's
// owner).
func (a *applier) makeParent(d *hosttree.Dir, name string) (*hosttree.Dir, error) {
	if err := a.count(1); err != nil {
		return nil, err
	}
	dfd, err := d.Fd()
	if err != nil {
		return nil, err
	}
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return nil, &os.PathError{Op: "mkdirat", Path: hosttree.Quote(d.Join(name)), Err: err}
	}
	c, err := d.OpenDir(name)
	if err != nil {
		return nil, err
	}
	fd, err := c.Fd()
	if err == nil {
		uid, gid := a.parentOwner()
		err = unix.Fchown(fd, uid, gid)
	}
	if err == nil {
		err = unix.Fchmod(fd, 0o755)
	}
	if err != nil {
		c.Close()
		return nil, &os.PathError{Op: "make directory", Path: hosttree.Quote(c.Rel()), Err: err}
	}
	return c, nil
}

// countReader counts the bytes read, reports them, and stops reading
// once ctx is done.
type countReader struct {
	ctx      context.Context
	r        io.Reader
	n        int64
	reported int64
	progress func(int64)
}

// progressStep is how many bytes are read between two reports.
const progressStep = 1 << 20

func (c *countReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil && c.n-c.reported >= progressStep {
		c.reported = c.n
		c.progress(c.n)
	}
	return n, err
}

// report reports the bytes read, if not done already.
func (c *countReader) report() {
	if c.progress != nil && (c.reported != c.n || c.n == 0) {
		c.reported = c.n
		c.progress(c.n)
	}
}
