package chunker

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

func chunks(t *testing.T, data, key []byte) [][]byte {
	t.Helper()
	c, err := New(bytes.NewReader(data), key)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		ch, err := c.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(ch))
	}
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestSizesAndReassembly(t *testing.T) {
	data := randomData(16<<20, 1)
	key := bytes.Repeat([]byte{1}, 32)
	cs := chunks(t, data, key)
	if !bytes.Equal(bytes.Join(cs, nil), data) {
		t.Fatal("chunks do not reassemble the input")
	}
	for i, c := range cs {
		if len(c) > MaxSize || (len(c) < MinSize && i != len(cs)-1) {
			t.Fatalf("chunk %d has %d bytes", i, len(c))
		}
	}
	avg := len(data) / len(cs)
	if avg < NormalSize/2 || avg > NormalSize*2 {
		t.Fatalf("average chunk %d bytes, want about %d", avg, NormalSize)
	}
}

func TestEmptyAndShort(t *testing.T) {
	if cs := chunks(t, nil, nil); len(cs) != 0 {
		t.Fatalf("empty stream gave %d chunks", len(cs))
	}
	if cs := chunks(t, []byte("x"), nil); len(cs) != 1 || string(cs[0]) != "x" {
		t.Fatalf("1-byte stream gave %q", cs)
	}
	if cs := chunks(t, randomData(MinSize, 3), nil); len(cs) != 1 {
		t.Fatalf("MinSize stream gave %d chunks", len(cs))
	}
}

// An edit in the middle changes only the chunks around it.
func TestLocality(t *testing.T) {
	data := randomData(8<<20, 2)
	key := bytes.Repeat([]byte{2}, 32)
	a := chunks(t, data, key)
	edited := bytes.Clone(data)
	edited[4<<20] ^= 0xff
	b := chunks(t, edited, key)
	seen := map[string]bool{}
	for _, c := range a {
		seen[string(c)] = true
	}
	changed := 0
	for _, c := range b {
		if !seen[string(c)] {
			changed++
		}
	}
	if changed > 2 {
		t.Fatalf("1-byte edit changed %d of %d chunks", changed, len(b))
	}
}

func TestKeyChangesCutPoints(t *testing.T) {
	data := randomData(4<<20, 4)
	a := chunks(t, data, bytes.Repeat([]byte{1}, 32))
	b := chunks(t, data, bytes.Repeat([]byte{2}, 32))
	if len(a) == len(b) && len(a[0]) == len(b[0]) && len(a[1]) == len(b[1]) {
		t.Fatal("cut points do not depend on the key")
	}
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestReadError(t *testing.T) {
	c, err := New(failReader{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(); err == nil || err == io.EOF {
		t.Fatalf("read error not reported: %v", err)
	}
}

// A Chunker reset onto another stream cuts it as a new one would, whatever
// the previous stream left in its buffer.
func TestReset(t *testing.T) {
	key := bytes.Repeat([]byte{3}, 32)
	streams := [][]byte{randomData(5<<20+123, 5), nil, []byte("x"), randomData(MinSize, 6), randomData(3<<20, 7)}
	c, err := New(bytes.NewReader(nil), key)
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range streams {
		c.Reset(bytes.NewReader(data))
		var got [][]byte
		for {
			ch, err := c.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, bytes.Clone(ch))
		}
		want := chunks(t, data, key)
		if len(got) != len(want) {
			t.Fatalf("stream %d: %d chunks after Reset, %d from New", i, len(got), len(want))
		}
		for j := range got {
			if !bytes.Equal(got[j], want[j]) {
				t.Fatalf("stream %d: chunk %d differs after Reset", i, j)
			}
		}
	}
	// Reset in the middle of a stream, and after a read error.
	c.Reset(bytes.NewReader(streams[0]))
	if _, err := c.Next(); err != nil {
		t.Fatal(err)
	}
	c.Reset(failReader{})
	if _, err := c.Next(); err == nil || err == io.EOF {
		t.Fatalf("read error not reported: %v", err)
	}
	c.Reset(bytes.NewReader(streams[4]))
	ch, err := c.Next()
	if err != nil || !bytes.Equal(ch, chunks(t, streams[4], key)[0]) {
		t.Fatalf("after an error and Reset: %d bytes, %v", len(ch), err)
	}
}
