package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/cairn-sandbox/cairn/api"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"github.com/cairn-sandbox/cairn/internal/catalog"
	"github.com/cairn-sandbox/cairn/internal/container"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/image"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Runtime runs sandbox containers, in cairn's own terms (package
// container): *runsc.Runsc implements it.
type Runtime interface {
	// Start creates and starts a container; on failure nothing is left.
	Start(ctx context.Context, spec container.Spec) (pid int, err error)
	// Restore starts a container from a memory image instead of booting.
	Restore(ctx context.Context, spec container.Spec, imageDir string) (pid int, err error)
	// Checkpoint writes a container's memory image.
	Checkpoint(ctx context.Context, id, imageDir string, leaveRunning bool) error
	// State returns status and host pid, or an error wrapping
	// container.ErrNotExist.
	State(ctx context.Context, id string) (container.Status, int, error)
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	// InDoubt reports a pause or resume that a crash of cairnd cut short
	// between sending it and recording it: the container is paused or
	// running whatever State says; to is the status it was making.
	InDoubt(id string) (to container.Status, inDoubt bool)
	// Settle records that the container is in fact status (Running or
	// Paused) after InDoubt; State then says so.
	Settle(ctx context.Context, id string, status container.Status) error
	Kill(ctx context.Context, id string, sig syscall.Signal) error
	WaitStopped(ctx context.Context, id string) error
	// KillProcesses kills a container's processes at once and returns a
	// function that waits for them to exit; the container stays until Delete.
	KillProcesses(ctx context.Context, id string) (wait func(context.Context) error, err error)
	// Delete removes a container, running or not; a missing one is no error.
	Delete(ctx context.Context, id string) error
	// List returns the ids of every container.
	List(ctx context.Context) ([]string, error)
	// SettleLaunches waits for the container starts a dead predecessor
	// left running to end (or kills them), so that List then sees every
	// container there will be; it returns how many there were. Called
	// once, at start.
	SettleLaunches(ctx context.Context) (int, error)
	// Watch reports the death of a container's processes at once: one
	// line saying which ended and how, then the channel closes; the end
	// of ctx stops it (closed without a line).
	Watch(ctx context.Context, id string) (<-chan string, error)
}

// Timeouts of lifecycle steps.
const (
	agentStartTimeout = 20 * time.Second // from runsc start until cairn-init answers
	stopGrace         = 5 * time.Second  // SIGTERM to SIGKILL inside the sandbox
	stopTimeout       = 15 * time.Second // whole graceful stop before force
	execReadyTimeout  = 2 * time.Minute  // an exec waits this long for a starting sandbox
	reconnectWait     = 3 * time.Second  // a stop waits this long for cairn-init to dial back
)

// Config is what a Manager needs.
type Config struct {
	DataDir    string // per-sandbox host directories live in DataDir/sandboxes
	InitBinary string // cairn-init on the host (cairn-env beside it); both copied to DataDir/bin
	Store      metadata.Store
	Pool       *volume.Pool
	Images     *image.Catalog
	Runtime    Runtime
	Ops        *operation.Registry
	Now        func() time.Time
	// SandboxAPI returns the handler of a sandbox's management socket
	// (/.cairn/api.sock), scoped to that sandbox id; nil: no socket.
	SandboxAPI func(sandboxID string) http.Handler
	// Disks owns checkpoint disks and memory images; Leases holds the
	// store's leases (one lifecycle change at a time per sandbox).
	Disks  *disks.Disks
	Leases *lease.Manager
	// BrowseDir is the host directory bound read-only at
	// /.cairn/checkpoints of sandbox id (served by the browse view).
	BrowseDir func(id string) string
	// Instances is what runs on this host now (shared with the catalog,
	// which reads it); Catalog finds and shows sandboxes and checkpoints.
	Instances *Instances
	Catalog   *catalog.Catalog
	// Offsite uploads checkpoints to the account's off-site locations and
	// brings them back; nil: off-site copies are off.
	Offsite *offsite.Set
	// DefaultDisk is the disk size of a sandbox created without one, in
	// bytes (at most the pool's size); 0: no size of its own.
	DefaultDisk int64
	// Networks gives containers their networks; nil: networking is off
	// (a sandbox whose mode is egress then fails to start with N01).
	Networks Networks
	// HostID is this host's id: at start, Recover undoes the journalled
	// operations that the earlier instances on this host left unfinished
	// (see journal.go); "" undoes none.
	HostID string
	// Mine says whether a sandbox row naming a host is this host's (nil:
	// every one is): recovery and the lifetime and idle loops look only at
	// this host's sandboxes; a new sandbox's row names HostID.
	Mine func(hostID string) bool
	// Down says whether the host with that id is down (nil: none is):
	// only a sandbox of a host that is down is taken over (takeover.go).
	// HostName is the name of the host with that id, for messages.
	Down     func(hostID string) bool
	HostName func(hostID string) string
	// HostDownAfter is how old a host's heartbeat is when it counts as
	// down (hosts.DownAfter; 0: 10 s): a take-over moves a row only while
	// its host's heartbeat is that old, checked in the move itself.
	HostDownAfter time.Duration
	// Observer is told how checkpoints and restores went; nil: nobody.
	Observer Observer
	// Reads records in which order a sandbox reads its files after it
	// boots (access.go), for ReadsWindow after each boot (0: the
	// default); nil: nothing is recorded.
	Reads       *accessorder.Watcher
	ReadsWindow time.Duration
	// Activity publishes an entry of a sandbox's event stream that no
	// change of its row makes (a lazy restore's fill); nil: none.
	Activity func(api.SandboxActivity)
	// LazyFillRate bounds the background fill of a lazy restore, in
	// bytes per second; 0: as fast as it goes.
	LazyFillRate int64
}

