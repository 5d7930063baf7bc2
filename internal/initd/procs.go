package initd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// process is a background process: started by an exec with Background,
// it outlives every stream. Its output goes into a ring (the last
// api.MaxProcessOutput bytes), its stdin is a pipe any stream may write
// to, and once it has exited its status is kept with its output until
// that end was read (an attach delivered its Exit frame, or a wait
// returned), then for api.ProcessKeep more.
type process struct {
	pid     int // also its process group id, and its id in the table
	command []string
	started time.Time
	out     *ring
	done    chan struct{} // closed once it has exited and its output is in

	stdinMu sync.Mutex // one write to stdin at a time, so that writes do not interleave
	mu      sync.Mutex
	stdin   *os.File // nil once closed
	gone    bool     // reaped: its group id may be another's
	exit    api.ExitStatus
	exited  time.Time
	read    bool // its end was read: it goes api.ProcessKeep later
	timeout bool // killed at its timeout
}

// info describes p as the API shows it.
func (p *process) info() api.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, end := p.out.bounds()
	pr := api.Process{PID: p.pid, Command: p.command, Started: p.started, State: api.ProcessRunning,
		Background: true, OutputBytes: end, OutputStart: start, StdinOpen: p.stdin != nil}
	if !p.exited.IsZero() {
		exit, at := p.exit, p.exited
		pr.State, pr.Exit, pr.Exited = api.ProcessExited, &exit, &at
	}
	return pr
}

// signal sends sig to p's process group, unless p has exited.
func (p *process) signal(sig unix.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return &opError{api.AgentErrExited, fmt.Sprintf("process %d has exited", p.pid)}
	}
	if err := unix.Kill(-p.pid, sig); err != nil {
		return fmt.Errorf("signal process %d: %w", p.pid, err)
	}
	return nil
}

// writeStdin writes b to p's stdin, waiting at most api.StdinWait for the
// process to read it, and closes stdin after if closeAfter.
func (p *process) writeStdin(b []byte, closeAfter bool) error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	p.mu.Lock()
	f, gone := p.stdin, p.gone
	p.mu.Unlock()
	switch {
	case gone:
		return &opError{api.AgentErrExited, fmt.Sprintf("process %d has exited", p.pid)}
	case f == nil:
		return &opError{api.AgentErrStdinClosed, fmt.Sprintf("the stdin of process %d is closed", p.pid)}
	}
	if len(b) > 0 {
		_ = f.SetWriteDeadline(time.Now().Add(api.StdinWait))
		_, err := f.Write(b)
		_ = f.SetWriteDeadline(time.Time{})
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return &opError{api.AgentErrStdinFull, fmt.Sprintf("process %d did not read its stdin for %v", p.pid, api.StdinWait)}
		case errors.Is(err, unix.EPIPE):
			return &opError{api.AgentErrStdinClosed, fmt.Sprintf("process %d closed its stdin", p.pid)}
		case err != nil:
			return fmt.Errorf("stdin of process %d: %w", p.pid, err)
		}
	}
	if closeAfter {
		p.closeStdin()
	}
	return nil
}

func (p *process) closeStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}

// procTable holds the background processes by pid.
type procTable struct {
	srv *server

	mu      sync.Mutex
	m       map[int]*process
	closing bool
}

func newProcTable(s *server) *procTable {
	return &procTable{srv: s, m: make(map[int]*process)}
}

func (t *procTable) get(pid int) *process {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[pid]
}

// list returns every process, by pid.
func (t *procTable) list() []*process {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := make([]*process, 0, len(t.m))
	for _, p := range t.m {
		all = append(all, p)
	}
	slices.SortFunc(all, func(a, b *process) int { return a.pid - b.pid })
	return all
}

// room makes room for one more process: it refuses when cairn-init is
// stopping or api.MaxProcesses are running.
func (t *procTable) room() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return errors.New("exec: cairn-init is stopping")
	}
	if len(t.m) < api.MaxProcesses {
		return nil
	}
	if oldest := t.oldestExitedLocked(); oldest != nil {
		delete(t.m, oldest.pid)
		return nil
	}
	return &opError{api.AgentErrTooMany, fmt.Sprintf("exec: %d background processes run already", api.MaxProcesses)}
}

// add registers p. A kept process of the same pid (pids are reused only
// after the kernel went through every other) is replaced.
func (t *procTable) add(p *process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[p.pid] = p
}

// exitedNow keeps at most api.MaxExitedProcesses exited processes: those
// that exited first go.
func (t *procTable) exitedNow() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		n := 0
		for _, p := range t.m {
			p.mu.Lock()
			if !p.exited.IsZero() {
				n++
			}
			p.mu.Unlock()
		}
		if n <= api.MaxExitedProcesses {
			return
		}
		oldest := t.oldestExitedLocked()
		t.srv.log.Info("background process dropped: too many exited ones are kept", "pid", oldest.pid)
		delete(t.m, oldest.pid)
	}
}

