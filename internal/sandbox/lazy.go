package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/container"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lazy"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// A lazy root (docs/lazy-restore.md): a sandbox restored lazily from
// off-site runs on a lazyfs mount over its root subvolume until every
// chunk is in. Its state directory is DataDir/lazy/<sandbox id>; while it
// exists, the sandbox starts on the mount; at a stop or start after the
// fill completed it is removed, and the root is a plain subvolume again.

// fills runs the fills of lazy roots, one per sandbox.
type fills struct {
	mu      sync.Mutex
	running map[string]context.CancelFunc // by sandbox id
	inUse   map[string]bool               // a container runs (or starts) on the mount
	begin   map[string]chan struct{}      // closed once the sandbox has started: the background fill goes
	wg      sync.WaitGroup
}

func (f *fills) init() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == nil {
		f.running, f.inUse, f.begin = map[string]context.CancelFunc{}, map[string]bool{}, map[string]chan struct{}{}
	}
}

// lazyDir is sandbox id's lazy state directory.
func (r *runner) lazyDir(id string) string { return lazyStateDir(r.cfg.DataDir, id) }

func lazyStateDir(dataDir, id string) string { return filepath.Join(dataDir, "lazy", id) }

// selfBinary is cairnd's own executable, run as `cairnd lazyfs`.
func selfBinary() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("lazy restore: cairnd's own binary: %w", err)
	}
	return p, nil
}

// rootOf returns what runsc is given as sandbox sb's root: the subvolume,
// or while its lazy fill runs, the lazyfs mount over it (started if it
// does not run; the fill is started too).
func (r *runner) rootOf(ctx context.Context, sb metadata.Sandbox) (string, error) {
	plain := r.cfg.Pool.SandboxPath(sb.ID)
	dir := r.lazyDir(sb.ID)
	if !r.hasLazyRoot(sb) {
		return plain, nil
	}
	r.fills.init()
	r.fills.mu.Lock()
	defer r.fills.mu.Unlock()
	if done, total, err := lazy.Progress(dir); err == nil && done == total {
		if err := r.finishLazyLocked(sb.ID); err == nil {
			return plain, nil
		}
	}
	bin, err := selfBinary()
	if err != nil {
		return "", err
	}
	if err := lazy.Start(ctx, bin, dir, plain); err != nil {
		return "", errdefs.Wrap(api.CodeRuntimeFailed, err, "start the lazy root of sandbox %s", sb.Name)
	}
	r.fills.inUse[sb.ID] = true
	if r.fills.running[sb.ID] == nil && r.fills.begin[sb.ID] == nil {
		r.fills.begin[sb.ID] = make(chan struct{})
	}
	r.ensureFillLocked(sb)
	return lazy.Mountpoint(dir), nil
}

// hasLazyRoot reports whether sandbox sb's root is lazy: its state is
// there and is the state of the tree at its root. A state laid out for
// another tree (a restore in place that did not swap it in before a
// crash) is stale and removed; the root it names was swept with the
// pool's work area.
func (r *runner) hasLazyRoot(sb metadata.Sandbox) bool {
	dir := r.lazyDir(sb.ID)
	if !lazy.HasState(dir) {
		return false
	}
	plan, err := lazy.ReadPlan(dir)
	if err != nil || plan.Subvolume == 0 {
		return true // ensureFill says what is wrong with it
	}
	root, err := r.cfg.Pool.SubvolumeID(r.cfg.Pool.SandboxPath(sb.ID))
	if err != nil || root == plan.Subvolume {
		return true
	}
	slog.Warn("lazy restore: removing a lazy state laid out for a tree that is not the sandbox's root", "sandbox", sb.Name, "plan_subvolume", plan.Subvolume, "root", root)
	logErr("remove stale lazy state", r.dropLazy(sb.ID), "sandbox", sb.Name) // its fill too
	return lazy.HasState(dir)
}

// lazyStarted lets the background fill of sandbox id go, now that its
// container has started (or failed to).
func (r *runner) lazyStarted(id string) {
	r.fills.init()
	r.fills.mu.Lock()
	defer r.fills.mu.Unlock()
	if ch := r.fills.begin[id]; ch != nil {
		close(ch)
		delete(r.fills.begin, id)
	}
}

// lazyStopped is told that sandbox id's container is gone: a complete
// fill's mount goes, and the root is plain again.
func (r *runner) lazyStopped(id string) {
	if !lazy.HasState(r.lazyDir(id)) {
		return
	}
	r.lazyStarted(id)
	r.fills.init()
	r.fills.mu.Lock()
	defer r.fills.mu.Unlock()
	delete(r.fills.inUse, id)
	if done, total, err := lazy.Progress(r.lazyDir(id)); err == nil && done == total {
		logErr("lazy restore: end the finished lazy root", r.finishLazyLocked(id), "sandbox", id)
	}
}

