package initd

import (
	"errors"
	"io"
	"sort"
	"sync"

	"github.com/cairn-sandbox/cairn/api"
)

const (
	// ringChunk is the largest chunk the ring coalesces writes of one
	// stream into.
	ringChunk = 32 << 10
	// ringChunks bounds the chunks of a ring, so that many tiny writes
	// alternating between stdout and stderr cost bounded memory too.
	ringChunks = 4096
)

// errRingStopped is returned by next when its stop channel closes.
var errRingStopped = errors.New("process output reader stopped")

// ring is the output of a background process: its last limit bytes of
// stdout and stderr, in the order written, each byte addressed by its
// absolute offset since the process started. Writes never wait: when
// full, the oldest bytes are dropped. Its methods are safe for concurrent
// use.
type ring struct {
	limit int

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	chunks  []chunk
	start   int64 // offset of the first byte kept
	end     int64 // offset after the last byte written
	size    int   // bytes kept
	closed  bool  // the process has exited: nothing follows
}

// chunk is bytes of one stream at offset off.
type chunk struct {
	t   api.FrameType
	off int64
	b   []byte
}

func newRing(limit int) *ring {
	return &ring{limit: limit, changed: make(chan struct{})}
}

// write appends p, written to the stream of frame type t.
func (r *ring) write(t api.FrameType, p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if len(p) > r.limit { // only its end can be kept
		r.end += int64(len(p) - r.limit)
		p = p[len(p)-r.limit:]
	}
	if n := len(r.chunks); n > 0 && r.chunks[n-1].t == t && len(r.chunks[n-1].b)+len(p) <= ringChunk {
		r.chunks[n-1].b = append(r.chunks[n-1].b, p...)
	} else {
		r.chunks = append(r.chunks, chunk{t: t, off: r.end, b: append(make([]byte, 0, min(max(len(p), 512), ringChunk)), p...)})
	}
	r.end += int64(len(p))
	r.size += len(p)
	for r.size > r.limit || len(r.chunks) > ringChunks {
		c := &r.chunks[0]
		drop := len(c.b)
		if len(r.chunks) <= ringChunks {
			drop = min(drop, r.size-r.limit)
		}
		if drop == len(c.b) {
			r.chunks[0] = chunk{}
			r.chunks = r.chunks[1:]
		} else {
			c.b = c.b[drop:]
			c.off += int64(drop)
		}
		r.size -= drop
	}
	if len(r.chunks) > 0 {
		r.start = r.chunks[0].off
	} else {
		r.start = r.end
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// close ends the output: readers get io.EOF at its end.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

// bounds returns the offset of the first byte kept and after the last
// byte written.
func (r *ring) bounds() (start, end int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start, r.end
}

// next returns what a reader at offset off gets next, waiting for it
// until stop closes: at most max bytes written to one stream (t is its
// frame type), or, if the bytes at off were dropped, t FrameDropped and
// the offset the output goes on at. At the end of a closed ring it
// returns io.EOF.
func (r *ring) next(off int64, max int, stop <-chan struct{}) (t api.FrameType, p []byte, at int64, err error) {
	r.mu.Lock()
	for {
		if off < r.start {
			r.mu.Unlock()
			return api.FrameDropped, nil, r.start, nil
		}
		if off < r.end {
			i := sort.Search(len(r.chunks), func(i int) bool {
				c := r.chunks[i]
				return c.off+int64(len(c.b)) > off
			})
			c := r.chunks[i]
			b := c.b[off-c.off:]
			b = append([]byte(nil), b[:min(len(b), max)]...)
			r.mu.Unlock()
			return c.t, b, off, nil
		}
		if r.closed {
			r.mu.Unlock()
			return 0, nil, off, io.EOF
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return 0, nil, off, errRingStopped
		}
		r.mu.Lock()
	}
}
