package initd

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

const (
	// drainGrace is how long output is still awaited after the command
	// exits (time spent waiting for room in the buffer does not count). A
	// background process that keeps the pipe or terminal open must not
	// hold the session open.
	drainGrace = 200 * time.Millisecond

	// hangupGrace is how long a command may take to exit after SIGHUP,
	// sent when its client goes away, before its group gets SIGKILL.
	hangupGrace = 2 * time.Second

	// eofChar is what StdinClose writes to a terminal: ^D, the default VEOF.
	eofChar = 0x04

	// sendChunk bounds one write of buffered output to a stream.
	sendChunk = 64 << 10

	// DefaultExecGrace is how long an exec session whose stream to cairnd
	// broke waits to be re-attached before its command is hung up.
	DefaultExecGrace = 60 * time.Second

	// DefaultExecBuffer is how many bytes of output an exec session keeps
	// until cairnd acknowledges them; beyond, the command blocks on its
	// output.
	DefaultExecBuffer = 8 << 20
)

// session is an attached exec. Its command's output goes, as exec frames,
// into a buffer that keeps it until cairnd acknowledges it, and from there
// to the stream cairnd currently has attached, if any. The session
// outlives a broken connection: it waits cfg.ExecGrace for cairnd to
// attach a new stream (op attach), which resumes the output at the offset
// cairnd names. If cairnd ends the stream on purpose instead (the client
// went away), or nobody re-attaches in time, the command is hung up.
type session struct {
	srv    *server
	log    *slog.Logger
	id     string                 // random, 32 hex digits
	pid    int                    // also its process group id
	exited <-chan unix.WaitStatus // from the reaper
	stdin  *os.File               // where stdin frames go; nil without req.Stdin
	tty    *os.File               // pty master; nil without req.TTY
	out    []*output
	files  []*os.File // ours, closed when the command has exited
	buf    *outBuffer
	// command and started describe it in the processes list.
	command []string
	started time.Time

	mu        sync.Mutex
	att       *attachment // the stream output goes to; nil while detached
	timerGen  int         // identifies the grace timer that may act
	timer     *time.Timer // grace: while detached, or once everything is delivered
	kill      *time.Timer // SIGKILL after a hangup
	drainFrom time.Time   // when the command exited
	hungUp    bool        // hung up: nobody can attach any more
	ended     bool        // the command exited and its Exit frame is in buf
	expired   bool        // the grace ran out while detached
	freed     bool
	timedOut  bool        // killed at its timeout (armTimeout)
	deadline  *time.Timer // its timeout; nil without one
}

// output is one of the command's output streams and its frame type.
type output struct {
	f *os.File
	t api.FrameType
	// blocked is how long its pump waited for room in the buffer since
	// the command exited, which extends the drain. Guarded by session.mu.
	blocked time.Duration
}

// attachment is one stream of a session, opened by an exec or attach op.
type attachment struct {
	st   *yamux.Stream
	stop chan struct{} // closed when the session drops it: its sender stops

	// Guarded by session.mu.
	hangup     bool // cairnd ended it on purpose (Hangup frame, or closed while connected)
	inputDone  bool
	senderDone bool
	delivered  bool // every byte, the Exit frame included, was written to it
}

func newSessionID() string {
	id := make([]byte, 16)
	_, _ = rand.Read(id) // never fails on Linux
	return hex.EncodeToString(id)
}

// start runs the pumps and waits for the command in the background.
func (ss *session) start() {
	var pumps sync.WaitGroup
	for _, o := range ss.out {
		pumps.Go(func() { ss.pump(o) })
	}
	ss.srv.wg.Go(func() { ss.wait(&pumps) })
}

// wait waits for the command to exit, drains its output, and adds the
// Exit frame.
func (ss *session) wait(pumps *sync.WaitGroup) {
	ws := <-ss.exited
	ss.mu.Lock()
	if ss.kill != nil {
		ss.kill.Stop()
	}
	if ss.deadline != nil {
		ss.deadline.Stop()
	}
	timedOut := ss.timedOut
	ss.drainFrom = time.Now()
	for _, o := range ss.out {
		_ = o.f.SetReadDeadline(ss.drainFrom.Add(drainGrace))
	}
	ss.mu.Unlock()
	pumps.Wait()
	closeAll(ss.files)

	status := exitStatus(ws, timedOut)
	ss.buf.close(exitJSON(status))
	ss.log.Debug("exec exited", "pid", ss.pid, "code", status.Code)

	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.ended = true
	ss.maybeFreeLocked()
}

