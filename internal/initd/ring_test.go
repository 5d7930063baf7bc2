package initd

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

// readRing reads r from off to its end (it must be closed), returning the
// text of each stream and the offsets of the Dropped answers.
func readRing(t *testing.T, r *ring, off int64) (out, errOut string, dropped []int64) {
	t.Helper()
	var o, e strings.Builder
	for {
		typ, p, at, err := r.next(off, 7, nil)
		if errors.Is(err, io.EOF) {
			return o.String(), e.String(), dropped
		}
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case api.FrameDropped:
			dropped = append(dropped, at)
			off = at
			continue
		case api.FrameStdout:
			o.Write(p)
		case api.FrameStderr:
			e.Write(p)
		}
		if at != off {
			t.Fatalf("next at %d returned bytes at %d", off, at)
		}
		off += int64(len(p))
	}
}

// The ring keeps the last limit bytes, in order and by stream, with the
// absolute offset of the first one; a reader before it is told where the
// output goes on.
func TestRingKeepsTheEnd(t *testing.T) {
	r := newRing(10)
	r.write(api.FrameStdout, []byte("abcdef"))
	r.write(api.FrameStderr, []byte("XY"))
	r.write(api.FrameStdout, []byte("ghij"))
	if s, e := r.bounds(); s != 2 || e != 12 {
		t.Fatalf("bounds %d %d, want 2 12", s, e)
	}
	r.close()
	out, errOut, dropped := readRing(t, r, 0)
	if out != "cdefghij" || errOut != "XY" || len(dropped) != 1 || dropped[0] != 2 {
		t.Errorf("from 0: %q %q %v", out, errOut, dropped)
	}
	if out, _, dropped := readRing(t, r, 9); out != "hij" || dropped != nil {
		t.Errorf("from 9: %q %v", out, dropped)
	}
	// One write larger than the ring: only its end is kept.
	big := newRing(4)
	big.write(api.FrameStdout, []byte("0123456789"))
	big.close()
	if s, e := big.bounds(); s != 6 || e != 10 {
		t.Errorf("bounds after a large write: %d %d, want 6 10", s, e)
	}
	if out, _, _ := readRing(t, big, 6); out != "6789" {
		t.Errorf("large write: %q", out)
	}
}

// Tiny writes alternating between the streams cost at most ringChunks
// chunks: the oldest go, whatever their size.
func TestRingBoundsItsChunks(t *testing.T) {
	r := newRing(1 << 20)
	for i := range 3 * ringChunks {
		typ := api.FrameStdout
		if i%2 == 1 {
			typ = api.FrameStderr
		}
		r.write(typ, []byte("x"))
	}
	if len(r.chunks) > ringChunks {
		t.Fatalf("%d chunks, at most %d", len(r.chunks), ringChunks)
	}
	if s, e := r.bounds(); e != 3*ringChunks || e-s != ringChunks {
		t.Errorf("bounds %d %d, want the last %d bytes of %d", s, e, ringChunks, 3*ringChunks)
	}
}
