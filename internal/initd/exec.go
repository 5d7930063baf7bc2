package initd

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/hashicorp/yamux"
	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// serveExec serves an exec stream: it starts req's command, replies with its pid
// or the reason it could not start and, unless the command is detached,
// serves its session on st: until the command exits and the output is
// sent, until cairnd hangs it up, or until the stream breaks (then the
// session waits to be re-attached).
func (s *server) serveExec(st *yamux.Stream, req api.ExecRequest) {
	cmd, err := command(s.cfg.Env, req)
	if err != nil {
		s.replyError(st, err)
		return
	}
	timeout := time.Duration(min(max(req.TimeoutSeconds, 0), api.MaxExecTimeout) * float64(time.Second))
	if req.Background {
		p, err := s.startBackground(cmd, req, timeout)
		pid := 0
		if p != nil {
			pid = p.pid
		}
		s.replyStarted(st, req, pid, "", err)
		return
	}
	if req.Detach {
		pid, exited, err := s.startDetached(cmd)
		if err == nil && timeout > 0 {
			go func() {
				t := time.NewTimer(timeout)
				defer t.Stop()
				select {
				case <-exited: // its group id may be another's after this
				case <-t.C:
					_ = unix.Kill(-pid, unix.SIGKILL)
				}
			}()
		}
		s.replyStarted(st, req, pid, "", err)
		return
	}
	start := s.startPipes
	if req.TTY {
		start = s.startTTY
	}
	ss, err := start(cmd, req)
	if err != nil {
		s.replyStarted(st, req, 0, "", err)
		return
	}
	ss.srv, ss.log, ss.id = s, s.log, newSessionID()
	ss.command, ss.started = slices.Clone(req.Command), time.Now().UTC()
	ss.buf = newOutBuffer(s.cfg.ExecBuffer)
	att, _ := ss.attach(st, 0) // a new session takes any stream at offset 0
	ss.start()
	if timeout > 0 {
		ss.armTimeout(timeout)
	}
	if !s.sessions.add(ss) { // cairn-init is stopping
		ss.end()
	}
	s.replyStarted(st, req, ss.pid, ss.id, nil)
	ss.serve(att, 0)
}

// serveAttach serves an attach stream: it makes the stream the one of the
// session it names, replies, then sends the session's output from the
// offset it names on, and applies the frames cairnd sends.
func (s *server) serveAttach(st *yamux.Stream, ref *api.SessionOffset) {
	if ref == nil {
		s.replyError(st, &opError{api.AgentErrInvalid, "attach: no session"})
		return
	}
	ss := s.sessions.get(ref.ID)
	if ss == nil {
		s.replyError(st, &opError{api.AgentErrNotFound, fmt.Sprintf("no exec session %q", ref.ID)})
		return
	}
	att, err := ss.attach(st, ref.Offset)
	if err != nil {
		s.replyError(st, err)
		return
	}
	s.log.Info("exec session re-attached", "pid", ss.pid, "session", ss.id, "offset", ref.Offset)
	s.reply(st, api.ExecStarted{PID: ss.pid, Session: ss.id, Buffer: s.cfg.ExecBuffer})
	ss.serve(att, ref.Offset)
}

// serveAck frees the output of a session before the offset it names.
func (s *server) serveAck(st *yamux.Stream, ref *api.SessionOffset) {
	if ref == nil {
		s.replyError(st, &opError{api.AgentErrInvalid, "ack: no session"})
		return
	}
	ss := s.sessions.get(ref.ID)
	if ss == nil {
		s.replyError(st, &opError{api.AgentErrNotFound, fmt.Sprintf("no exec session %q", ref.ID)})
		return
	}
	ss.buf.ack(ref.Offset)
	s.reply(st, api.AgentResult{OK: true})
}

// replyStarted answers an exec request with the pid of its process (and
// the id of its session, if attached) or the reason it did not start.
func (s *server) replyStarted(st *yamux.Stream, req api.ExecRequest, pid int, session string, err error) {
	if err != nil {
		s.log.Debug("exec failed", "command", req.Command[0], "err", err)
		s.replyError(st, err)
		return
	}
	s.log.Debug("exec", "command", req.Command[0], "pid", pid, "detach", req.Detach, "background", req.Background, "session", session)
	started := api.ExecStarted{PID: pid}
	if session != "" {
		started.Session, started.Buffer = session, s.cfg.ExecBuffer
	}
	s.reply(st, started)
}

// startDetached starts cmd in its own process group with stdio on
// /dev/null (what exec.Cmd gives nil Stdin, Stdout and Stderr). The reaper
// collects it when it exits.
func (s *server) startDetached(cmd *exec.Cmd) (int, <-chan unix.WaitStatus, error) {
	cmd.SysProcAttr.Setpgid = true
	pid, exited, err := s.reaper.start(cmd)
	if err != nil {
		return 0, nil, err
	}
	s.groups.add(pid)
	return pid, exited, nil
}

// startPipes starts cmd in its own process group with stdout and stderr on
// pipes, and stdin on a pipe if req.Stdin (else on /dev/null).
func (s *server) startPipes(cmd *exec.Cmd, req api.ExecRequest) (_ *session, err error) {
	var ours, theirs []*os.File // our ends of the pipes, the command's ends
	defer func() {
		closeAll(theirs)
		if err != nil {
			closeAll(ours)
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err != nil {
			return nil, nil, fmt.Errorf("exec: %w", err)
		}
		return r, w, nil
	}
	sess := &session{}
	if req.Stdin {
		r, w, err := pipe()
		if err != nil {
			return nil, err
		}
		ours, theirs = append(ours, w), append(theirs, r)
		cmd.Stdin, sess.stdin = r, w
	}
	for _, t := range []api.FrameType{api.FrameStdout, api.FrameStderr} {
		r, w, err := pipe()
		if err != nil {
			return nil, err
		}
		ours, theirs = append(ours, r), append(theirs, w)
		sess.out = append(sess.out, &output{f: r, t: t})
		if t == api.FrameStdout {
			cmd.Stdout = w
		} else {
			cmd.Stderr = w
		}
	}
	cmd.SysProcAttr.Setpgid = true
	if sess.pid, sess.exited, err = s.reaper.start(cmd); err != nil {
		return nil, err
	}
	s.groups.add(sess.pid)
	sess.files = ours
	return sess, nil
}

// startTTY starts cmd as the leader of a new session whose controlling
// terminal is a new pty: stdin, stdout and stderr are all on it. Without
// req.Stdin nothing is written to the terminal.
func (s *server) startTTY(cmd *exec.Cmd, req api.ExecRequest) (*session, error) {
	master, slave, err := openPTY(req.Rows, req.Cols)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	defer slave.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	pid, exited, err := s.reaper.start(cmd)
	if err != nil {
		master.Close()
		return nil, err
	}
	s.groups.add(pid)
	sess := &session{
		pid:    pid,
		exited: exited,
		tty:    master,
		out:    []*output{{f: master, t: api.FrameStdout}},
		files:  []*os.File{master},
	}
	if req.Stdin {
		sess.stdin = master
	}
	return sess, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