// finishLazyLocked ends the lazyfs server of a sandbox whose container
// does not run and removes its state; r.fills.mu is held.
func (r *runner) finishLazyLocked(id string) error {
	if cancel := r.fills.running[id]; cancel != nil {
		cancel()
		delete(r.fills.running, id)
	}
	if err := lazy.Remove(r.lazyDir(id)); err != nil {
		return err
	}
	slog.Info("lazy restore: the root is a plain subvolume again", "sandbox", id)
	return nil
}

// dropLazy ends sandbox id's fill and lazyfs and removes its state: for
// a sandbox being deleted (its container stopped).
func (r *runner) dropLazy(id string) error {
	if _, err := os.Stat(r.lazyDir(id)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	r.fills.init()
	r.fills.mu.Lock()
	defer r.fills.mu.Unlock()
	delete(r.fills.inUse, id)
	return r.finishLazyLocked(id)
}

// ensureFill starts the fill of sandbox sb's lazy root if it has one and
// none runs: at start-up (recovery) and at each start.
func (r *runner) ensureFill(sb metadata.Sandbox) {
	if !lazy.HasState(r.lazyDir(sb.ID)) {
		return
	}
	r.fills.init()
	r.fills.mu.Lock()
	defer r.fills.mu.Unlock()
	r.ensureFillLocked(sb)
}

func (r *runner) ensureFillLocked(sb metadata.Sandbox) {
	if r.fills.running[sb.ID] != nil {
		return
	}
	dir := r.lazyDir(sb.ID)
	plan, err := lazy.ReadPlan(dir)
	if err != nil {
		slog.Error("lazy restore: unreadable state", "sandbox", sb.Name, "err", err)
		return
	}
	if r.cfg.Offsite == nil {
		slog.Error("lazy restore: off-site copies are off; the fill cannot go on", "sandbox", sb.Name)
		return
	}
	svc := r.cfg.Offsite.For(plan.AccountID)
	if svc == nil {
		slog.Error("lazy restore: the account's off-site copies are gone; the fill cannot go on", "sandbox", sb.Name)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.fills.running[sb.ID] = cancel
	f := &lazy.Filler{Dir: dir, Source: svc, Log: slog.Default(), RateLimit: r.cfg.LazyFillRate, Begin: r.fills.begin[sb.ID],
		Notify: func(n lazy.Note) { r.fillNote(sb, n) }}
	r.fills.wg.Go(func() {
		err := f.Run(ctx)
		r.fills.mu.Lock()
		defer r.fills.mu.Unlock()
		if r.fills.running[sb.ID] != nil && ctx.Err() == nil {
			delete(r.fills.running, sb.ID)
			cancel()
		}
		if err != nil {
			if ctx.Err() == nil {
				slog.Error("lazy restore: the fill stopped", "sandbox", sb.Name, "err", err)
			}
			return
		}
		if !r.fills.inUse[sb.ID] {
			logErr("lazy restore: end the finished lazy root", r.finishLazyLocked(sb.ID), "sandbox", sb.Name)
		}
	})
}

// fillNote publishes what a fill reports on the sandbox's event stream.
func (r *runner) fillNote(sb metadata.Sandbox, n lazy.Note) {
	what := ""
	switch n.Kind {
	case lazy.NoteProgress:
		what = fmt.Sprintf("filled %s of %s", lazy.FormatBytes(n.Done), lazy.FormatBytes(n.Total))
	case lazy.NoteUnavailable:
		what = fmt.Sprintf("the checkpoint's data cannot be fetched now (%v): reads of data not yet here fail with EIO; the fill retries (filled %s of %s)",
			n.Err, lazy.FormatBytes(n.Done), lazy.FormatBytes(n.Total))
		slog.Warn("lazy restore: data unavailable", "sandbox", sb.Name, "err", n.Err)
	case lazy.NoteAvailable:
		what = fmt.Sprintf("the checkpoint's data can be fetched again (filled %s of %s)", lazy.FormatBytes(n.Done), lazy.FormatBytes(n.Total))
	case lazy.NotePrefetched:
		what = fmt.Sprintf("the %d files it read first at its last boot are in (filled %s of %s)", n.Files, lazy.FormatBytes(n.Done), lazy.FormatBytes(n.Total))
	case lazy.NoteComplete:
		what = fmt.Sprintf("complete: %s filled", lazy.FormatBytes(n.Total))
		slog.Info("lazy restore: fill complete", "sandbox", sb.Name, "bytes", n.Total)
	}
	if r.cfg.Activity != nil {
		r.cfg.Activity(api.SandboxActivity{Sandbox: sb.ID, Type: api.ActivityFill, What: what,
			Fill: &api.Fill{Done: n.Done, Total: n.Total, Unavailable: n.Kind == lazy.NoteUnavailable}})
	}
}

// FillOf returns the progress of the lazy fill of sandbox id (cairnd's
// data directory dataDir); nil when its root is not lazy.
func FillOf(dataDir, id string) *api.Fill {
	dir := lazyStateDir(dataDir, id)
	if !lazy.HasState(dir) {
		return nil
	}
	done, total, err := lazy.Progress(dir)
	if err != nil {
		return nil
	}
	return &api.Fill{Done: done, Total: total}
}

// waitFilled waits until sandbox sb's lazy fill, if any, is complete: a
// checkpoint's snapshot must hold every byte. The sandbox keeps running
// meanwhile; op is told how far the fill is.
func (m *Manager) waitFilled(ctx context.Context, sb metadata.Sandbox, op *operation.Op) error {
	dir := m.run.lazyDir(sb.ID)
	if !lazy.HasState(dir) {
		return nil
	}
	m.run.ensureFill(sb)
	told := time.Time{}
	for {
		done, total, err := lazy.Progress(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil // finished and removed meanwhile
		}
		if err != nil {
			return err
		}
		if done == total {
			return nil
		}
		if op != nil && time.Since(told) >= 5*time.Second {
			told = time.Now()
			op.Report(api.Progress{Phase: api.PhaseFetch, Done: done, Total: total, Unit: api.UnitBytes},
				"Waiting for the lazy restore to fill: %s of %s", lazy.FormatBytes(done), lazy.FormatBytes(total))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lazyRemote is the account's off-site service as a lazy restore needs
// it; nil when off-site copies are off.
func (m *Manager) lazyRemote(accountID int64) disks.LazyRemote {
	if m.cfg.Offsite == nil {
		return nil
	}
	svc := m.cfg.Offsite.For(accountID)
	if svc == nil || !svc.Enabled() {
		return nil
	}
	return svc
}

// stopFills stops every fill (cairnd is ending; they go on at its next
// start, from what is durably in).
func (r *runner) stopFills() {
	r.fills.init()
	r.fills.mu.Lock()
	for id, cancel := range r.fills.running {
		cancel()
		delete(r.fills.running, id)
	}
	r.fills.mu.Unlock()
	r.fills.wg.Wait()
}

// lazyRootLost checks, at start-up, a sandbox whose root is lazy: if its
// container runs but its lazyfs server is gone, the container's root is
// dead, which is an error (the container goes and the sandbox starts
// again, over a new server, from what is durably in).
func (r *runner) lazyRootLost(ctx context.Context, sb metadata.Sandbox, name string) error {
	dir := r.lazyDir(sb.ID)
	if !lazy.HasState(dir) || lazy.Live(dir) {
		return nil
	}
	if st, _, err := r.cfg.Runtime.State(ctx, name); err != nil || st != container.Running && st != container.Paused {
		return nil
	}
	return fmt.Errorf("the lazyfs server of its root is gone")
}

// resumeLazy goes on, at start-up, with the fill of sandbox sb's lazy
// root: its lazyfs server is started again if it is gone (no container
// runs on it then) and the fill is started.
func (r *runner) resumeLazy(ctx context.Context, sb metadata.Sandbox) {
	dir := r.lazyDir(sb.ID)
	if !r.hasLazyRoot(sb) {
		return
	}
	r.fills.init()
	r.fills.mu.Lock()
	defer r.fills.mu.Unlock()
	if r.isLive(sb.ID) {
		r.fills.inUse[sb.ID] = true
	}
	if !lazy.Live(dir) {
		if r.isLive(sb.ID) {
			return // lazyRootLost made it restart; its start serves it
		}
		bin, err := selfBinary()
		if err == nil {
			err = lazy.Start(ctx, bin, dir, r.cfg.Pool.SandboxPath(sb.ID))
		}
		if err != nil {
			slog.Error("lazy restore: cannot start the lazy root's server; the fill waits for the sandbox's next start", "sandbox", sb.Name, "err", err)
			return
		}
	}
	r.ensureFillLocked(sb)
}

// sweepLazy removes the lazy state of sandboxes that are gone (before
// their roots are removed).
func (r *runner) sweepLazy(known map[string]bool) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.DataDir, "lazy"))
	if err != nil {
		return
	}
	for _, e := range entries {
		if !known[e.Name()] {
			slog.Info("recover: removing the lazy state of a gone sandbox", "sandbox", e.Name())
			logErr("recover: remove lazy state", lazy.Remove(r.lazyDir(e.Name())), "sandbox", e.Name())
		}
	}
}
