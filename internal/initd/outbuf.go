package initd

import (
	"encoding/binary"
	"errors"
	"io"
	"sync"

	"github.com/cairn-sandbox/cairn/api"
)

var (
	// errReleased is returned by the methods of a released outBuffer.
	errReleased = errors.New("session output released")
	// errFull is returned by append on a lossy outBuffer that is full.
	errFull = errors.New("session output buffer full")
	// errStopped is returned by read when its stop channel closes.
	errStopped = errors.New("session output reader stopped")
)

// outBuffer is the output of an exec session: the bytes of its Stdout,
// Stderr and Exit frames as cairn-init sends them, addressed by offset from
// the first one. It keeps every byte from base on, until cairnd
// acknowledges it, so that a stream re-attached after a broken connection
// resumes at any offset cairnd names. It holds at most limit bytes: an
// append that does not fit waits for an acknowledgement, which makes the
// command block on its output (backpressure) rather than lose it. Its
// methods are safe for concurrent use.
type outBuffer struct {
	limit int

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	base     int64         // offset of data[0]
	data     []byte
	closed   bool // the Exit frame is in: nothing follows
	lossy    bool // nobody will acknowledge: appends do not wait, sent bytes go
	released bool
}

func newOutBuffer(limit int) *outBuffer {
	return &outBuffer{limit: limit, changed: make(chan struct{})}
}

// notifyLocked wakes every waiter.
func (b *outBuffer) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// endLocked returns the offset after the last byte.
func (b *outBuffer) endLocked() int64 { return b.base + int64(len(b.data)) }

// append adds one frame. It waits while the frame does not fit (but a
// frame always fits an empty buffer); a lossy buffer returns errFull
// instead.
func (b *outBuffer) append(t api.FrameType, payload []byte) error {
	b.mu.Lock()
	for {
		switch {
		case b.released:
			b.mu.Unlock()
			return errReleased
		case b.closed:
			b.mu.Unlock()
			return io.ErrClosedPipe
		case len(b.data) == 0 || len(b.data)+5+len(payload) <= b.limit:
			b.appendLocked(t, payload)
			b.mu.Unlock()
			return nil
		case b.lossy:
			b.mu.Unlock()
			return errFull
		}
		ch := b.changed
		b.mu.Unlock()
		<-ch
		b.mu.Lock()
	}
}

func (b *outBuffer) appendLocked(t api.FrameType, payload []byte) {
	var hdr [5]byte
	hdr[0] = byte(t)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	b.data = append(append(b.data, hdr[:]...), payload...)
	b.notifyLocked()
}

// close appends the Exit frame, whether it fits or not, and ends the
// output.
func (b *outBuffer) close(exit []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.released {
		return
	}
	b.appendLocked(api.FrameExit, exit)
	b.closed = true
}

// read returns a copy of at most max bytes from offset off on, waiting
// for them until stop closes. It returns io.EOF at the end of a closed
// buffer, and an error for an offset it no longer (or never) held.
func (b *outBuffer) read(off int64, max int, stop <-chan struct{}) ([]byte, error) {
	b.mu.Lock()
	for {
		if b.released {
			b.mu.Unlock()
			return nil, errReleased
		}
		end := b.endLocked()
		if off < b.base || off > end {
			b.mu.Unlock()
			return nil, errors.New("offset out of range")
		}
		if off < end {
			n := min(end-off, int64(max))
			p := append([]byte(nil), b.data[off-b.base:off-b.base+n]...)
			if b.lossy { // nobody will ask for these again
				b.dropLocked(off + n)
			}
			b.mu.Unlock()
			return p, nil
		}
		if b.closed {
			b.mu.Unlock()
			return nil, io.EOF
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return nil, errStopped
		}
		b.mu.Lock()
	}
}

// ack frees the bytes before off (clamped to what the buffer holds).
func (b *outBuffer) ack(off int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.released {
		b.dropLocked(off)
	}
}

func (b *outBuffer) dropLocked(off int64) {
	n := min(max(off-b.base, 0), int64(len(b.data)))
	if n == 0 {
		return
	}
	b.base += n
	b.data = b.data[n:]
	if len(b.data) == 0 {
		b.data = nil // let the array go
	}
	b.notifyLocked()
}

// holds reports whether off is an offset read accepts.
func (b *outBuffer) holds(off int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.released && off >= b.base && off <= b.endLocked()
}

// setLossy makes appends fail rather than wait, and read free what it
// returns: for a session nobody will re-attach.
func (b *outBuffer) setLossy() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lossy = true
	b.notifyLocked()
}

// release drops everything; appends and reads fail from then on.
func (b *outBuffer) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = true
	b.data = nil
	b.notifyLocked()
}
