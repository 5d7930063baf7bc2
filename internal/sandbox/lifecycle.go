package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/revert"
)

// Create validates req and starts an operation that makes the sandbox and
// starts it. Until its row is committed at the end, the sandbox does not
// exist; on failure every step is undone.
func (m *Manager) Create(ctx context.Context, account string, req api.CreateSandboxRequest) (*operation.Op, error) {
	if err := ValidateName(req.Name); err != nil {
		return nil, err
	}
	if req.Image == "" {
		req.Image = "busybox"
	}
	if !m.cfg.Images.Known(req.Image) {
		return nil, errdefs.New(api.CodeNoImage, "no image named %q (see `cairn image list`)", req.Image)
	}
	memory, err := parseLimits(req.CPUs, req.Memory, hostCPUs(), hostMemory())
	if err != nil {
		return nil, err
	}
	every, err := parseInterval(req.AutoCheckpoint)
	if err != nil {
		return nil, err
	}
	disk, err := parseDisk(req.Disk, m.cfg.DefaultDisk, m.cfg.Disks.PoolSize())
	if err != nil {
		return nil, err
	}
	inside, err := applyInsideChange(metadata.DefaultInsidePolicy, req.Inside)
	if err != nil {
		return nil, err
	}
	restart, err := parseRestart(req.Restart)
	if err != nil {
		return nil, err
	}
	net, err := applyNetworkChange(metadata.NetworkSettings{Mode: metadata.NetworkEgress}, req.Network)
	if err != nil {
		return nil, err
	}
	settings, err := newSettings(req)
	if err != nil {
		return nil, err
	}
	acct, release, err := m.ex.reserveName(ctx, account, req.Name)
	if err != nil {
		return nil, err
	}
	if err := m.cfg.Disks.CheckLimit(ctx, acct.ID); err != nil {
		release()
		return nil, err
	}
	sb := metadata.Sandbox{
		ID: newID(), AccountID: acct.ID, Name: req.Name, Image: req.Image,
		State: metadata.SandboxStopped, CPUs: req.CPUs, MemoryBytes: memory, AutoCheckpoint: every,
		Inside: inside, DiskBytes: disk, Restart: restart, Network: net, Settings: settings,
	}
	return m.cfg.Ops.Start("sandbox.create", "sandbox/"+req.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		defer release()
		return m.journalled(ctx, op, acct, "", []metadata.Sandbox{sb}, func() (any, error) {
			op.Step(api.PhaseImage, "Preparing image %s", sb.Image)
			imgPath, err := m.cfg.Images.EnsureWithProgress(ctx, sb.Image, op.Record)
			if err != nil {
				return nil, err
			}
			makeRoot := func(root string) error { return m.cfg.Pool.Snapshot(ctx, imgPath, root, false) }
			if err := m.create(ctx, op, sb, makeRoot, nil); err != nil {
				return nil, err
			}
			out, err := m.cfg.Catalog.Get(ctx, account, sb.Name)
			if err != nil {
				m.destroy(context.WithoutCancel(ctx), sb)
			}
			return out, err
		})
	}), nil
}

// create makes sandbox sb with a root made by makeRoot (a snapshot of an
// image, or a checkpoint materialized), starts it (resuming the processes
// of the memory image memory returns, if any) and commits its row. On
// failure every step is undone.
func (m *Manager) create(ctx context.Context, op *operation.Op, sb metadata.Sandbox, makeRoot func(root string) error, memory func() (string, error)) error {
	undo := revert.New()
	defer undo.Fail()

	root := m.cfg.Pool.SandboxPath(sb.ID)
	if err := makeRoot(root); err != nil {
		return err
	}
	undo.Add(func() { logErr("undo: delete root", m.cfg.Pool.Delete(context.Background(), root)) })
	if err := os.MkdirAll(filepath.Join(m.run.sandboxDir(sb.ID), "dotcairn"), 0o755); err != nil {
		return err
	}
	undo.Add(func() { os.RemoveAll(m.run.sandboxDir(sb.ID)) })
	undo.Add(func() { logErr("undo: remove browse view", m.cfg.Disks.Unpublish(sb.ID)) })
	memImage := ""
	if memory != nil {
		var err error
		if memImage, err = memory(); err != nil {
			return err
		}
	}

	op.Step(api.PhaseStart, "Starting sandbox %s", sb.Name)
	if err := m.run.startContainer(ctx, sb, memImage); err != nil {
		return err
	}
	undo.Add(func() { m.run.stopContainer(context.Background(), sb) })
	if memImage != "" {
		m.run.rename(ctx, sb)
	}
	sb.State = metadata.SandboxRunning
	sb.Settings = armed(sb.Settings, m.cfg.Now()) // its timeout runs from its start
	sb.HostID = m.cfg.HostID                      // its root is in this host's pool
	if err := m.cfg.Store.CreateSandbox(ctx, sb); err != nil {
		if errors.Is(err, metadata.ErrConflict) {
			return errdefs.Wrap(api.CodeNameTaken, err, "a sandbox named %q already exists", sb.Name)
		}
		return err
	}
	if err := m.copyPorts(ctx, sb); err != nil {
		logErr("undo: delete the new row", m.cfg.Store.DeleteSandbox(context.WithoutCancel(ctx), sb.ID))
		return err
	}
	undo.Success()
	m.wakeLifetimes()
	op.Step(api.PhaseStart, "Sandbox %s running", sb.Name)
	slog.Info("sandbox created", "name", sb.Name, "id", sb.ID, "image", sb.Image, "from_checkpoint", sb.SourceCheckpoint)
	return nil
}

