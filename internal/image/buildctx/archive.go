package buildctx

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/image/unpack"
)

// ErrArchive: an ADD source that is an archive cairn cannot extract (xz).
var ErrArchive = errors.New("archive not supported")

// compression is how an ADD source's content is compressed.
type compression int

const (
	plain compression = iota
	gzipped
	bzipped
	zstded
	xzed
)

// Magic numbers at the start of compressed streams.
var magics = []struct {
	magic []byte
	c     compression
}{
	{[]byte{0x1f, 0x8b}, gzipped},
	{[]byte("BZh"), bzipped},
	{[]byte{0x28, 0xb5, 0x2f, 0xfd}, zstded},
	{[]byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, xzed},
}

// zstdMaxWindow bounds the memory a zstd stream may ask for.
const zstdMaxWindow = 1 << 27

// decompress returns a reader of r's content uncompressed, and a function
// that releases it.
func decompress(r io.Reader, c compression) (io.Reader, func(), error) {
	switch c {
	case gzipped:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return z, func() { z.Close() }, nil
	case bzipped:
		return bzip2.NewReader(r), func() {}, nil
	case zstded:
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, nil, err
		}
		return z, z.Close, nil
	}
	return r, func() {}, nil
}

// archiveKind says whether the open file f is a tar archive, and how it
// is compressed: as Docker, a file whose (uncompressed) content starts
// with a valid tar header. f is read from its start, and left anywhere.
func archiveKind(f *os.File) (compression, bool, error) {
	br := bufio.NewReader(io.NewSectionReader(f, 0, 1<<62))
	head, err := br.Peek(6)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	c := plain
	for _, m := range magics {
		if bytes.HasPrefix(head, m.magic) {
			c = m.c
		}
	}
	if c == xzed {
		return c, true, nil
	}
	r, release, err := decompress(br, c)
	if err != nil {
		return 0, false, nil // not the compressed stream it looked like
	}
	defer release()
	_, err = tar.NewReader(r).Next()
	return c, err == nil, nil
}

// extract extracts the source s into the directory comps when it is an
// archive, and says whether it was.
func (c *copier) extract(s *Source, comps []string) (bool, error) {
	parent, err := s.openParent()
	if err != nil {
		return false, err
	}
	defer parent.Close()
	st, err := lstatAt(fdOf(parent), s.name)
	if err != nil {
		return false, &os.PathError{Op: "lstat", Path: s.Path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil
	}
	f, err := openChild(fdOf(parent), s.name, s.Path, unix.O_RDONLY, &st)
	if err != nil {
		return false, err
	}
	defer f.Close()
	kind, ok, err := archiveKind(f)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", s.Path, err)
	}
	if !ok {
		return false, nil
	}
	if kind == xzed {
		return false, fmt.Errorf("%w: %s is xz-compressed (only plain, gzip, bzip2 and zstd tar archives are extracted)", ErrArchive, s.Path)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	r, release, err := decompress(bufio.NewReaderSize(f, 256<<10), kind)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", s.Path, err)
	}
	defer release()
	d, err := c.mkdirAll(comps)
	if err != nil {
		return false, err
	}
	defer d.Close()
	if _, err := unpack.Apply(c.ctx, d, r, unpack.Options{MaxBytes: c.opts.MaxBytes}); err != nil {
		return false, fmt.Errorf("extract %s: %w", s.Path, err)
	}
	return true, nil
}
