// Package compress is the repository's body encoding: one byte that says
// raw (0) or zstd (1), then the payload. Decode refuses to expand past a
// caller-given limit, so a hostile payload cannot exhaust memory.
package compress

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

const (
	raw   = 0
	zstd1 = 1
)

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithSingleSegment(true)) // single segment: the frame records its size
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
)

// Encode returns the encoded form of p: zstd when that is smaller, raw otherwise.
func Encode(p []byte) []byte {
	z := encoder.EncodeAll(p, make([]byte, 1, 1+len(p)/2))
	if len(z) < 1+len(p) {
		z[0] = zstd1
		return z
	}
	out := make([]byte, 1+len(p))
	out[0] = raw
	copy(out[1:], p)
	return out
}

// Decode reverses Encode, failing if the result would exceed limit bytes.
func Decode(b []byte, limit int) ([]byte, error) {
	if len(b) == 0 {
		return nil, errors.New("decode: empty body")
	}
	switch b[0] {
	case raw:
		if len(b)-1 > limit {
			return nil, fmt.Errorf("decode: %d bytes exceed the limit of %d", len(b)-1, limit)
		}
		return append([]byte{}, b[1:]...), nil
	case zstd1:
		h := zstd.Header{}
		if err := h.Decode(b[1:]); err != nil {
			return nil, fmt.Errorf("decode: zstd header: %w", err)
		}
		if !h.HasFCS || h.FrameContentSize > uint64(limit) {
			return nil, fmt.Errorf("decode: zstd frame of unknown size or larger than %d bytes", limit)
		}
		out, err := decoder.DecodeAll(b[1:], make([]byte, 0, int(h.FrameContentSize)))
		if err != nil {
			return nil, fmt.Errorf("decode: zstd: %w", err)
		}
		if len(out) > limit {
			return nil, fmt.Errorf("decode: %d bytes exceed the limit of %d", len(out), limit)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("decode: unknown encoding %d", b[0])
	}
}