// Start starts a stopped sandbox.
func (m *Manager) Start(ctx context.Context, account, name string) (*operation.Op, error) {
	sb, l, err := m.ex.acquire(ctx, account, name, api.StateStarting)
	if err != nil {
		return nil, err
	}
	if sb.State == metadata.SandboxRunning {
		m.ex.release(l)
		return nil, errdefs.New(api.CodeAlreadyRunning, "sandbox %s is already running", name)
	}
	m.forgetRestarts(sb.ID) // a user's start: the count of restarts after crashes begins again
	return m.lifecycleOp("sandbox.start", sb, l, func(ctx context.Context, op *operation.Op) (any, error) {
		mem := ""
		if sb.ResumeCheckpoint != "" {
			op.Step(api.PhaseResume, "Resuming sandbox %s from its saved session", name)
			dir, release, err := m.savedSession(ctx, op, sb)
			if err != nil {
				return nil, err
			}
			defer release()
			mem = dir
		} else {
			op.Step(api.PhaseStart, "Starting sandbox %s", name)
		}
		if err := m.run.startContainer(ctx, sb, mem); err != nil {
			return nil, err
		}
		if err := m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning); err != nil {
			m.run.stopContainer(context.WithoutCancel(ctx), sb)
			return nil, err
		}
		// The session is resumed: the next stop decides the next start.
		logErr("clear saved session", m.cfg.Store.SetResumeCheckpoint(ctx, sb.ID, ""), "sandbox", name)
		return m.cfg.Catalog.Get(ctx, account, name)
	}), nil
}

// Stop stops a running sandbox: its processes get SIGTERM, then SIGKILL,
// and an automatic checkpoint (trigger stop) of its disk is taken. With
// req.Snapshot the session is saved instead: memory and disk are
// checkpointed and the processes frozen, and the next start resumes them.
func (m *Manager) Stop(ctx context.Context, account, name string, req api.StopRequest) (*operation.Op, error) {
	sb, l, err := m.ex.acquire(ctx, account, name, api.StateStopping)
	if err != nil {
		return nil, err
	}
	if sb.State == metadata.SandboxCrashed && !req.Snapshot {
		// Nothing runs any more: it only becomes stopped, with the stop
		// checkpoint of its disk.
		m.forgetRestarts(sb.ID)
		return m.lifecycleOp("sandbox.stop", sb, l, func(ctx context.Context, op *operation.Op) (any, error) {
			op.Step(api.PhaseStop, "Sandbox %s had crashed; marking it stopped", name)
			if err := m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxStopped); err != nil {
				return nil, err
			}
			sb.State = metadata.SandboxStopped
			m.autoCheckpoint(ctx, sb, api.TriggerStop, op)
			return m.cfg.Catalog.Get(ctx, account, name)
		}), nil
	}
	if sb.State != metadata.SandboxRunning {
		m.ex.release(l)
		return nil, errdefs.New(api.CodeNotRunning, "sandbox %s is not running", name)
	}
	return m.lifecycleOp("sandbox.stop", sb, l, func(ctx context.Context, op *operation.Op) (any, error) {
		if req.Snapshot {
			op.Step(api.PhaseCheckpoint, "Saving the session of %s", name)
			ck, _, err := m.checkpoint(ctx, sb, checkpointOpts{Trigger: api.TriggerStop, Memory: true, StopAfter: true, Comment: "saved session"}, op)
			if err != nil {
				return nil, err // the sandbox runs on, unchanged
			}
			if err := m.cfg.Store.SetResumeCheckpoint(ctx, sb.ID, ck.ID); err != nil {
				return nil, err
			}
			// Its processes ended once their memory was saved: only the
			// container is left (runsc still calls it paused, so a
			// graceful stop would wait for nothing).
			if err := m.run.removeContainer(ctx, sb); err != nil {
				return nil, err
			}
		} else {
			op.Step(api.PhaseStop, "Stopping sandbox %s", name)
			if err := m.run.stopContainer(ctx, sb); err != nil {
				return nil, err
			}
		}
		if err := m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxStopped); err != nil {
			return nil, err
		}
		if !req.Snapshot {
			sb.State = metadata.SandboxStopped
			m.autoCheckpoint(ctx, sb, api.TriggerStop, op)
		}
		return m.cfg.Catalog.Get(ctx, account, name)
	}), nil
}

