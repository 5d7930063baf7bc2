package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// ErrSessionLost is wrapped by the error an exec stream returns when its
// connection broke and the session could not be re-attached: cairn-init
// did not come back within the Host's ReattachWait, no longer has the
// session, or the Host was closed. Such an error has code
// api.CodeAgentUnreachable.
var ErrSessionLost = errors.New("exec session lost")

const (
	// hangupWait bounds how long Close waits for room to send the Hangup
	// frame.
	hangupWait = time.Second
	// ackWait bounds one ack op.
	ackWait = 5 * time.Second
)

// execStream is the stream of an attached exec. It counts the bytes of the
// output frames it has read (their offset in the session's output), and
// when its yamux stream breaks before the Exit frame, it waits for
// cairn-init to connect again and re-attaches the session from that
// offset (op attach). It acknowledges (op ack) what it has handed to its
// reader, so that cairn-init can free it. Frames written to it are sent
// whole; one whose write failed is sent again on the re-attached stream.
//
// Read drives the re-attachment, so one goroutine must be reading for
// writes to go on after a break (a caller reads until FrameExit anyway).
type execStream struct {
	ctx      context.Context // the Exec's: its end aborts the stream
	h        *Host
	id       string // session id; "" from a cairn-init that cannot re-attach
	ackEvery int64  // acknowledge after this many bytes read; 0: never
	stopCtx  func() bool

	// Read's own.
	rbuf   []byte // an output frame read but not yet all returned
	offset int64  // output offset after the last whole frame read
	acked  int64  // offset last acknowledged

	wmu  sync.Mutex // one Write at a time
	wbuf []byte     // the start of a frame not yet whole

	exited atomic.Bool // the Exit frame was read

	mu      sync.Mutex
	cur     *yamux.Stream // nil while re-attaching
	changed chan struct{} // closed and replaced when cur changes, lost is set or Close is called
	closed  bool
	lost    error // set when the session cannot be resumed

	ackMu   sync.Mutex
	ackWant int64 // highest offset Read asked to acknowledge
	ackSent int64
	acking  bool // an ack goroutine runs
}

func newExecStream(ctx context.Context, h *Host, st *yamux.Stream, started api.ExecStarted) *execStream {
	s := &execStream{
		ctx:      ctx,
		h:        h,
		id:       started.Session,
		ackEvery: int64(started.Buffer / 4),
		cur:      st,
		changed:  make(chan struct{}),
	}
	s.stopCtx = context.AfterFunc(ctx, s.abort)
	return s
}

// Read returns the bytes of the output frames, the Exit frame last, then
// io.EOF.
func (s *execStream) Read(b []byte) (int, error) {
	for len(s.rbuf) == 0 {
		if s.exited.Load() {
			return 0, io.EOF
		}
		s.mu.Lock()
		st, lost := s.cur, s.lost
		s.mu.Unlock()
		if lost != nil {
			return 0, lost
		}
		t, payload, err := api.ReadFrame(st)
		if err != nil {
			if err := s.broken(st, err); err != nil {
				return 0, err
			}
			continue
		}
		s.offset += 5 + int64(len(payload))
		s.rbuf = frame(t, payload)
		if t == api.FrameExit {
			s.exited.Store(true)
			// cairn-init keeps the session until we end our side.
			st.Close()
		}
	}
	n := copy(b, s.rbuf)
	s.rbuf = s.rbuf[n:]
	if done := s.offset - int64(len(s.rbuf)); s.ackEvery > 0 && done-s.acked >= s.ackEvery {
		s.acked = done
		s.ack(done)
	}
	return n, nil
}

func frame(t api.FrameType, payload []byte) []byte {
	b := make([]byte, 5+len(payload))
	b[0] = byte(t)
	binary.BigEndian.PutUint32(b[1:5], uint32(len(payload)))
	copy(b[5:], payload)
	return b
}

// broken handles the failure of st, the current stream, with err: it
// re-attaches the session, or returns why it cannot.
func (s *execStream) broken(st *yamux.Stream, err error) error {
	switch {
	case s.ctx.Err() != nil:
		return s.lose(st, s.ctx.Err())
	case errors.Is(err, api.ErrFrameTooLarge): // not a break: a bad peer
		return s.lose(st, err)
	case s.id == "":
		return s.lose(st, fmt.Errorf("cairn-init cannot re-attach sessions: %w", err))
	}
	return s.reattach(st, err)
}

// reattach waits, at most the Host's ReattachWait, for a connection on
// which cairn-init re-attaches the session from s.offset, and makes that
// stream the current one.
func (s *execStream) reattach(old *yamux.Stream, cause error) error {
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
	s.h.log.Info("exec stream broken; re-attaching", "session", s.id, "offset", s.offset, "err", cause)
	ctx, cancel := context.WithTimeout(s.ctx, s.h.reattachWait)
	defer cancel()
	for {
		sess, changed, err := s.h.session(ctx)
		if err != nil {
			return s.lose(old, err)
		}
		var started api.ExecStarted
		req := api.AgentRequest{Op: api.AgentOpAttach, Session: &api.SessionOffset{ID: s.id, Offset: s.offset}}
		st, err := request(ctx, sess, req, &started)
		if err == nil {
			old.Close()
			s.acked = s.offset // attaching acknowledges what comes before
			s.mu.Lock()
			s.cur = st
			closed := s.closed
			s.notifyLocked()
			s.mu.Unlock()
			if closed { // Close came while we re-attached
				s.hangup(st)
			}
			s.h.log.Info("exec stream re-attached", "session", s.id, "offset", s.offset)
			return nil
		}
		if _, ok := errors.AsType[*replyError](err); ok { // cairn-init answered: the session is gone
			return s.lose(old, err)
		}
		select { // that connection is no good: wait for the next
		case <-sess.CloseChan():
		case <-changed:
		case <-ctx.Done():
			return s.lose(old, notConnected(ctx))
		}
	}
}

