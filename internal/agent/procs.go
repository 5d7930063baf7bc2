package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Background processes (api/process.go): cairn-init keeps them; a Host
// lists, attaches, writes to, signals and waits for them by pid, and
// answers cairn-init's failures with the API's codes (processError).

// processError is the API error of a process op (or a background exec)
// that cairn-init answered with code and msg.
func processError(code, msg string) error {
	switch code {
	case api.AgentErrNotFound:
		return errdefs.New(api.CodeNoProcess, "%s", msg)
	case api.AgentErrInvalid:
		return errdefs.New(api.CodeInvalidArgument, "%s", msg)
	case api.AgentErrExited:
		return errdefs.New(api.CodeProcessExited, "%s", msg)
	case api.AgentErrNotBackground:
		return errdefs.New(api.CodeNotBackground, "%s", msg)
	case api.AgentErrStdinClosed:
		return errdefs.New(api.CodeStdinClosed, "%s", msg)
	case api.AgentErrStdinFull:
		return errdefs.New(api.CodeStdinFull, "%s", msg)
	case api.AgentErrTooMany:
		return errdefs.New(api.CodeTooManyProcesses, "%s", msg)
	}
	return errdefs.New(api.CodeAgentUnreachable, "%s", msg)
}

// process makes the process op op on pid and returns the stream after its
// reply line, decoded into reply.
func (h *Host) process(ctx context.Context, op string, req api.ProcessRequest, reply any) (*yamux.Stream, error) {
	st, err := h.do(ctx, api.AgentRequest{Op: op, Process: &req}, reply)
	if re, ok := errors.AsType[*replyError](err); ok {
		return nil, processError(re.code, re.msg)
	}
	return st, err
}

// Processes lists the background processes cairn-init keeps (running, or
// exited and not yet dropped), then the attached execs that run, each
// with its command cut to api.ProcessCommandCut bytes.
func (h *Host) Processes(ctx context.Context) ([]api.Process, error) {
	var reply api.ProcessesReply
	st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpProcesses}, &reply)
	if err != nil {
		return nil, err
	}
	st.Close()
	return reply.Processes, nil
}

// Process describes the process pid. S12.
func (h *Host) Process(ctx context.Context, pid int) (api.Process, error) {
	var p api.Process
	st, err := h.process(ctx, api.AgentOpProcess, api.ProcessRequest{PID: pid}, &p)
	if err != nil {
		return p, err
	}
	st.Close()
	return p, nil
}

