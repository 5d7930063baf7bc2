package oci

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// What goes in comes out, in order, whatever the chunk and read sizes,
// then io.EOF.
func TestChunkPipeCopies(t *testing.T) {
	data := make([]byte, 3<<20+12345)
	rand.Read(data)
	for _, chunk := range []int{1, 4096, 1 << 20, 8 << 20} {
		p := newChunkPipe(iotest.HalfReader(bytes.NewReader(data)), chunk, 2)
		got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(p, 100)))
		if err != nil || !bytes.Equal(got, data[:100]) {
			t.Fatalf("chunk %d: first bytes %v", chunk, err)
		}
		rest, err := io.ReadAll(p)
		if err != nil || !bytes.Equal(append(got, rest...), data) {
			t.Fatalf("chunk %d: %d bytes, %v; want %d", chunk, len(got)+len(rest), err, len(data))
		}
		if n, err := p.Read(make([]byte, 10)); n != 0 || err != io.EOF {
			t.Fatalf("chunk %d: after the end: %d, %v", chunk, n, err)
		}
		p.Close()
	}
}

// The source's error comes after what it gave before it.
func TestChunkPipeError(t *testing.T) {
	bad := errors.New("digest mismatch")
	src := io.MultiReader(bytes.NewReader([]byte("hello")), iotest.ErrReader(bad))
	p := newChunkPipe(src, 1<<20, 4)
	defer p.Close()
	got, err := io.ReadAll(p)
	if string(got) != "hello" || !errors.Is(err, bad) {
		t.Fatalf("read %q, %v; want hello and %v", got, err, bad)
	}
}

// Close stops a source that would go on for ever, and a read after it
// ends.
func TestChunkPipeClose(t *testing.T) {
	p := newChunkPipe(zeros{}, 4096, 3)
	if _, err := io.ReadFull(p, make([]byte, 10000)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	if _, err := io.Copy(io.Discard, p); !errors.Is(err, errPipeClosed) {
		t.Fatalf("after Close: %v, want %v", err, errPipeClosed)
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }
