package initd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// serveProcesses replies with every background process, then every
// attached exec that runs, their commands cut to api.ProcessCommandCut.
func (s *server) serveProcesses(st *yamux.Stream) {
	var list []api.Process
	for _, p := range s.procs.list() {
		list = append(list, p.info())
	}
	list = append(list, s.sessions.running()...)
	for i := range list {
		list[i].Command = cutCommand(list[i].Command, api.ProcessCommandCut)
	}
	s.reply(st, api.ProcessesReply{Processes: list})
}

// cutCommand returns argv cut to at most n bytes in all.
func cutCommand(argv []string, n int) []string {
	out := make([]string, 0, len(argv))
	for _, a := range argv {
		if len(a) >= n {
			return append(out, a[:n]+"…")
		}
		out = append(out, a)
		n -= len(a)
	}
	return out
}

// serveProcess serves the process ops but the list: each names one by pid.
func (s *server) serveProcess(st *yamux.Stream, op string, req *api.ProcessRequest) {
	p := s.procs.get(req.PID)
	if p == nil {
		// An attached exec can be looked at and signalled, not more.
		ss := s.sessions.byPID(req.PID)
		switch {
		case ss == nil:
			s.replyError(st, &opError{api.AgentErrNotFound, fmt.Sprintf("no process %d", req.PID)})
		case op == api.AgentOpProcess:
			s.reply(st, ss.info())
		case op == api.AgentOpProcessSignal:
			if err := ss.signalIfRunning(unix.Signal(req.Signal)); err != nil {
				s.replyError(st, err)
				return
			}
			s.reply(st, api.AgentResult{OK: true})
		default:
			s.replyError(st, &opError{api.AgentErrNotBackground, fmt.Sprintf("process %d is an attached exec, not a background process: its output and stdin are its client's", req.PID)})
		}
		return
	}
	switch op {
	case api.AgentOpProcess:
		s.reply(st, p.info())
	case api.AgentOpProcessSignal:
		if err := p.signal(unix.Signal(req.Signal)); err != nil {
			s.replyError(st, err)
			return
		}
		s.reply(st, api.AgentResult{OK: true})
	case api.AgentOpProcessStdin:
		if err := p.writeStdin(req.Data, req.Close); err != nil {
			s.replyError(st, err)
			return
		}
		s.reply(st, api.AgentResult{OK: true})
	case api.AgentOpProcessWait:
		s.serveWait(st, p)
	case api.AgentOpProcessAttach:
		s.serveProcessAttach(st, p, req.Offset)
	}
}

// serveWait replies once p has exited, or gives up when cairnd ends the
// stream.
func (s *server) serveWait(st *yamux.Stream, p *process) {
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_, _ = io.Copy(io.Discard, st) // cairnd sends nothing; its end ends the wait
	}()
	select {
	case <-p.done:
		s.procs.markRead(p)
		s.reply(st, p.info())
	case <-gone:
	}
}

// serveProcessAttach replies with p, then sends its output from off on
// (a Dropped frame first if that is no longer kept), following it until
// its Exit frame, while applying the Stdin, StdinClose and Signal frames
// cairnd sends. The stream's end, from either side, leaves p as it is.
func (s *server) serveProcessAttach(st *yamux.Stream, p *process, off int64) {
	pr := p.info()
	if off < 0 || off > pr.OutputBytes {
		s.replyError(st, &opError{api.AgentErrInvalid, fmt.Sprintf("process %d has written %d bytes of output: no offset %d", p.pid, pr.OutputBytes, off)})
		return
	}
	pr.Offset = max(off, pr.OutputStart)
	s.reply(st, pr)
	stop := make(chan struct{})
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		s.processInput(st, p)
		// cairnd ended its side: stop sending, even a write waiting for
		// room it will never give.
		close(stop)
		_ = st.SetWriteDeadline(time.Now())
	}()
	if s.sendProcessOutput(st, p, off, stop) {
		s.procs.markRead(p)
	}
	st.Close()
	<-inputDone
}

// sendProcessOutput writes p's output from off on to st as frames, then
// its Exit frame. It reports whether the Exit frame was written.
func (s *server) sendProcessOutput(st *yamux.Stream, p *process, off int64, stop <-chan struct{}) bool {
	for {
		t, b, at, err := p.out.next(off, sendChunk, stop)
		switch {
		case errors.Is(err, io.EOF):
			<-p.done // set before the ring closed; waited for all the same
			return api.WriteFrame(st, api.FrameExit, exitJSON(*p.info().Exit)) == nil
		case err != nil:
			return false
		case t == api.FrameDropped:
			b, _ = json.Marshal(api.Dropped{Offset: at})
			off = at
		default:
			off = at + int64(len(b))
		}
		if api.WriteFrame(st, t, b) != nil {
			return false
		}
	}
}

// processInput applies the frames cairnd sends on an attach stream of p
// until the stream ends.
func (s *server) processInput(st *yamux.Stream, p *process) {
	for {
		t, payload, err := api.ReadFrame(st)
		if err != nil {
			return
		}
		switch t {
		case api.FrameStdin:
			if err := p.writeStdin(payload, false); err != nil {
				s.log.Debug("attached process stdin", "pid", p.pid, "err", err)
			}
		case api.FrameStdinClose:
			p.closeStdin()
		case api.FrameSignal:
			if len(payload) == 1 && payload[0] > 0 {
				_ = p.signal(unix.Signal(payload[0]))
			}
		}
	}
}

// running lists the attached execs whose commands run.
func (t *sessionTable) running() []api.Process {
	t.mu.Lock()
	all := make([]*session, 0, len(t.m))
	for _, ss := range t.m {
		all = append(all, ss)
	}
	t.mu.Unlock()
	var list []api.Process
	for _, ss := range all {
		if pr := ss.info(); pr.State == api.ProcessRunning {
			list = append(list, pr)
		}
	}
	slices.SortFunc(list, func(a, b api.Process) int { return a.PID - b.PID })
	return list
}

// byPID returns the session whose command runs as pid, if any.
func (t *sessionTable) byPID(pid int) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ss := range t.m {
		if ss.pid == pid {
			return ss
		}
	}
	return nil
}

// info describes the session's command as the processes API shows it.
func (ss *session) info() api.Process {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	state := api.ProcessRunning
	if !ss.drainFrom.IsZero() {
		state = api.ProcessExited
	}
	return api.Process{PID: ss.pid, Command: ss.command, Started: ss.started, State: state, TTY: ss.tty != nil, StdinOpen: ss.stdin != nil}
}

// signalIfRunning sends sig to the command's group unless it has exited.
func (ss *session) signalIfRunning(sig unix.Signal) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.drainFrom.IsZero() {
		return &opError{api.AgentErrExited, fmt.Sprintf("process %d has exited", ss.pid)}
	}
	ss.signal(sig)
	return nil
}
