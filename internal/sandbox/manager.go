package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/sandbox/runsc"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Runtime runs sandbox containers. *runsc.Runsc implements it.
type Runtime interface {
	// Start creates and starts a container; on failure nothing is left.
	Start(ctx context.Context, spec runsc.Spec) (pid int, err error)
	// Restore starts a container from a memory image instead of booting.
	Restore(ctx context.Context, spec runsc.Spec, imageDir string) (pid int, err error)
	// Checkpoint writes a container's memory image.
	Checkpoint(ctx context.Context, id, imageDir string, leaveRunning bool) error
	// State returns status and host pid, or an error wrapping runsc.ErrNotExist.
	State(ctx context.Context, id string) (runsc.Status, int, error)
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Kill(ctx context.Context, id string, sig syscall.Signal) error
	WaitStopped(ctx context.Context, id string) error
	// KillProcesses kills a container's processes at once and returns a
	// function that waits for them to exit; the container stays until Delete.
	KillProcesses(ctx context.Context, id string) (wait func(context.Context) error, err error)
	// Delete removes a container, running or not; a missing one is no error.
	Delete(ctx context.Context, id string) error
	// List returns the ids of every container.
	List(ctx context.Context) ([]string, error)
}

var _ Runtime = (*runsc.Runsc)(nil)

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
	// Offsite uploads checkpoints to the account's off-site locations and
	// brings them back; nil: off-site copies are off.
	Offsite *offsite.Service
}

// Manager owns every sandbox of this host.
type Manager struct {
	cfg Config

	mu   sync.Mutex
	live map[string]*instance // by sandbox id: sandboxes whose agent socket is open
	// autoSkipped says, per sandbox id, why its last automatic checkpoint
	// was skipped (disk limit…); shown by status.
	autoSkipped map[string]string
	changed     chan struct{} // closed and replaced when live changes or a sandbox lease is released
	// retirements waits for the containers being removed in the
	// background (see retireContainer).
	retirements sync.WaitGroup
}

// instance is a sandbox whose container cairnd runs or has adopted.
type instance struct {
	agent     *agent.Host
	api       *http.Server // the management socket, /.cairn/api.sock
	pid       int          // host pid of the runsc sandbox process
	container string       // runsc container name (see container.go)
}

// NewManager returns a manager. Call Recover before serving requests.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
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
	return &Manager{
		cfg:         cfg,
		live:        map[string]*instance{},
		autoSkipped: map[string]string{},
		changed:     make(chan struct{}),
	}, nil
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

func (m *Manager) sandboxDir(id string) string {
	return filepath.Join(m.cfg.DataDir, "sandboxes", id)
}

func (m *Manager) agentSocket(id string) string {
	return filepath.Join(m.sandboxDir(id), "dotcairn", "agent.sock")
}

// notify wakes everyone waiting for a change of live or of a sandbox's
// lease.
func (m *Manager) notify() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notifyLocked()
}

// notifyLocked is notify with m.mu held.
func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// lookup returns the sandbox called name in account.
func (m *Manager) lookup(ctx context.Context, account, name string) (metadata.Account, metadata.Sandbox, error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return acct, metadata.Sandbox{}, fmt.Errorf("account %s: %w", account, err)
	}
	sb, err := m.cfg.Store.SandboxByName(ctx, acct.ID, name)
	if errors.Is(err, metadata.ErrNotFound) {
		return acct, sb, errdefs.New(api.CodeNoSandbox, "no sandbox named %q", name)
	}
	return acct, sb, err
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// view turns a stored sandbox into its API form, with its live state.
func (m *Manager) view(ctx context.Context, acct metadata.Account, sb metadata.Sandbox) api.Sandbox {
	out := api.Sandbox{
		ID: sb.ID, Name: sb.Name, Account: acct.Name, Image: sb.Image, State: string(sb.State),
		CPUs: sb.CPUs, MemoryBytes: sb.MemoryBytes, CreatedAt: sb.CreatedAt,
	}
	if sb.ParentID != "" {
		if p, err := m.cfg.Store.SandboxByID(ctx, sb.ParentID); err == nil {
			out.Parent = p.Name
		} else {
			out.Parent = sb.ParentID
		}
	}
	out.AutoCheckpointSeconds = int64(sb.AutoCheckpoint / time.Second)
	if last, err := m.cfg.Store.LatestCheckpoint(ctx, sb.ID); err == nil {
		out.LastCheckpointAt = &last.CreatedAt
	}
	out.LastOffsiteAt, out.OffsiteOff = m.lastOffsite(ctx, sb)
	out.CurrentCheckpoint = m.checkpointRef(ctx, sb, sb.CurrentCheckpoint)
	out.SavedSession = m.checkpointRef(ctx, sb, sb.ResumeCheckpoint)
	out.SourceCheckpoint = m.checkpointRef(ctx, metadata.Sandbox{}, sb.SourceCheckpoint)
	if st, ok := m.busyState(ctx, sb.ID); ok {
		out.State = st
	}
	m.mu.Lock()
	inst := m.live[sb.ID]
	out.AutoCheckpointNote = m.autoSkipped[sb.ID]
	m.mu.Unlock()
	if inst != nil {
		out.AgentConnected = inst.agent.Connected()
		out.Pid = inst.pid
		out.Container = inst.container
	}
	return out
}