// pump adds what the command writes to o to the buffer until it ends.
// Once the command has exited, o is read until drainGrace plus the time
// spent waiting for room has passed.
func (ss *session) pump(o *output) {
	buf := make([]byte, 32<<10)
	for {
		n, err := o.f.Read(buf)
		if n > 0 {
			t0 := time.Now()
			if ss.buf.append(o.t, buf[:n]) != nil {
				return
			}
			ss.mu.Lock()
			if !ss.drainFrom.IsZero() {
				o.blocked += time.Since(later(t0, ss.drainFrom))
				_ = o.f.SetReadDeadline(ss.drainFrom.Add(drainGrace + o.blocked))
			}
			ss.mu.Unlock()
		}
		if err != nil { // EOF; EIO from a pty nobody holds open; deadline
			return
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// attach makes st the session's stream, replacing the one it had, with
// the output before off acknowledged. The caller replies, then calls serve.
func (ss *session) attach(st *yamux.Stream, off int64) (*attachment, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.freed || ss.hungUp {
		return nil, &opError{api.AgentErrNotFound, fmt.Sprintf("no exec session %q", ss.id)}
	}
	if !ss.buf.holds(off) {
		return nil, &opError{api.AgentErrInvalid, fmt.Sprintf("exec session %q does not hold offset %d", ss.id, off)}
	}
	if old := ss.att; old != nil {
		ss.dropLocked(old)
	}
	att := &attachment{st: st, stop: make(chan struct{})}
	ss.att = att
	ss.stopTimerLocked()
	ss.buf.ack(off)
	return att, nil
}

// dropLocked stops att: its sender ends and its stream's reads and writes
// fail. It must be (or have been) the session's attachment.
func (ss *session) dropLocked(att *attachment) {
	close(att.stop)
	_ = att.st.SetDeadline(time.Now())
}

// serve sends the output from off on to att's stream and applies the
// frames cairnd sends, until both are over.
func (ss *session) serve(att *attachment, off int64) {
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		ss.input(att)
	}()
	ss.send(att, off)
	<-inputDone
}

// send writes the buffered output from off on to att's stream, waiting
// for more, until the Exit frame is written (it then closes its side of
// the stream), a write fails, or att is dropped.
func (ss *session) send(att *attachment, off int64) {
	delivered := false
	for {
		p, err := ss.buf.read(off, sendChunk, att.stop)
		if errors.Is(err, io.EOF) {
			delivered = true
			_ = att.st.Close() // cairnd reads to the end, then closes its side
			break
		}
		if err != nil {
			break
		}
		if _, err := att.st.Write(p); err != nil {
			break
		}
		off += int64(len(p))
	}

	ss.mu.Lock()
	defer ss.mu.Unlock()
	att.senderDone, att.delivered = true, delivered
	switch {
	case ss.att != att: // dropped
	case delivered:
		ss.maybeFreeLocked()
		if !ss.freed {
			// cairnd closes its side once it has the Exit frame; a
			// cairnd that never does holds the session this long.
			ss.armLocked()
		}
	case att.hangup:
		ss.maybeFreeLocked()
	default:
		// The write failed: the connection is broken, or the stream no
		// good. Ending our side tells cairnd, if it still hears us, to
		// re-attach.
		_ = att.st.Close()
	}
}

// input applies cairnd's frames until the stream ends or fails.
func (ss *session) input(att *attachment) {
	for {
		t, payload, err := api.ReadFrame(att.st)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, yamux.ErrTimeout) {
				ss.log.Debug("exec stream", "pid", ss.pid, "err", err)
			}
			ss.inputEnded(att)
			return
		}
		switch t {
		case api.FrameStdin:
			if ss.stdin != nil {
				_, _ = ss.stdin.Write(payload)
			}
		case api.FrameStdinClose:
			switch {
			case ss.stdin == nil:
			case ss.tty != nil:
				_, _ = ss.stdin.Write([]byte{eofChar})
			default:
				ss.stdin.Close()
			}
		case api.FrameResize:
			var r api.Resize
			if ss.tty != nil && json.Unmarshal(payload, &r) == nil && r.Rows > 0 && r.Cols > 0 {
				_ = setSize(ss.tty, r.Rows, r.Cols)
			}
		case api.FrameSignal:
			if len(payload) == 1 && payload[0] > 0 {
				ss.signal(unix.Signal(payload[0]))
			}
		case api.FrameHangup:
			ss.mu.Lock()
			if ss.att == att {
				att.hangup = true
				ss.hangUpLocked("exec client gone")
			}
			ss.mu.Unlock()
		}
	}
}

// inputEnded decides what the end of att's stream means. If its
// connection is still up, cairnd ended it on purpose: the client is gone
// (or, after the Exit frame, done), so the command is hung up. If the
// connection broke, the session waits to be re-attached.
func (ss *session) inputEnded(att *attachment) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	att.inputDone = true
	if ss.att != att {
		return
	}
	if att.hangup || !att.st.Session().IsClosed() {
		att.hangup = true
		ss.hangUpLocked("exec client gone")
		ss.maybeFreeLocked()
		return
	}
	ss.att = nil
	ss.dropLocked(att)
	if ss.hungUp {
		ss.maybeFreeLocked()
		return
	}
	ss.log.Info("exec stream lost; waiting to be re-attached", "pid", ss.pid, "session", ss.id, "grace", ss.srv.cfg.ExecGrace)
	ss.armLocked()
}