// oldestExitedLocked returns the exited process that was read, else
// exited, first; nil if none has exited.
func (t *procTable) oldestExitedLocked() *process {
	var oldest *process
	var oldRead bool
	var oldAt time.Time
	for _, p := range t.m {
		p.mu.Lock()
		at, read := p.exited, p.read
		p.mu.Unlock()
		if at.IsZero() {
			continue
		}
		if oldest == nil || (read && !oldRead) || (read == oldRead && at.Before(oldAt)) {
			oldest, oldRead, oldAt = p, read, at
		}
	}
	return oldest
}

// markRead records that p's end was read: it goes api.ProcessKeep later.
func (t *procTable) markRead(p *process) {
	p.mu.Lock()
	first := !p.read
	p.read = true
	p.mu.Unlock()
	if first {
		time.AfterFunc(api.ProcessKeep, func() { t.remove(p) })
	}
}

// remove forgets p, if the table still holds it under its pid.
func (t *procTable) remove(p *process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[p.pid] == p {
		delete(t.m, p.pid)
	}
}

// endAll refuses new processes and hangs the running ones up (SIGHUP,
// SIGKILL hangupGrace later): cairn-init is stopping.
func (t *procTable) endAll() {
	t.mu.Lock()
	t.closing = true
	all := make([]*process, 0, len(t.m))
	for _, p := range t.m {
		all = append(all, p)
	}
	t.mu.Unlock()
	for _, p := range all {
		if p.signal(unix.SIGHUP) == nil {
			time.AfterFunc(hangupGrace, func() { _ = p.signal(unix.SIGKILL) })
		}
	}
}

// startBackground starts cmd as a background process: in its own process
// group, with stdin, stdout and stderr on pipes.
func (s *server) startBackground(cmd *exec.Cmd, req api.ExecRequest, timeout time.Duration) (_ *process, err error) {
	if err := s.procs.room(); err != nil {
		return nil, err
	}
	var ours, theirs []*os.File
	defer func() {
		closeAll(theirs)
		if err != nil {
			closeAll(ours)
		}
	}()
	var fds [3][2]*os.File // stdin, stdout, stderr: read end, write end
	for i := range fds {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
		fds[i] = [2]*os.File{r, w}
		if i == 0 {
			ours, theirs = append(ours, w), append(theirs, r)
		} else {
			ours, theirs = append(ours, r), append(theirs, w)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = fds[0][0], fds[1][1], fds[2][1]
	cmd.SysProcAttr.Setpgid = true
	pid, exited, err := s.reaper.start(cmd)
	if err != nil {
		return nil, err
	}
	s.groups.add(pid)
	p := &process{pid: pid, command: slices.Clone(req.Command), started: time.Now().UTC(),
		out: newRing(api.MaxProcessOutput), done: make(chan struct{}), stdin: fds[0][1]}
	s.procs.add(p)
	outs := []*output{{f: fds[1][0], t: api.FrameStdout}, {f: fds[2][0], t: api.FrameStderr}}
	var pumps sync.WaitGroup
	for _, o := range outs {
		pumps.Go(func() { pumpRing(o, p.out) })
	}
	var deadline *time.Timer
	if timeout > 0 {
		deadline = time.AfterFunc(timeout, func() {
			p.mu.Lock()
			if !p.gone {
				p.timeout = true
			}
			p.mu.Unlock()
			if p.signal(unix.SIGKILL) == nil {
				s.log.Info("background process timed out; killing its process group", "pid", pid, "timeout", timeout)
			}
		})
	}
	go func() {
		ws := <-exited
		if deadline != nil {
			deadline.Stop()
		}
		p.mu.Lock()
		p.gone = true
		timedOut := p.timeout
		p.mu.Unlock()
		// A child it left holding the pipes must not keep the output open.
		for _, o := range outs {
			_ = o.f.SetReadDeadline(time.Now().Add(drainGrace))
		}
		pumps.Wait()
		closeAll([]*os.File{fds[1][0], fds[2][0]})
		status := exitStatus(ws, timedOut)
		p.mu.Lock()
		p.exit, p.exited = status, time.Now().UTC()
		if p.stdin != nil {
			p.stdin.Close()
			p.stdin = nil
		}
		p.mu.Unlock()
		p.out.close()
		close(p.done)
		s.log.Debug("background process exited", "pid", pid, "code", status.Code)
		s.procs.exitedNow()
	}()
	return p, nil
}

// pumpRing copies what the process writes to o into r until it ends.
func pumpRing(o *output, r *ring) {
	buf := make([]byte, 32<<10)
	for {
		n, err := o.f.Read(buf)
		r.write(o.t, buf[:n])
		if err != nil {
			return
		}
	}
}

// exitStatus is the status of a process that exited with ws.
func exitStatus(ws unix.WaitStatus, timedOut bool) api.ExitStatus {
	status := api.ExitStatus{Code: ws.ExitStatus()}
	if ws.Signaled() {
		status = api.ExitStatus{Code: 128 + int(ws.Signal()), Signal: unix.SignalName(ws.Signal())}
	}
	if timedOut {
		status.Code, status.TimedOut = api.ExitTimedOut, true
	}
	return status
}

func exitJSON(status api.ExitStatus) []byte {
	b, _ := json.Marshal(status)
	return b
}
