package initd

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// Backoff is how long a service waits before it is restarted: First after
// its first exit, twice as long after each further one, at most Max; and
// First again after a run of at least Reset.
type Backoff struct {
	First, Max, Reset time.Duration
}

// DefaultBackoff is the Backoff of services unless Config sets another.
func DefaultBackoff() Backoff {
	return Backoff{First: time.Second, Max: 30 * time.Second, Reset: time.Minute}
}

// errStopping is why a service is not started while cairn-init stops.
var errStopping = errors.New("cairn-init is stopping")

// services runs the services defined at boot: each in its own process
// group, a child of cairn-init, with its output appended to its log, and
// restarted per its policy until cairn-init stops.
type services struct {
	log     *slog.Logger
	env     []string // what every command starts from (Config.Env)
	logDir  string
	backoff Backoff
	reaper  *reaper
	groups  *groups

	mu       sync.Mutex
	stopping bool          // no process is started once it is set
	stopped  chan struct{} // closed when stopping is set
	list     []*service    // sorted by name

	wg sync.WaitGroup // supervisors
}

// service is one service and, guarded by services.mu, its state.
type service struct {
	def api.ServiceDefinition

	state    string
	pid      int
	restarts int
	exitCode *int
	since    time.Time
	err      string // why the last start failed
}

func newServices(s *server, defs []api.ServiceDefinition) *services {
	m := &services{
		log:     s.log,
		env:     s.cfg.Env,
		logDir:  s.cfg.LogDir,
		backoff: s.cfg.Backoff,
		reaper:  s.reaper,
		groups:  s.groups,
		stopped: make(chan struct{}),
	}
	for _, def := range defs {
		m.list = append(m.list, &service{def: def, state: api.ServiceBackoff, since: time.Now()})
	}
	slices.SortFunc(m.list, func(a, b *service) int { return strings.Compare(a.def.Name, b.def.Name) })
	return m
}

// start starts every service and the goroutines that restart them. It
// returns once each has been started once (or failed to).
func (m *services) start() {
	if len(m.list) == 0 {
		return
	}
	if err := os.MkdirAll(m.logDir, 0o755); err != nil {
		m.log.Warn("cannot create the log directory of services", "err", err)
	}
	for _, sv := range m.list {
		p, err := m.launch(sv)
		m.wg.Go(func() { m.supervise(sv, p, err) })
	}
}

// supervise waits for each run of sv to end and starts it again per its
// policy, until it is not to be restarted or cairn-init stops. p and err
// are what the first launch gave.
func (m *services) supervise(sv *service, p *proc, err error) {
	delay := m.backoff.First
	for {
		if errors.Is(err, errStopping) {
			m.stoppedWaiting(sv)
			return
		}
		var code *int
		var ran time.Duration
		if err == nil {
			code, ran = m.await(sv, p)
		}
		wait, again := m.ended(sv, code, ran, &delay)
		if !again {
			return
		}
		m.note(sv, "restarting in %s", wait)
		select {
		case <-m.stopped:
			m.stoppedWaiting(sv)
			return
		case <-time.After(wait):
		}
		m.mu.Lock()
		sv.restarts++
		m.mu.Unlock()
		p, err = m.launch(sv)
	}
}

// ended records that sv's run ended after ran with code (nil: it could not
// start) and decides whether it is restarted and after how long. delay is
// the supervisor's current backoff.
func (m *services) ended(sv *service, code *int, ran time.Duration, delay *time.Duration) (wait time.Duration, again bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sv.pid = 0
	sv.since = time.Now()
	sv.exitCode = code
	failed := code == nil || *code != 0
	switch {
	case m.stopping:
		sv.state = api.ServiceExited
		return 0, false
	case sv.def.Restart == api.ServiceRestartAlways,
		sv.def.Restart == api.ServiceRestartOnFailure && failed:
	case failed:
		sv.state = api.ServiceFailed
		return 0, false
	default:
		sv.state = api.ServiceExited
		return 0, false
	}
	sv.state = api.ServiceBackoff
	if ran >= m.backoff.Reset {
		*delay = m.backoff.First
	}
	wait = *delay
	*delay = min(2**delay, m.backoff.Max)
	return wait, true
}

// stoppedWaiting records that sv, which does not run, will not be started
// again because cairn-init stops.
func (m *services) stoppedWaiting(sv *service) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sv.state = api.ServiceExited
	sv.since = time.Now()
}

// proc is one run of a service.
type proc struct {
	pid     int
	exited  <-chan unix.WaitStatus // from the reaper
	out     *os.File               // our end of its stdout and stderr
	log     io.WriteCloser         // its log, or a discarding one
	pumped  chan struct{}          // closed when all of out went to log
	started time.Time
}

