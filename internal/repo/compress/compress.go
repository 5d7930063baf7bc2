// Package compress is the repository's body encoding: one byte that says
// raw (0) or zstd (1), then the payload. Decode refuses to expand past a
// caller-given limit, so a hostile payload cannot exhaust memory.
package compress

import (
	"errors"
	"fmt"
	"math"

	"github.com/klauspost/compress/zstd"
)

// Level is how hard Encode tries. Both levels write the same format: the
// level matters only when writing.
type Level uint8

const (
	// Default is zstd's default level, as restic's "auto".
	Default Level = iota
	// Better is zstd's "better" level: on the bench's mixed gigabyte
	// 0.5% smaller than Default (text and code 1-3%) for 25-45% more CPU
	// on what compresses.
	Better
)

const (
	raw   = 0
	zstd1 = 1
)

// One shared encoder per Level: EncodeAll is safe for concurrent use and
// keeps one state per GOMAXPROCS, so that many goroutines compress at once
// without waiting for each other. Default is restic's "auto"; Better is for
// a base backup (see Level). A single segment makes the frame record its
// size. No checksum: every body is sealed with AES-GCM and a chunk is
// checked against its keyed id (4 bytes less per body). Literals are
// entropy-coded even in blocks without matches, which the default level
// skips: 0.04% smaller on the bench's mixed gigabyte (0.27 MB, mostly text)
// for about 2% more CPU (measured before Incompressible kept random-looking
// chunks away from zstd).
var (
	encoders   = [...]*zstd.Encoder{Default: newEncoder(zstd.SpeedDefault), Better: newEncoder(zstd.SpeedBetterCompression)}
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
)

func newEncoder(l zstd.EncoderLevel) *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithSingleSegment(true),
		zstd.WithEncoderCRC(false), zstd.WithAllLitEntropyCompression(true))
	if err != nil {
		panic(err) // the options are constants
	}
	return e
}

// Encode returns the encoded form of p at the Default level: zstd when that
// is smaller, raw otherwise.
func Encode(p []byte) []byte {
	return AppendEncode(make([]byte, 0, 1+len(p)/2), p, Default)
}

// AppendEncode appends the encoded form of p at level l to dst and returns
// the extended buffer, like Encode. Bodies whose bytes look uniformly random
// (see Incompressible) are kept raw without trying zstd. It is safe for
// concurrent use.
func AppendEncode(dst, p []byte, l Level) []byte {
	start := len(dst)
	if Incompressible(p) {
		return append(append(dst, raw), p...)
	}
	z := encoders[l].EncodeAll(p, append(dst, zstd1))
	if len(z)-start < 1+len(p) {
		return z
	}
	return append(append(z[:start], raw), p...)
}

// entropySample is the shortest body Incompressible judges: below it the
// estimate of a random body's entropy falls under randomBits.
const entropySample = 32 << 10

// randomBits is the entropy per byte past which a body is taken for random.
// For a random body of entropySample bytes the estimate is 8 − 0.006 bits;
// text and code have 4.5-6, a gzip or xz stream 7.99 or more (zstd gains
// well under 1% on those).
const randomBits = 7.99

// Incompressible reports whether p's bytes look uniformly random: random,
// encrypted or already compressed data, on which zstd spends CPU (a third of
// a backup of the bench's gigabyte, 43% of which is random) for nothing. It
// reads every byte once, at a few GB/s. It cannot see a random block that
// repeats within p, which zstd would shrink; dedup still catches repeats
// across chunks.
func Incompressible(p []byte) bool {
	if len(p) < entropySample {
		return false
	}
	var h [4][256]uint32 // four histograms, so that neighbouring bytes do not wait on one counter
	i := 0
	for ; i+4 <= len(p); i += 4 {
		h[0][p[i]]++
		h[1][p[i+1]]++
		h[2][p[i+2]]++
		h[3][p[i+3]]++
	}
	for ; i < len(p); i++ {
		h[0][p[i]]++
	}
	n := float64(len(p))
	bits := 0.0
	for b := range 256 {
		if c := h[0][b] + h[1][b] + h[2][b] + h[3][b]; c > 0 {
			q := float64(c) / n
			bits -= q * math.Log2(q)
		}
	}
	return bits > randomBits
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
