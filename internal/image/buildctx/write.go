package buildctx

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/internal/image/unpack"
)

// Names that the context's tar reserves for cairn (see the package
// comment).
const (
	// ReservedDir is the directory, at the top of the tar, that holds
	// what cairn adds to the context; no context may send one of its
	// own, and no COPY or ADD sees it.
	ReservedDir = ".cairn-build"
	// DockerfileName is where the tar holds the Dockerfile, wherever -f
	// took it from.
	DockerfileName = ReservedDir + "/Dockerfile"
	// IgnoreName is where the tar holds the .dockerignore file that
	// was applied (empty when there was none).
	IgnoreName = ReservedDir + "/dockerignore"
)

// Errors WriteContext and Measure return (wrapped, naming the path).
var (
	// ErrReserved: the context holds a name the tar cannot carry: the
	// reserved directory at its top, a name starting with ".wh." (which
	// the layer applier cairnd extracts the tar with takes for a
	// whiteout), or a name or link target that is not UTF-8 or holds
	// control characters (which cairnd refuses, see Extract).
	ErrReserved = errors.New("a name the build context cannot hold")
	// ErrTooLarge: the context's files hold more than MaxBytes.
	ErrTooLarge = errors.New("build context too large")
)

// whiteoutPrefix starts the names a layer's tar uses for whiteouts.
const whiteoutPrefix = ".wh."

// WriteOptions say what WriteContext sends besides the directory.
type WriteOptions struct {
	// Dockerfile is the path of the Dockerfile (as given to -f: absolute,
	// or relative to the working directory; it may be outside the
	// context). "" is "Dockerfile" in the context's directory.
	Dockerfile string
	// DockerfileData, if not nil, is the Dockerfile itself (read from
	// standard input, say); Dockerfile then only picks the
	// .dockerignore file.
	DockerfileData []byte
	// MaxBytes, if above 0, bounds the bytes of the files sent (the
	// Dockerfile and .dockerignore included): past it, ErrTooLarge.
	MaxBytes int64
	// Progress, if not nil, is called now and then with what was
	// written so far, and once at the end.
	Progress func(Stats)
}

// Stats say what a context's tar holds (the reserved entries included).
type Stats struct {
	Files    int   // regular files
	Dirs     int   // directories, the root included
	Symlinks int   // symbolic links
	Skipped  int   // devices, sockets and FIFOs left out
	Bytes    int64 // the content of the files
}

// WriteContext writes the build context dir as an uncompressed tar to w:
// the Dockerfile and the .dockerignore file applied at the reserved names
// first, then dir (the root as "./") and everything below it that the
// .dockerignore file does not exclude, in byte order of the names.
//
// The .dockerignore file is the Dockerfile's path with ".dockerignore"
// added, if it exists (as BuildKit does), else dir's own .dockerignore.
// Regular files, directories and symbolic links are sent (a link as a
// link, never followed; a hard link as a file of its own), with their
// modes (setuid, setgid and sticky included) and modification times;
// owners are 0:0, as a build ignores the context's owners. Devices,
// sockets and FIFOs are skipped. A directory the .dockerignore file
// excludes is sent only if something inside it is not excluded.
func WriteContext(w io.Writer, dir string, opts WriteOptions) (Stats, error) {
	cw := &contextWriter{tw: tar.NewWriter(w), opts: opts, root: dir}
	err := cw.write()
	if err == nil {
		err = cw.tw.Close()
	}
	if opts.Progress != nil {
		opts.Progress(cw.stats)
	}
	return cw.stats, err
}

// Measure returns what WriteContext would send of dir, without sending it
// (MaxBytes applies as it does there).
func Measure(dir string, opts WriteOptions) (Stats, error) {
	return WriteContext(io.Discard, dir, opts)
}

// Progress is called after about this many bytes or entries.
const (
	progressBytes   = 1 << 20
	progressEntries = 256
)

type contextWriter struct {
	tw      *tar.Writer
	opts    WriteOptions
	root    string
	ignore  *Ignore
	stats   Stats
	pending []pendingDir // excluded directories being walked
	buf     []byte

	lastBytes   int64
	lastEntries int
}