// launch starts a run of sv, in its own process group, with its stdout and
// stderr on a pipe that a goroutine copies to its log after the line that
// says it started. If it cannot, it writes why to the log.
func (m *services) launch(sv *service) (_ *proc, err error) {
	log := m.openLog(sv.def.Name)
	defer func() {
		if err != nil {
			if !errors.Is(err, errStopping) {
				m.log.Warn("service cannot start", "service", sv.def.Name, "err", err)
				logLine(log, "cannot start: %v", err)
			}
			log.Close()
		}
	}()
	cmd, err := command(m.env, withSandboxDefaults(m.env, execRequest(sv.def)))
	if err != nil {
		return nil, m.failed(sv, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, m.failed(sv, err)
	}
	defer w.Close()
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr.Setpgid = true

	m.mu.Lock()
	if m.stopping {
		m.mu.Unlock()
		r.Close()
		return nil, errStopping
	}
	pid, exited, err := m.reaper.start(cmd)
	now := time.Now()
	if err == nil {
		m.groups.add(pid)
		sv.state, sv.pid, sv.since, sv.err = api.ServiceRunning, pid, now, ""
	}
	m.mu.Unlock()
	if err != nil {
		r.Close()
		return nil, m.failed(sv, err)
	}
	m.log.Info("service started", "service", sv.def.Name, "pid", pid)
	// Before any of its output: the pipe holds that until the pump runs.
	logLine(log, "started pid %d at %s", pid, now.UTC().Format(time.RFC3339))
	p := &proc{pid: pid, exited: exited, out: r, log: log, pumped: make(chan struct{}), started: now}
	go func() {
		defer close(p.pumped)
		copyOut(log, r)
	}()
	return p, nil
}

// failed records why sv could not start and returns err.
func (m *services) failed(sv *service, err error) error {
	m.mu.Lock()
	sv.err = err.Error()
	m.mu.Unlock()
	return err
}

// await waits for p, a run of sv, to exit, lets its output reach the log
// for at most drainGrace more (a process it left behind may hold the pipe
// open), and writes the line that says it exited. It returns the exit code
// and how long it ran.
func (m *services) await(sv *service, p *proc) (*int, time.Duration) {
	ws := <-p.exited
	ran := time.Since(p.started)
	select {
	case <-p.pumped:
	case <-time.After(drainGrace):
		_ = p.out.SetReadDeadline(time.Now())
		<-p.pumped
	}
	code := ws.ExitStatus()
	sig := ""
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
		sig = " (" + unix.SignalName(ws.Signal()) + ")"
	}
	m.log.Info("service exited", "service", sv.def.Name, "pid", p.pid, "code", code)
	logLine(p.log, "exited with code %d%s", code, sig)
	p.out.Close()
	p.log.Close()
	return &code, ran
}

// note writes a line of cairn-init's about sv to its log.
func (m *services) note(sv *service, format string, args ...any) {
	log := m.openLog(sv.def.Name)
	defer log.Close()
	logLine(log, format, args...)
}

// openLog opens the log of service name for appending, creating it. If it
// cannot, output is discarded.
func (m *services) openLog(name string) io.WriteCloser {
	path := filepath.Join(m.logDir, name+".log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		m.log.Warn("cannot open service log; output is discarded", "service", name, "err", err)
		return nopCloser{io.Discard}
	}
	return f
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// logLine writes one line of cairn-init's own to a service log.
func logLine(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, "--- cairn: "+format+"\n", args...)
}

// copyOut copies r to w until r ends or fails. A failed write drops that
// output but goes on reading, so the service never blocks on a full pipe.
func copyOut(w io.Writer, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// stop makes sure no service is started or restarted any more. It does not
// signal them: terminate reaches them as it reaches every process.
func (m *services) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.stopping {
		m.stopping = true
		close(m.stopped)
	}
}

// wait waits at most timeout for every supervisor to end, which each does
// once it will not restart its service and has logged its exit. It reports
// whether they all did.
func (m *services) wait(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// shutdown stops the services: SIGTERM to the group of each that runs,
// SIGKILL to those left after grace. It returns once they have exited, or
// killWait after the SIGKILL.
func (m *services) shutdown(grace time.Duration) {
	m.stop()
	m.signal(unix.SIGTERM)
	if !m.wait(grace) {
		m.signal(unix.SIGKILL)
		m.wait(killWait)
	}
}

// signal sends sig to the process group of every running service.
func (m *services) signal(sig unix.Signal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sv := range m.list {
		if sv.pid != 0 {
			_ = unix.Kill(-sv.pid, sig)
		}
	}
}

// status reports every service, sorted by name.
func (m *services) status() []api.ServiceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]api.ServiceStatus, 0, len(m.list))
	for _, sv := range m.list {
		st := api.ServiceStatus{
			Name:     sv.def.Name,
			State:    sv.state,
			PID:      sv.pid,
			Restarts: sv.restarts,
			Since:    sv.since,
			Restart:  sv.def.Restart,
			Cmd:      sv.def.Cmd,
			Error:    sv.err,
		}
		if sv.exitCode != nil {
			code := *sv.exitCode
			st.ExitCode = &code
		}
		out = append(out, st)
	}
	return out
}