// mineOnly keeps the sandboxes of sbs that run on this host (cfg.Mine).
func mineOnly(cfg Config, sbs []metadata.Sandbox) []metadata.Sandbox {
	if cfg.Mine == nil {
		return sbs
	}
	out := sbs[:0:0]
	for _, sb := range sbs {
		if cfg.Mine(sb.HostID) {
			out = append(out, sb)
		}
	}
	return out
}

// Manager owns every sandbox of this host.
type Manager struct {
	cfg Config
	ex  *exclusion // sandbox leases
	run *runner    // containers
	// insideRate counts the checkpoints asked for from inside sandboxes.
	insideRate insideRate

	mu       sync.Mutex
	restarts map[string][]time.Time // by sandbox id: its restarts after crashes (see crash.go)

	lifeWake chan struct{} // a deadline changed (lifetime.go)
	lifeBusy sync.Map      // sandbox id → its timeout's action runs (lifetime.go)

	settingsMu sync.Mutex // one writer of sandboxes' settings at a time (updateSettings)
	act        activity   // when each sandbox was last used (idle.go)
}

// NewManager returns a manager. Call Recover before serving requests.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Observer == nil {
		cfg.Observer = noObserver{}
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "sandboxes"), 0o700); err != nil {
		return nil, err
	}
	binDir := filepath.Join(cfg.DataDir, "bin")
	if err := installBinary(cfg.InitBinary, binDir, "cairn-init"); err != nil {
		return nil, err
	}
	if err := installBinary(filepath.Join(filepath.Dir(cfg.InitBinary), "cairn-env"), binDir, "cairn-env"); err != nil {
		return nil, err
	}
	if cfg.Networks != nil && cfg.Runtime != nil {
		cfg.Runtime = networkedRuntime{Runtime: cfg.Runtime, nets: cfg.Networks}
	}
	ex := &exclusion{cfg: cfg}
	m := &Manager{cfg: cfg, ex: ex, run: &runner{cfg: cfg, ex: ex}, restarts: map[string][]time.Time{}, lifeWake: make(chan struct{}, 1)}
	m.run.died = m.sandboxDied
	m.run.started = func(sb metadata.Sandbox) {
		m.rearm(context.Background(), sb)
	}
	m.run.booting = m.recordReads
	m.run.oomKilled = m.recordOOMKill
	return m, nil
}

// installBinary copies an in-sandbox binary (cairn-init, cairn-env) into
// binDir atomically, so that sandboxes bind a stable copy whatever happens
// to the build directory.
func installBinary(src, binDir, name string) error {
	if src == "" {
		return fmt.Errorf("no %s binary configured", name)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("%s: %w (build it with `make build`; it must sit next to cairn-init)", name, err)
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(binDir, "."+name+".new")
	if err := os.WriteFile(tmp, data, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(binDir, name))
}

// lookup returns the sandbox called name in account.
func (m *Manager) lookup(ctx context.Context, account, name string) (metadata.Account, metadata.Sandbox, error) {
	return catalog.Lookup(ctx, m.cfg.Store, account, name)
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hostCPUs is the number of cores a sandbox may be given at most.
func hostCPUs() int { return runtime.NumCPU() }

// Close releases the agent sockets without touching running sandboxes: a
// restarted cairnd adopts them again.
func (m *Manager) Close() {
	m.run.stopFills()
	m.cfg.Instances.closeAll()
	// Containers being removed: Recover would sweep them at the next
	// start, but they go quickly.
	m.run.retirements.Wait()
}

func logErr(msg string, err error, args ...any) {
	if err != nil {
		slog.Warn(msg, append(args, "err", err)...)
	}
}
