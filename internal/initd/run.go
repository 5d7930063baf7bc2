package initd

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// DefaultSocketPath is where the host's agent socket is bound in a sandbox.
const DefaultSocketPath = "/.cairn/agent.sock"

// DefaultTermGrace is how long processes get between SIGTERM and SIGKILL
// when cairn-init itself receives SIGTERM.
const DefaultTermGrace = 5 * time.Second

// Config says how Run behaves.
type Config struct {
	SocketPath string        // host socket to dial; default DefaultSocketPath
	Key        agentauth.Key // proves to cairnd that this is the sandbox's agent (cairnd gives it at boot)
	IsInit     bool          // the process is PID 1: may signal every process with kill(-1, …)
	Env        []string      // environment every command starts from (cairn-init passes its own)
	Version    string        // reported by ping
	TermGrace  time.Duration // SIGTERM to SIGKILL on our own SIGTERM; default DefaultTermGrace
	Log        *slog.Logger  // default slog.Default()

	ServicesDir string  // service definitions, read at start; default DefaultServicesDir
	LogDir      string  // service logs, NAME.log; default DefaultLogDir
	Backoff     Backoff // restart delays of services; zero fields take those of DefaultBackoff

	// ExecGrace is how long an attached exec whose stream broke waits to
	// be re-attached before it is hung up; default DefaultExecGrace.
	ExecGrace time.Duration
	// ExecBuffer is how many bytes of its output an attached exec keeps
	// until cairnd acknowledges them; default DefaultExecBuffer.
	ExecBuffer int
	// MemoryLimit is the sandbox's memory limit in bytes, which the OOM
	// killer (oom.go) holds the guest to with MemTotal; 0: MemTotal alone.
	MemoryLimit int64
}

// server is one running cairn-init.
type server struct {
	cfg      Config
	log      *slog.Logger
	bootID   string
	reaper   *reaper
	groups   *groups
	services *services
	sessions *sessionTable      // attached execs
	procs    *procTable         // background processes
	stop     context.CancelFunc // ends Run
	wg       sync.WaitGroup     // stream handlers

	keyMu    sync.Mutex
	key      agentauth.Key // Config.Key, until cairnd re-keys it
	oom      *oomKiller
	exiting  chan struct{} // closed when cairn-init ends (see exit)
	exitOnce sync.Once
	selfExit atomic.Bool  // it ends by itself, not at cairnd's request
	watches  atomic.Int32 // files watch streams open
}

// Run is cairn-init: it reaps, forwards signals and serves cairnd until ctx
// ends, it receives SIGTERM, or cairnd asks it to shut down. The last two
// end every process first. It returns nil unless it could not start.
// Only one Run may be active in a process: its reaper waits for every child.
func Run(ctx context.Context, cfg Config) error {
	if cfg.SocketPath == "" {
		cfg.SocketPath = DefaultSocketPath
	}
	if cfg.TermGrace == 0 {
		cfg.TermGrace = DefaultTermGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ServicesDir == "" {
		cfg.ServicesDir = DefaultServicesDir
	}
	if cfg.LogDir == "" {
		cfg.LogDir = DefaultLogDir
	}
	cfg.ExecGrace = cmp.Or(cfg.ExecGrace, DefaultExecGrace)
	cfg.ExecBuffer = cmp.Or(cfg.ExecBuffer, DefaultExecBuffer)
	def := DefaultBackoff()
	cfg.Backoff.First = cmp.Or(cfg.Backoff.First, def.First)
	cfg.Backoff.Max = cmp.Or(cfg.Backoff.Max, def.Max)
	cfg.Backoff.Reset = cmp.Or(cfg.Backoff.Reset, def.Reset)
	if !cfg.IsInit {
		// Orphaned descendants are then reparented to us, as they would be to PID 1.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("become child subreaper: %w", err)
		}
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id) // never fails on Linux
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	s := &server{
		cfg:      cfg,
		log:      cfg.Log,
		bootID:   hex.EncodeToString(id),
		reaper:   newReaper(cfg.Log),
		groups:   newGroups(),
		sessions: newSessionTable(),
		stop:     stop,
		key:      cfg.Key,
		exiting:  make(chan struct{}),
	}
	s.procs = newProcTable(s)
	s.oom = newOOMKiller(s, cfg.MemoryLimit)
	s.services = newServices(s, loadServices(cfg.ServicesDir, cfg.Log))

	// Before anything can start: Go's default for SIGTERM is to exit.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	stopReaping := make(chan struct{})
	var reaping, loops sync.WaitGroup
	reaping.Go(func() { s.reaper.run(stopReaping) })
	loops.Go(func() { s.forwardSignals(ctx, sigs) })
	s.log.Info("cairn-init started", "version", cfg.Version, "pid", os.Getpid(), "socket", cfg.SocketPath)
	s.services.start()
	loops.Go(func() { s.dialLoop(ctx) })
	loops.Go(func() { s.oom.run(ctx) })

	<-ctx.Done()
	s.exit(false)
	loops.Wait()
	// Nobody can re-attach an exec any more: hang them up now.
	s.sessions.endAll()
	s.procs.endAll()
	// Unless terminate already did, stop the services (those it started).
	s.services.shutdown(cfg.TermGrace)
	// Handlers end once their process exits, so the reaper must outlive them.
	s.wg.Wait()
	close(stopReaping)
	reaping.Wait()
	return nil
}

// killWait bounds how long terminate waits for processes to go after SIGKILL.
const killWait = time.Second

// terminate sends SIGTERM to every process (as PID 1) or to every group we
// started, SIGKILL to what is left after grace, and returns once they are
// gone (and reaped) or killWait later. No service is restarted from then
// on; it also waits (at most killWait more) until their exits are logged.
func (s *server) terminate(grace time.Duration) {
	s.services.stop()
	s.signalAll(unix.SIGTERM)
	s.waitAllGone(grace)
	s.signalAll(unix.SIGKILL)
	s.waitAllGone(killWait)
	s.services.wait(killWait)
}

// signalAll sends sig to every other process when initd is PID 1, else to
// the groups it started.
func (s *server) signalAll(sig unix.Signal) {
	if s.cfg.IsInit {
		_ = unix.Kill(-1, sig)
	} else {
		s.groups.signal(sig)
	}
}

func (s *server) waitAllGone(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for s.anyLeft() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// anyLeft reports whether a process signalAll would reach, or its zombie,
// is still there.
func (s *server) anyLeft() bool {
	if s.cfg.IsInit {
		return unix.Kill(-1, 0) == nil
	}
	return s.groups.signal(0)
}