// epoch is the modification time of the reserved entries.
var epoch = time.Unix(0, 0)

func (cw *contextWriter) write() error {
	st, err := os.Stat(cw.root)
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("build context %s: not a directory", cw.root)
	}
	dockerfile := cw.opts.Dockerfile
	if dockerfile == "" {
		dockerfile = filepath.Join(cw.root, "Dockerfile")
	}
	data := cw.opts.DockerfileData
	if data == nil {
		if data, err = readSmall(dockerfile, MaxDockerfileSize); err != nil {
			return fmt.Errorf("read the Dockerfile: %w", err)
		}
	}
	ignoreData, err := readSmall(dockerfile+".dockerignore", maxIgnoreFile)
	if errors.Is(err, fs.ErrNotExist) {
		ignoreData, err = readSmall(filepath.Join(cw.root, ".dockerignore"), maxIgnoreFile)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf(".dockerignore: %w", err)
	}
	if cw.ignore, err = ParseIgnore(strings.NewReader(string(ignoreData))); err != nil {
		return err
	}
	cw.buf = make([]byte, 256<<10)
	if err := cw.reserved(data, ignoreData); err != nil {
		return err
	}
	hdr, err := cw.header(".", "./", st)
	if err != nil {
		return err
	}
	if err := cw.emit(hdr, nil); err != nil {
		return err
	}
	return cw.dir(".")
}

// reserved writes the reserved directory with the Dockerfile and the
// .dockerignore file.
func (cw *contextWriter) reserved(dockerfile, ignore []byte) error {
	d := &tar.Header{Typeflag: tar.TypeDir, Name: ReservedDir + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}
	if err := cw.put(d, nil); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{DockerfileName, dockerfile}, {IgnoreName, ignore}} {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatPAX}
		if err := cw.count(h.Size); err != nil {
			return err
		}
		if err := cw.put(h, bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	return nil
}

// count adds n bytes of files to the stats, within MaxBytes.
func (cw *contextWriter) count(n int64) error {
	cw.stats.Bytes += n
	if cw.opts.MaxBytes > 0 && cw.stats.Bytes > cw.opts.MaxBytes {
		return fmt.Errorf("%w: more than %d bytes of files", ErrTooLarge, cw.opts.MaxBytes)
	}
	return nil
}

// dir writes what the directory rel holds.
func (cw *contextWriter) dir(rel string) error {
	full := filepath.Join(cw.root, filepath.FromSlash(rel))
	entries, err := os.ReadDir(full) // sorted by name
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		child := name
		if rel != "." {
			child = rel + "/" + name
		}
		if err := cw.entry(child, name); err != nil {
			return err
		}
	}
	return nil
}

// entry writes the path rel (its last component name), and what it holds.
func (cw *contextWriter) entry(rel, name string) error {
	excluded := cw.ignore.Excluded(rel)
	full := filepath.Join(cw.root, filepath.FromSlash(rel))
	st, err := os.Lstat(full)
	if err != nil {
		return err
	}
	reserved := rel == ReservedDir || strings.HasPrefix(name, whiteoutPrefix)
	if excluded && (reserved || !st.IsDir() || !cw.ignore.Reincludes(rel)) {
		return nil
	}
	plain := unpack.PlainName(name)
	switch {
	case rel == ReservedDir:
		return fmt.Errorf("%w: %q is cairn's (exclude it in .dockerignore)", ErrReserved, rel)
	case reserved:
		return fmt.Errorf("%w: %q starts with %q (exclude it in .dockerignore)", ErrReserved, rel, whiteoutPrefix)
	case plain != nil:
		return fmt.Errorf("%w: %q: %v (rename it, or exclude it in .dockerignore)", ErrReserved, rel, plain)
	case excluded:
		// Something inside may be sent after all: the directory goes
		// before it, if it is.
		hdr, err := cw.header(rel, rel+"/", st)
		if err != nil {
			return err
		}
		cw.pending = append(cw.pending, pendingDir{hdr: hdr})
		defer func() { cw.pending = cw.pending[:len(cw.pending)-1] }()
		return cw.dir(rel)
	}
	switch mode := st.Mode(); {
	case mode.IsDir():
		hdr, err := cw.header(rel, rel+"/", st)
		if err != nil {
			return err
		}
		if err := cw.emit(hdr, nil); err != nil {
			return err
		}
		return cw.dir(rel)
	case mode.IsRegular():
		return cw.file(rel, full)
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(full)
		if err != nil {
			return err
		}
		hdr, err := cw.header(rel, rel, st)
		if err != nil {
			return err
		}
		if err := unpack.PlainName(target); err != nil {
			return fmt.Errorf("%w: the symbolic link %q: its target: %v (exclude it in .dockerignore)", ErrReserved, rel, err)
		}
		hdr.Linkname = target
		return cw.emit(hdr, nil)
	}
	cw.stats.Skipped++
	return nil
}

