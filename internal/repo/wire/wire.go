// Package wire holds the bounded binary encoding shared by the repository's
// formats: varints, length-prefixed strings and fixed-size ids. A Decoder
// checks every length against the bytes that remain, so a decoder built on it
// returns errors, never panics, on any input.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("corrupt encoding")

// Encoder appends to a byte slice.
type Encoder struct{ B []byte }

// Byte appends one byte.
func (e *Encoder) Byte(b byte) { e.B = append(e.B, b) }

// Uvarint appends an unsigned varint.
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Varint appends a signed varint.
func (e *Encoder) Varint(v int64) { e.B = binary.AppendVarint(e.B, v) }

// Bytes appends a length-prefixed byte string.
func (e *Encoder) Bytes(b []byte) {
	e.Uvarint(uint64(len(b)))
	e.B = append(e.B, b...)
}

// String appends a length-prefixed string.
func (e *Encoder) String(s string) {
	e.Uvarint(uint64(len(s)))
	e.B = append(e.B, s...)
}

// Raw appends b as is.
func (e *Encoder) Raw(b []byte) { e.B = append(e.B, b...) }

// Decoder reads what an Encoder wrote. After the first error every read
// returns a zero value and Err reports that error.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a Decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err returns the first error met.
func (d *Decoder) Err() error { return d.err }

// Fail records err (wrapping ErrCorrupt) unless an error is already recorded.
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.Fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.Fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Count reads a uvarint count of items that take at least minSize bytes each,
// failing if that many cannot fit in what remains.
func (d *Decoder) Count(minSize int) int {
	n := d.Uvarint()
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(len(d.b)/minSize) {
		d.Fail("count %d does not fit in %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

// Raw reads n bytes (aliasing the input).
func (d *Decoder) Raw(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.Fail("truncated: want %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// Bytes reads a length-prefixed byte string (copied; nil when empty).
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.Fail("length %d past the end", n)
		return nil
	}
	if n == 0 {
		return nil
	}
	return append([]byte{}, d.Raw(int(n))...)
}

// String reads a length-prefixed string.
func (d *Decoder) String() string { return string(d.Bytes()) }

// Done fails unless every byte was consumed, and returns Err.
func (d *Decoder) Done() error {
	if d.err == nil && len(d.b) != 0 {
		d.Fail("%d trailing bytes", len(d.b))
	}
	return d.err
}