// lose ends the stream for good: the session cannot be resumed because of
// cause. Ending our side of st makes cairn-init, if it still hears us,
// hang the command up.
func (s *execStream) lose(st *yamux.Stream, cause error) error {
	st.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = errdefs.Wrap(api.CodeAgentUnreachable, &lostError{cause}, "")
		s.notifyLocked()
	}
	return s.lost
}

func (s *execStream) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// lostError is what a lost session's stream returns.
type lostError struct{ cause error }

func (e *lostError) Error() string   { return ErrSessionLost.Error() + ": " + e.cause.Error() }
func (e *lostError) Unwrap() []error { return []error{ErrSessionLost, e.cause} }

// Write takes frames from the caller, in any pieces, and sends each whole
// one to cairn-init. Hangup frames are dropped (Close hangs up). After the
// Exit frame, frames are dropped: nothing reads them any more.
func (s *execStream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wbuf = append(s.wbuf, p...)
	rest := s.wbuf
	for len(rest) >= 5 {
		n := binary.BigEndian.Uint32(rest[1:5])
		if n > api.MaxFramePayload {
			s.wbuf = nil
			return 0, api.ErrFrameTooLarge
		}
		size := 5 + int(n)
		if len(rest) < size {
			break
		}
		if api.FrameType(rest[0]) != api.FrameHangup {
			if err := s.writeFrame(rest[:size]); err != nil {
				s.wbuf = nil
				return 0, err
			}
		}
		rest = rest[size:]
	}
	s.wbuf = append([]byte(nil), rest...)
	return len(p), nil
}

// writeFrame sends one whole frame on the current stream. If the write
// fails, it makes the reader notice the break and sends the frame again on
// the stream it re-attaches. A frame written whole counts as delivered: if
// the connection breaks before cairn-init reads it, it is lost.
func (s *execStream) writeFrame(f []byte) error {
	for {
		s.mu.Lock()
		st, changed, closed, lost := s.cur, s.changed, s.closed, s.lost
		s.mu.Unlock()
		switch {
		case closed:
			return net.ErrClosed
		case s.exited.Load():
			return nil
		case lost != nil:
			return lost
		}
		if st != nil {
			if _, err := st.Write(f); err == nil {
				return nil
			}
			s.mu.Lock()
			closed = s.closed
			s.mu.Unlock()
			if closed {
				return net.ErrClosed
			}
			_ = st.SetReadDeadline(time.Now()) // the reader re-attaches
		}
		select {
		case <-changed:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

// ack has cairn-init free the output before off, in the background: the
// ack op must not wait behind stdin frames the command does not read.
func (s *execStream) ack(off int64) {
	s.ackMu.Lock()
	defer s.ackMu.Unlock()
	s.ackWant = max(s.ackWant, off)
	if s.acking {
		return
	}
	s.acking = true
	go func() {
		for {
			s.ackMu.Lock()
			off := s.ackWant
			if off <= s.ackSent {
				s.acking = false
				s.ackMu.Unlock()
				return
			}
			s.ackSent = off
			s.ackMu.Unlock()
			// A failed ack is harmless: re-attaching acknowledges too.
			_ = s.h.ack(s.id, off)
		}
	}()
}

// ack asks cairn-init to free the output of session id before off.
func (h *Host) ack(id string, off int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), ackWait)
	defer cancel()
	var res api.AgentResult
	st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpAck, Session: &api.SessionOffset{ID: id, Offset: off}}, &res)
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// Close ends the session from cairnd's side: unless the Exit frame was
// read, it sends a Hangup frame, so that cairn-init hangs the command up
// at once, then ends our side of the stream. What cairn-init still sends
// can be read. Writes fail from then on.
func (s *execStream) Close() error {
	s.stopCtx()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	st := s.cur
	s.notifyLocked()
	s.mu.Unlock()
	if st != nil { // else the re-attaching reader hangs up
		s.hangup(st)
	}
	return nil
}

func (s *execStream) hangup(st *yamux.Stream) {
	if !s.exited.Load() {
		// A write blocked on a full window gives way; the frame then
		// follows a partial one, which cairn-init takes as a hangup too.
		_ = st.SetWriteDeadline(time.Now().Add(hangupWait))
		_ = api.WriteFrame(st, api.FrameHangup, nil)
	}
	st.Close()
}

// abort closes the stream and ends a pending Read: ctx ended.
func (s *execStream) abort() {
	s.Close()
	s.mu.Lock()
	st := s.cur
	s.mu.Unlock()
	if st != nil {
		_ = st.SetReadDeadline(time.Now())
	}
}