// SignalProcess sends signal sig to the process group of pid (a
// background process or an attached exec). S12, S13.
func (h *Host) SignalProcess(ctx context.Context, pid, sig int) error {
	var res api.AgentResult
	st, err := h.process(ctx, api.AgentOpProcessSignal, api.ProcessRequest{PID: pid, Signal: sig}, &res)
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// WriteStdin writes data to the stdin of background process pid, in
// chunks of api.MaxStdinChunk, and closes it after if closeAfter. Each
// chunk waits at most api.StdinWait for the process to read. S12, S13,
// S14, S15, S16.
func (h *Host) WriteStdin(ctx context.Context, pid int, data []byte, closeAfter bool) error {
	for {
		n := min(len(data), api.MaxStdinChunk)
		last := n == len(data)
		var res api.AgentResult
		st, err := h.process(ctx, api.AgentOpProcessStdin, api.ProcessRequest{PID: pid, Data: data[:n], Close: last && closeAfter}, &res)
		if err != nil {
			return err
		}
		st.Close()
		if last {
			return nil
		}
		data = data[n:]
	}
}

// WaitProcess waits until background process pid has exited, then returns
// it with its exit status (its end counts as read). S12, S14.
func (h *Host) WaitProcess(ctx context.Context, pid int) (api.Process, error) {
	var p api.Process
	st, err := h.process(ctx, api.AgentOpProcessWait, api.ProcessRequest{PID: pid}, &p)
	if err != nil {
		return p, err
	}
	st.Close()
	return p, nil
}

// AttachProcess attaches to background process pid: it returns the
// process (its Offset says where the output starts) and a stream that
// carries its output from offset on as exec frames (a Dropped frame
// where bytes were dropped), then its Exit frame (Read then returns
// io.EOF); Stdin, StdinClose and Signal frames written to it go to the
// process. Closing it leaves the process running. The end of ctx aborts
// the stream. When the connection to cairn-init breaks before the Exit
// frame, the stream waits for cairn-init to connect again and attaches
// from the offset it reached (at most the Host's ReattachWait), so its
// reader gets every byte once; if that fails, Read returns an error
// wrapping ErrSessionLost. S12, S14, V02 (an offset past the output's
// end).
func (h *Host) AttachProcess(ctx context.Context, pid int, offset int64) (api.Process, io.ReadWriteCloser, error) {
	var p api.Process
	st, err := h.process(ctx, api.AgentOpProcessAttach, api.ProcessRequest{PID: pid, Offset: offset}, &p)
	if err != nil {
		return p, nil, err
	}
	s := &procStream{ctx: ctx, h: h, pid: pid, offset: max(offset, p.Offset), cur: st, changed: make(chan struct{})}
	s.stopCtx = context.AfterFunc(ctx, s.abort)
	return p, s, nil
}

// procStream is the stream of an attach to a background process. It
// counts the output offset of the whole frames it has read, and attaches
// again from there when its yamux stream fails before the Exit frame.
// Frames written to it are sent whole; one whose write failed is sent
// again on the stream attached next (input is at most once, as for an
// exec). Read drives the re-attachment.
type procStream struct {
	ctx     context.Context
	h       *Host
	pid     int
	stopCtx func() bool

	// Read's own.
	rbuf   []byte
	offset int64

	wmu  sync.Mutex
	wbuf []byte

	exited atomic.Bool

	mu      sync.Mutex
	cur     *yamux.Stream // nil while attaching again
	changed chan struct{} // closed and replaced when cur changes, lost is set or Close is called
	closed  bool
	lost    error
}

// Read returns the bytes of the frames, the Exit frame last, then io.EOF.
func (s *procStream) Read(b []byte) (int, error) {
	for len(s.rbuf) == 0 {
		if s.exited.Load() {
			return 0, io.EOF
		}
		s.mu.Lock()
		st, lost, closed := s.cur, s.lost, s.closed
		s.mu.Unlock()
		switch {
		case lost != nil:
			return 0, lost
		case closed:
			return 0, net.ErrClosed
		}
		t, payload, err := api.ReadFrame(st)
		if err != nil {
			if err := s.broken(st, err); err != nil {
				return 0, err
			}
			continue
		}
		switch t {
		case api.FrameStdout, api.FrameStderr:
			s.offset += int64(len(payload))
		case api.FrameDropped:
			var d api.Dropped
			if json.Unmarshal(payload, &d) == nil && d.Offset > s.offset {
				s.offset = d.Offset
			}
		case api.FrameExit:
			s.exited.Store(true)
			st.Close()
		}
		s.rbuf = frame(t, payload)
	}
	n := copy(b, s.rbuf)
	s.rbuf = s.rbuf[n:]
	return n, nil
}

// broken attaches again after st failed with err, or says why it cannot.
func (s *procStream) broken(old *yamux.Stream, cause error) error {
	s.mu.Lock()
	closed := s.closed
	s.cur = nil
	s.mu.Unlock()
	switch {
	case closed:
		return s.lose(old, net.ErrClosed)
	case s.ctx.Err() != nil:
		return s.lose(old, s.ctx.Err())
	case errors.Is(cause, api.ErrFrameTooLarge):
		return s.lose(old, cause)
	}
	s.h.log.Info("process attach broken; attaching again", "pid", s.pid, "offset", s.offset, "err", cause)
	ctx, cancel := context.WithTimeout(s.ctx, s.h.reattachWait)
	defer cancel()
	for {
		sess, changed, err := s.h.session(ctx)
		if err != nil {
			return s.lose(old, err)
		}
		var p api.Process
		req := api.AgentRequest{Op: api.AgentOpProcessAttach, Process: &api.ProcessRequest{PID: s.pid, Offset: s.offset}}
		st, err := request(ctx, sess, req, &p)
		if err == nil {
			old.Close()
			s.mu.Lock()
			s.cur = st
			closed := s.closed
			s.notifyLocked()
			s.mu.Unlock()
			if closed {
				st.Close()
			}
			return nil
		}
		if re, ok := errors.AsType[*replyError](err); ok { // cairn-init answered: the process is gone
			return s.lose(old, processError(re.code, re.msg))
		}
		select {
		case <-sess.CloseChan():
		case <-changed:
		case <-ctx.Done():
			return s.lose(old, notConnected(ctx))
		}
	}
}

func (s *procStream) lose(st *yamux.Stream, cause error) error {
	st.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = errdefs.Wrap(api.CodeAgentUnreachable, &lostError{cause}, "attach to process %d", s.pid)
		s.notifyLocked()
	}
	return s.lost
}

func (s *procStream) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Write takes frames in any pieces and sends each whole one.
func (s *procStream) Write(p []byte) (int, error) {
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
		if err := s.writeFrame(rest[:size]); err != nil {
			s.wbuf = nil
			return 0, err
		}
		rest = rest[size:]
	}
	s.wbuf = append([]byte(nil), rest...)
	return len(p), nil
}

// writeFrame sends f on the current stream, and again on the next one if
// the write failed.
func (s *procStream) writeFrame(f []byte) error {
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
			_ = st.SetReadDeadline(time.Now()) // the reader attaches again
		}
		select {
		case <-changed:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

// Close ends the attach (the process runs on): our side of the stream
// closes, and cairn-init stops sending.
func (s *procStream) Close() error {
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
	if st != nil {
		st.Close()
		_ = st.SetReadDeadline(time.Now().Add(hangupWait)) // a reader waiting on it goes
	}
	return nil
}

// abort closes the stream and ends a pending Read: ctx ended.
func (s *procStream) abort() {
	s.Close()
	s.mu.Lock()
	st := s.cur
	s.mu.Unlock()
	if st != nil {
		_ = st.SetReadDeadline(time.Now())
	}
}