// file writes the regular file rel, at full on the host.
func (cw *contextWriter) file(rel, full string) error {
	f, err := os.OpenFile(full, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: changed while the context was read", full)
	}
	hdr, err := cw.header(rel, rel, st)
	if err != nil {
		return err
	}
	if err := cw.count(hdr.Size); err != nil {
		return err
	}
	return cw.emit(hdr, f)
}

// header returns the tar header of rel, named name, with st's type,
// mode, size and modification time, owned by 0:0.
func (cw *contextWriter) header(rel, name string, st fs.FileInfo) (*tar.Header, error) {
	mode := st.Mode()
	hdr := &tar.Header{Name: name, Mode: int64(unixMode(mode)), ModTime: st.ModTime(), Format: tar.FormatPAX}
	switch {
	case mode.IsDir():
		hdr.Typeflag = tar.TypeDir
	case mode.IsRegular():
		hdr.Typeflag = tar.TypeReg
		hdr.Size = st.Size()
	case mode&fs.ModeSymlink != 0:
		hdr.Typeflag = tar.TypeSymlink
	default:
		return nil, fmt.Errorf("%s: not a file, directory or symbolic link", rel)
	}
	return hdr, nil
}

// emit writes hdr (after the excluded directories it is in), and the
// file's content from f, which must be hdr.Size bytes.
func (cw *contextWriter) emit(hdr *tar.Header, f io.Reader) error {
	for i := range cw.pending {
		if p := &cw.pending[i]; !p.sent {
			if err := cw.put(p.hdr, nil); err != nil {
				return err
			}
			p.sent = true
		}
	}
	return cw.put(hdr, f)
}

func (cw *contextWriter) put(hdr *tar.Header, f io.Reader) error {
	if err := cw.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		cw.stats.Dirs++
	case tar.TypeSymlink:
		cw.stats.Symlinks++
	case tar.TypeReg:
		cw.stats.Files++
		n, err := io.CopyBuffer(cw.tw, io.LimitReader(f, hdr.Size), cw.buf)
		if err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if n < hdr.Size {
			return fmt.Errorf("%s: changed while the context was read (%d bytes, not %d)", hdr.Name, n, hdr.Size)
		}
	}
	cw.progress()
	return nil
}

func (cw *contextWriter) progress() {
	if cw.opts.Progress == nil {
		return
	}
	entries := cw.stats.Files + cw.stats.Dirs + cw.stats.Symlinks
	if cw.stats.Bytes-cw.lastBytes >= progressBytes || entries-cw.lastEntries >= progressEntries {
		cw.lastBytes, cw.lastEntries = cw.stats.Bytes, entries
		cw.opts.Progress(cw.stats)
	}
}

// pendingDir is an excluded directory that a walk looks into for what an
// exception sends back: it is sent before the first thing inside it.
type pendingDir struct {
	hdr  *tar.Header
	sent bool
}

// unixMode returns mode's permission bits with setuid, setgid and sticky
// as a stat's st_mode has them.
func unixMode(mode fs.FileMode) uint32 {
	m := uint32(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

// readSmall reads the regular file at path, of at most max bytes.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: more than %d bytes", path, max)
	}
	return data, nil
}