// Restart stops a running sandbox (or not, if it is stopped) and starts it.
func (m *Manager) Restart(ctx context.Context, account, name string) (*operation.Op, error) {
	sb, l, err := m.ex.acquire(ctx, account, name, api.StateStarting)
	if err != nil {
		return nil, err
	}
	return m.lifecycleOp("sandbox.restart", sb, l, func(ctx context.Context, op *operation.Op) (any, error) {
		m.autoCheckpoint(ctx, sb, api.TriggerRestart, op)
		if sb.State == metadata.SandboxRunning {
			op.Step(api.PhaseStop, "Stopping sandbox %s", name)
			if err := m.run.stopContainer(ctx, sb); err != nil {
				return nil, err
			}
			if err := m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxStopped); err != nil {
				return nil, err
			}
		}
		m.forgetRestarts(sb.ID)
		op.Step(api.PhaseStart, "Starting sandbox %s", name)
		logErr("clear saved session", m.cfg.Store.SetResumeCheckpoint(ctx, sb.ID, ""), "sandbox", name)
		if err := m.run.startContainer(ctx, sb, ""); err != nil {
			return nil, err
		}
		if err := m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning); err != nil {
			m.run.stopContainer(context.WithoutCancel(ctx), sb)
			return nil, err
		}
		return m.cfg.Catalog.Get(ctx, account, name)
	}), nil
}

// Delete stops the sandbox if it runs and removes it with its files.
func (m *Manager) Delete(ctx context.Context, account, name string) (*operation.Op, error) {
	return m.delete(ctx, account, name, true)
}

// delete is Delete; final: with the final checkpoint (an account being
// deleted has its sandboxes deleted without).
func (m *Manager) delete(ctx context.Context, account, name string, final bool) (*operation.Op, error) {
	sb, l, err := m.ex.acquire(ctx, account, name, api.StateDeleting)
	if err != nil {
		return nil, err
	}
	return m.lifecycleOp(kindDelete, sb, l, func(ctx context.Context, op *operation.Op) (any, error) {
		// Journalled: a start after a crash finishes it once the row is
		// gone, or leaves the sandbox as it was (journal_inplace.go).
		err := m.journalledInPlace(ctx, op, sb, inPlaceDetail{Name: name}, func(notes *inPlaceNotes) error {
			// The final checkpoint: the sandbox stays restorable from it
			// (and from its other automatic checkpoints) for 14 days.
			if final {
				if err := m.autoCheckpoint(ctx, sb, api.TriggerDelete, op); err != nil && !errdefs.Is(err, api.CodeDiskLimit) {
					return fmt.Errorf("final checkpoint before delete (nothing was deleted): %w", err)
				}
			}
			if sb.State == metadata.SandboxRunning {
				if err := notes.stopping(ctx, ""); err != nil {
					return err
				}
				op.Step(api.PhaseStop, "Stopping sandbox %s", name)
				if err := m.run.stopContainer(ctx, sb); err != nil {
					return err
				}
			}
			// The row goes first: once it is gone the sandbox does not
			// exist, and files left by a crash after this point are swept
			// at the next start.
			if err := m.cfg.Store.DeleteSandbox(ctx, sb.ID); err != nil {
				return err
			}
			op.Step(api.PhaseDelete, "Removing files of sandbox %s", name)
			return m.removeFiles(ctx, sb.ID)
		})
		if err != nil {
			return nil, err
		}
		m.forgetRestarts(sb.ID)
		slog.Info("sandbox deleted", "name", name, "id", sb.ID)
		return map[string]string{"deleted": name}, nil
	}), nil
}

func (m *Manager) removeFiles(ctx context.Context, id string) error {
	m.forgetActivity(id)
	if err := m.run.dropLazy(id); err != nil {
		return err
	}
	if err := m.cfg.Pool.Delete(ctx, m.cfg.Pool.SandboxPath(id)); err != nil {
		return err
	}
	if err := m.cfg.Disks.Unpublish(id); err != nil {
		return err
	}
	return os.RemoveAll(m.run.sandboxDir(id))
}

// busyPoll is how often an exec waiting for a busy sandbox looks again
// when nothing in this process woke it.
const busyPoll = 100 * time.Millisecond

// savedSession returns the memory image a stopped sandbox resumes from,
// lent until release: that of its saved session's checkpoint here, or,
// when the local copy is gone and the checkpoint is off-site, its image
// fetched from there (the sandbox's own disk is the one the session was
// saved with).
func (m *Manager) savedSession(ctx context.Context, op *operation.Op, sb metadata.Sandbox) (dir string, release func(), err error) {
	ck, err := m.cfg.Store.CheckpointByID(ctx, sb.ResumeCheckpoint)
	if err != nil {
		return "", nil, fmt.Errorf("saved session of %s: %w", sb.Name, err)
	}
	held, err := m.cfg.Disks.Open(ctx, ck, disks.PurposeRestore)
	if err == nil {
		if dir, err = held.MemoryImage(); err == nil {
			return dir, held.Release, nil
		}
		held.Release()
	}
	if ck.OffsiteManifest == "" || m.remote(ck.AccountID) == nil {
		return "", nil, err
	}
	op.Notef(api.PhaseResume, "The saved session's memory image is not on this host (%v): fetching it from off-site", err)
	return m.fetchMemory(ctx, op, ck)
}