// hangUpLocked makes the session unattachable and, if the command still
// runs, sends SIGHUP to its group, and SIGKILL hangupGrace later. What is
// left of the output (Exit frame included) still goes to the current
// stream as long as it has room, never waiting for it.
func (ss *session) hangUpLocked(why string) {
	if ss.hungUp {
		return
	}
	ss.hungUp = true
	ss.srv.sessions.remove(ss.id)
	ss.stopTimerLocked()
	ss.buf.setLossy()
	if ss.att != nil {
		// Nobody may read the output any more: writes must not wait for room.
		_ = ss.att.st.SetWriteDeadline(time.Now())
	}
	if ss.ended {
		return
	}
	ss.log.Info(why+"; hanging up", "pid", ss.pid, "session", ss.id)
	ss.signal(unix.SIGHUP)
	ss.kill = time.AfterFunc(hangupGrace, func() { ss.signal(unix.SIGKILL) })
}

// maybeFreeLocked frees the session once nothing more can come of it: the
// command has ended and either its stream is over on both sides after
// cairnd ended it, or it is detached and hung up or past its grace.
func (ss *session) maybeFreeLocked() {
	if ss.freed || !ss.ended {
		return
	}
	if att := ss.att; att != nil {
		if !att.hangup || !att.inputDone || !att.senderDone {
			return
		}
	} else if !ss.hungUp && !ss.expired {
		return
	}
	ss.freeLocked()
}

func (ss *session) freeLocked() {
	ss.freed = true
	ss.srv.sessions.remove(ss.id)
	ss.stopTimerLocked()
	if att := ss.att; att != nil {
		ss.att = nil
		ss.dropLocked(att)
	}
	ss.buf.release()
	ss.log.Debug("exec session done", "pid", ss.pid, "session", ss.id)
}

// armLocked starts the grace timer, replacing any other.
func (ss *session) armLocked() {
	ss.stopTimerLocked()
	gen := ss.timerGen
	ss.timer = time.AfterFunc(ss.srv.cfg.ExecGrace, func() { ss.graceOver(gen) })
}

func (ss *session) stopTimerLocked() {
	ss.timerGen++
	if ss.timer != nil {
		ss.timer.Stop()
		ss.timer = nil
	}
}

// graceOver ends a session left alone for the grace: detached (nobody
// re-attached it) or delivered (cairnd never confirmed the end).
func (ss *session) graceOver(gen int) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if gen != ss.timerGen || ss.freed {
		return
	}
	if att := ss.att; att != nil {
		if att.delivered {
			ss.freeLocked()
		}
		return
	}
	ss.expired = true
	ss.hangUpLocked("exec session not re-attached in time")
	ss.maybeFreeLocked()
}

// end hangs the session up at once and lets it go as soon as its command
// has exited: cairn-init is stopping.
func (ss *session) end() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expired = true
	ss.hangUpLocked("cairn-init stopping")
	ss.maybeFreeLocked()
}

func (ss *session) signal(sig unix.Signal) {
	_ = unix.Kill(-ss.pid, sig)
}

// armTimeout kills the command's process group after d, unless it has
// exited by then; its Exit frame then says it timed out.
func (ss *session) armTimeout(d time.Duration) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.deadline = time.AfterFunc(d, func() {
		ss.mu.Lock()
		if !ss.drainFrom.IsZero() {
			ss.mu.Unlock()
			return // exited in time: its group id may be another's by now
		}
		ss.timedOut = true
		ss.mu.Unlock()
		ss.log.Info("exec timed out; killing its process group", "pid", ss.pid, "timeout", d)
		ss.signal(unix.SIGKILL)
	})
}

// sessionTable holds the sessions that can be attached or acknowledged,
// by id.
type sessionTable struct {
	mu      sync.Mutex
	m       map[string]*session
	closing bool
}

func newSessionTable() *sessionTable {
	return &sessionTable{m: make(map[string]*session)}
}

// add registers ss, unless the table is closing.
func (t *sessionTable) add(ss *session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return false
	}
	t.m[ss.id] = ss
	return true
}

func (t *sessionTable) get(id string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *sessionTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
}

// endAll ends every session and refuses new ones.
func (t *sessionTable) endAll() {
	t.mu.Lock()
	t.closing = true
	all := make([]*session, 0, len(t.m))
	for _, ss := range t.m {
		all = append(all, ss)
	}
	t.mu.Unlock()
	for _, ss := range all {
		ss.end()
	}
}