// checkpointRef names checkpoint id for a user: its per-sandbox id when it
// is one of sb's, else SANDBOX/ID; the raw id if it is gone.
func (m *Manager) checkpointRef(ctx context.Context, sb metadata.Sandbox, id string) string {
	if id == "" {
		return ""
	}
	ck, err := m.cfg.Store.CheckpointByID(ctx, id)
	if err != nil {
		return id
	}
	if ck.SandboxID == sb.ID {
		return ck.Seq
	}
	return ck.SandboxName + "/" + ck.Seq
}

// Info returns the sandbox called name with its disk usage.
func (m *Manager) Info(ctx context.Context, account, name string) (api.Sandbox, error) {
	acct, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return api.Sandbox{}, err
	}
	out := m.view(ctx, acct, sb)
	if out.Disk, err = m.diskUsage(ctx, sb); err != nil {
		return out, err
	}
	return out, nil
}

// Get returns the sandbox called name.
func (m *Manager) Get(ctx context.Context, account, name string) (api.Sandbox, error) {
	acct, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return api.Sandbox{}, err
	}
	return m.view(ctx, acct, sb), nil
}

// List returns the account's sandboxes by name; parent, if set, keeps only
// those forked from the sandbox of that name.
func (m *Manager) List(ctx context.Context, account, parent string) ([]api.Sandbox, error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	var f metadata.SandboxFilter
	if parent != "" {
		_, p, err := m.lookup(ctx, account, parent)
		if err != nil {
			return nil, err
		}
		f.ParentID = p.ID
	}
	rows, err := m.cfg.Store.ListSandboxes(ctx, acct.ID, f)
	if err != nil {
		return nil, err
	}
	out := make([]api.Sandbox, 0, len(rows))
	for _, sb := range rows {
		out = append(out, m.view(ctx, acct, sb))
	}
	return out, nil
}

// hostCPUs is the number of cores a sandbox may be given at most.
func hostCPUs() int { return runtime.NumCPU() }

// Close releases the agent sockets without touching running sandboxes: a
// restarted cairnd adopts them again.
func (m *Manager) Close() {
	m.mu.Lock()
	for id, inst := range m.live {
		inst.close()
		delete(m.live, id)
	}
	m.mu.Unlock()
	// Containers being removed: Recover would sweep them at the next
	// start, but they go quickly.
	m.retirements.Wait()
}

func logErr(msg string, err error, args ...any) {
	if err != nil {
		slog.Warn(msg, append(args, "err", err)...)
	}
}

// Whoami returns the account and current name of sandbox id, for the
// management socket, which knows its sandbox by id only.
func (m *Manager) Whoami(ctx context.Context, id string) (account, name string, err error) {
	sb, err := m.cfg.Store.SandboxByID(ctx, id)
	if errors.Is(err, metadata.ErrNotFound) {
		return "", "", errdefs.New(api.CodeNoSandbox, "this sandbox no longer exists")
	} else if err != nil {
		return "", "", err
	}
	accts, err := m.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return "", "", err
	}
	for _, a := range accts {
		if a.ID == sb.AccountID {
			return a.Name, sb.Name, nil
		}
	}
	return "", "", fmt.Errorf("sandbox %s: account %d not found", sb.Name, sb.AccountID)
}
