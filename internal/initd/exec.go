package initd

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
)

// serveExec serves an exec stream: it starts req's command, replies with its pid
// or the reason it could not start and, unless the command is detached,
// runs its session on st until it exits.
func (s *server) serveExec(st *yamux.Stream, req api.ExecRequest) {
	cmd, err := command(s.cfg.Env, req)
	if err != nil {
		s.replyError(st, err)
		return
	}
	if req.Detach {
		pid, err := s.startDetached(cmd)
		s.replyStarted(st, req, pid, err)
		return
	}
	start := s.startPipes
	if req.TTY {
		start = s.startTTY
	}
	sess, err := start(cmd, req)
	if err != nil {
		s.replyStarted(st, req, 0, err)
		return
	}
	s.replyStarted(st, req, sess.pid, nil)
	sess.run(st)
}

// replyStarted answers an exec request with the pid of its process or the
// reason it did not start.
func (s *server) replyStarted(st *yamux.Stream, req api.ExecRequest, pid int, err error) {
	if err != nil {
		s.log.Debug("exec failed", "command", req.Command[0], "err", err)
		s.replyError(st, err)
		return
	}
	s.log.Debug("exec", "command", req.Command[0], "pid", pid, "detach", req.Detach)
	s.reply(st, api.ExecStarted{PID: pid})
}

// startDetached starts cmd in its own process group with stdio on
// /dev/null (what exec.Cmd gives nil Stdin, Stdout and Stderr). The reaper
// collects it when it exits.
func (s *server) startDetached(cmd *exec.Cmd) (int, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pid, _, err := s.reaper.start(cmd)
	if err != nil {
		return 0, err
	}
	s.groups.add(pid)
	return pid, nil
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
	sess := &session{log: s.log}
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
		sess.out = append(sess.out, output{r, t})
		if t == api.FrameStdout {
			cmd.Stdout = w
		} else {
			cmd.Stderr = w
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	pid, exited, err := s.reaper.start(cmd)
	if err != nil {
		master.Close()
		return nil, err
	}
	s.groups.add(pid)
	sess := &session{
		log:    s.log,
		pid:    pid,
		exited: exited,
		tty:    master,
		out:    []output{{master, api.FrameStdout}},
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
