package initd

import (
	"encoding/json"
	"errors"
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
	// drainGrace is how long output is still read after the command exits.
	// A background process that keeps the pipe or terminal open must not
	// hold the session open.
	drainGrace = 200 * time.Millisecond

	// hangupGrace is how long a command may take to exit after SIGHUP,
	// sent when its client goes away, before its group gets SIGKILL.
	hangupGrace = 2 * time.Second

	// eofChar is what StdinClose writes to a terminal: ^D, the default VEOF.
	eofChar = 0x04
)

// session is an attached exec: it pumps the command's stdio through exec
// frames on one stream until the command exits.
type session struct {
	log    *slog.Logger
	pid    int                    // also its process group id
	exited <-chan unix.WaitStatus // from the reaper
	stdin  *os.File               // where stdin frames go; nil without req.Stdin
	tty    *os.File               // pty master; nil without req.TTY
	out    []output
	files  []*os.File // ours, closed when the session ends
}

// output is one of the command's output streams and its frame type.
type output struct {
	f *os.File
	t api.FrameType
}

// run serves the session on st: output frames, then the Exit frame once
// the command has exited. If the client closes st first, the command's
// group gets SIGHUP, and SIGKILL after hangupGrace.
func (ss *session) run(st *yamux.Stream) {
	fw := &frameWriter{w: st}
	var pumps sync.WaitGroup
	for _, o := range ss.out {
		pumps.Go(func() { pump(fw, o) })
	}
	clientGone := make(chan struct{})
	go func() {
		defer close(clientGone)
		ss.input(st)
	}()

	status := ss.wait(st, clientGone)
	ss.drain(&pumps)
	if b, err := json.Marshal(status); err == nil {
		_ = fw.write(api.FrameExit, b)
	}
	st.Close()
	_ = st.SetReadDeadline(time.Now()) // ends input
	closeAll(ss.files)
	<-clientGone
}

// wait returns the command's exit status, hanging it up if the client goes
// away first.
func (ss *session) wait(st *yamux.Stream, clientGone <-chan struct{}) api.ExitStatus {
	var ws unix.WaitStatus
	select {
	case ws = <-ss.exited:
	case <-clientGone:
		ss.log.Info("exec client gone; hanging up", "pid", ss.pid)
		// Nobody reads the output any more: writes must not wait for room.
		_ = st.SetWriteDeadline(time.Now())
		ss.signal(unix.SIGHUP)
		kill := time.AfterFunc(hangupGrace, func() { ss.signal(unix.SIGKILL) })
		ws = <-ss.exited
		kill.Stop()
	}
	if ws.Signaled() {
		return api.ExitStatus{Code: 128 + int(ws.Signal()), Signal: unix.SignalName(ws.Signal())}
	}
	return api.ExitStatus{Code: ws.ExitStatus()}
}

// drain waits for the output pumps to reach end of file, at most
// drainGrace, then stops them.
func (ss *session) drain(pumps *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		pumps.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainGrace):
		for _, o := range ss.out {
			_ = o.f.SetReadDeadline(time.Now())
		}
		<-done
	}
}

// input applies the client's frames until the stream ends or fails.
func (ss *session) input(st *yamux.Stream) {
	for {
		t, payload, err := api.ReadFrame(st)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, yamux.ErrTimeout) {
				ss.log.Debug("exec stream", "pid", ss.pid, "err", err)
			}
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
		}
	}
}

func (ss *session) signal(sig unix.Signal) {
	_ = unix.Kill(-ss.pid, sig)
}

// pump sends what the command writes to o as frames until it ends.
func pump(fw *frameWriter, o output) {
	buf := make([]byte, 32<<10)
	for {
		n, err := o.f.Read(buf)
		if n > 0 {
			if werr := fw.write(o.t, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF; EIO from a pty nobody holds open; deadline
			return
		}
	}
}

// frameWriter lets several goroutines write whole frames to one stream.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (fw *frameWriter) write(t api.FrameType, payload []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return api.WriteFrame(fw.w, t, payload)
}
