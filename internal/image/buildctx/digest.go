package buildctx

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// digestVersion starts the digest's input: a change of the encoding
// below changes it, and so every cache key made with it.
const digestVersion = "cairn buildctx digest v1\n"

// Digest returns "sha256:" and the hex SHA-256 of what sources hold, for
// the cache key of a COPY or ADD step: for each source in order, its name
// (for a file or link: the name it is copied under into a directory; a
// directory's own name is not copied, so not counted), then everything
// the walk of it meets (see Copy): its path below the source, type, mode
// bits (setuid, setgid and sticky included), a link's target and a
// file's content. Times and owners are left out: a COPY gives its own
// owner (--chown), and touching a file does not change what is copied.
// The encoding is unambiguous (every field is length-prefixed).
func Digest(ctx context.Context, sources []Source) (string, error) {
	d := &digester{h: sha256.New(), buf: make([]byte, 256<<10)}
	io.WriteString(d.h, digestVersion)
	for i := range sources {
		s := &sources[i]
		name := ""
		if !s.IsDir() {
			name = s.name
		}
		d.field("source")
		d.field(name)
		if err := s.walk(ctx, d); err != nil {
			return "", err
		}
	}
	return "sha256:" + hex.EncodeToString(d.h.Sum(nil)), nil
}

type digester struct {
	h   hash.Hash
	buf []byte
}

var _ visitor = (*digester)(nil)

// field writes a length-prefixed string.
func (d *digester) field(s string) {
	d.number(uint64(len(s)))
	io.WriteString(d.h, s)
}

func (d *digester) number(n uint64) {
	var b [binary.MaxVarintLen64]byte
	d.h.Write(b[:binary.PutUvarint(b[:], n)])
}

// object writes what all kinds of entries share.
func (d *digester) object(kind, rel string, st *unix.Stat_t) {
	d.field(kind)
	d.field(rel)
	d.number(uint64(st.Mode & 0o7777))
}

func (d *digester) enter(rel string, st *unix.Stat_t) error {
	d.object("dir", rel, st)
	return nil
}

func (d *digester) leave(rel string, st *unix.Stat_t) error {
	d.field("end")
	return nil
}

func (d *digester) file(rel string, st *unix.Stat_t, f *os.File) error {
	d.object("file", rel, st)
	d.number(uint64(st.Size))
	n, err := io.CopyBuffer(d.h, io.LimitReader(f, st.Size), d.buf)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	if n != st.Size {
		return fmt.Errorf("%s: changed while read (%d bytes, not %d)", rel, n, st.Size)
	}
	return nil
}

func (d *digester) symlink(rel string, st *unix.Stat_t, target string) error {
	d.object("symlink", rel, st)
	d.field(target)
	return nil
}
