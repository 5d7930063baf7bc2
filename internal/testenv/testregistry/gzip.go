package testregistry

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
)

// Limits of gzip header fields: FEXTRA adds 2 bytes of length and up to
// 64 KiB; FCOMMENT adds the comment and a NUL, and Go's reader takes at
// most 511 bytes of it.
const (
	maxExtra   = 1<<16 - 1
	maxComment = 511
)

// gzipPadded compresses raw into exactly size bytes of valid gzip: one
// member with raw, with a comment in its header if that is enough
// padding, followed by empty members whose extra header fields take the
// rest. Readers of multi-member gzip (RFC 1952, Go's, zlib's) read raw
// back. A header field adds at least 2 bytes, so when the member with raw
// falls short by exactly one byte, another compression level is tried.
func gzipPadded(raw []byte, size int) ([]byte, error) {
	var first []byte
	level := gzip.DefaultCompression
	for _, l := range []int{gzip.DefaultCompression, gzip.BestCompression, gzip.BestSpeed, 2, 3, 4, 5, 7, 8, gzip.HuffmanOnly} {
		m, err := gzipMember(raw, gzip.Header{}, l)
		if err != nil {
			return nil, err
		}
		if rest := size - len(m); rest == 0 || rest >= 2 {
			first, level = m, l
			break
		}
	}
	if first == nil {
		return nil, fmt.Errorf("%d bytes do not compress into at most %d bytes (nor one short of it)", len(raw), size)
	}
	rest := size - len(first)
	empty, err := gzipMember(nil, gzip.Header{}, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	var tail bytes.Buffer
	for rest > maxComment+1 {
		n := min(rest, len(empty)+2+maxExtra)
		if rest-n == 1 {
			n-- // leave 2 bytes, a comment of one
		}
		m, err := gzipMember(nil, gzip.Header{Extra: make([]byte, n-len(empty)-2)}, gzip.DefaultCompression)
		if err != nil {
			return nil, err
		}
		tail.Write(m)
		rest -= n
	}
	if rest > 0 {
		// The same level gives the same deflate stream.
		m, err := gzipMember(raw, gzip.Header{Comment: strings.Repeat("x", rest-1)}, level)
		if err != nil {
			return nil, err
		}
		first = m
	}
	out := append(first, tail.Bytes()...)
	if len(out) != size {
		return nil, fmt.Errorf("padded gzip of %d bytes, want %d", len(out), size)
	}
	return out, nil
}

// gzipMember is one gzip member of raw with the header's fields.
func gzipMember(raw []byte, hdr gzip.Header, level int) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		return nil, err
	}
	hdr.OS = zw.OS // unknown, as gzip.NewWriter has it
	zw.Header = hdr
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
