package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/checkpoint"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// checkpointOpts describes a checkpoint to take.
type checkpointOpts struct {
	Trigger string
	Comment string
	Label   string
	Name    string // snapshot name; "" for none
	Memory  bool   // save processes and memory too (the sandbox must run)
	// StopAfter ends the sandbox once saved (a saved session).
	StopAfter bool
	// FromInside marks a checkpoint asked for from inside the sandbox.
	FromInside bool
}

// CreateCheckpoint starts an operation that checkpoints the sandbox called
// name. Concurrent checkpoints of one sandbox queue behind each other, and
// behind a lifecycle operation that runs on it.
func (m *Manager) CreateCheckpoint(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
	return m.createCheckpoint(ctx, account, name, req, false)
}

// createCheckpoint is CreateCheckpoint; fromInside marks the checkpoint as
// asked for from inside the sandbox, and prunes the oldest such ones
// beyond the sandbox's policy once it is taken.
func (m *Manager) createCheckpoint(ctx context.Context, account, name string, req api.CreateCheckpointRequest, fromInside bool) (*operation.Op, error) {
	acct, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if req.Name != "" {
		if err := validateSnapshotName(req.Name); err != nil {
			return nil, err
		}
		if _, err := m.cfg.Store.CheckpointByName(ctx, acct.ID, req.Name); err == nil {
			return nil, errdefs.New(api.CodeSnapshotNameTaken, "a snapshot named %q already exists", req.Name)
		}
	}
	opts := checkpointOpts{Trigger: api.TriggerManual, Comment: req.Comment, Label: req.Label, Name: req.Name, Memory: req.Memory, FromInside: fromInside}
	return m.cfg.Ops.Start("checkpoint.create", "sandbox/"+name, func(ctx context.Context, op *operation.Op) (any, error) {
		op.Step(api.PhaseCheckpoint, "Creating checkpoint of %s…", name)
		out, err := m.takeQueued(ctx, sb, opts, op)
		if err != nil {
			return nil, err
		}
		if fromInside {
			m.pruneInside(ctx, sb.ID, op) // without the lease, which deleting takes
		}
		op.Step(api.PhaseDone, "Checkpoint %s created", out.ID)
		return out, nil
	}), nil
}

// takeQueued takes a checkpoint of sb under its lease, once the operations
// queued before it are done, and returns it as the API shows it.
func (m *Manager) takeQueued(ctx context.Context, sb metadata.Sandbox, opts checkpointOpts, op *operation.Op) (api.Checkpoint, error) {
	l, err := m.ex.queue(ctx, sb, purposeCheckpoint)
	if err != nil {
		return api.Checkpoint{}, err
	}
	defer m.ex.release(l)
	// Re-read: a lifecycle operation may have run while we queued.
	cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID)
	if err != nil {
		if errors.Is(err, metadata.ErrNotFound) {
			return api.Checkpoint{}, errdefs.New(api.CodeNoSandbox, "sandbox %s was deleted", sb.Name)
		}
		return api.Checkpoint{}, err
	}
	ck, res, err := m.checkpoint(ctx, cur, opts, op)
	if err != nil {
		return api.Checkpoint{}, err
	}
	// Sizes are left out of this answer: measuring them commits the
	// pool, which would slow every checkpoint down. `checkpoint info`
	// has them.
	out := m.cfg.Catalog.CheckpointView(cur, ck)
	out.PausedMS = float64(res.Paused.Microseconds()) / 1000
	return out, nil
}

// checkpoint takes a checkpoint of sb (through the disks component) and
// refreshes what the sandbox browses. The caller holds sb's lease.
func (m *Manager) checkpoint(ctx context.Context, sb metadata.Sandbox, opts checkpointOpts, op *operation.Op) (metadata.Checkpoint, checkpoint.Result, error) {
	// A lazy root is snapshotted once whole (fill-first): the sandbox
	// runs on meanwhile. An interval checkpoint does not wait for that.
	if opts.Trigger == api.TriggerInterval && FillOf(m.cfg.DataDir, sb.ID) != nil {
		return metadata.Checkpoint{}, checkpoint.Result{}, errdefs.New(api.CodeSandboxBusy, "the sandbox's disk is still being fetched from off-site (lazy restore); the checkpoint waits for the next interval")
	}
	if err := m.waitFilled(ctx, sb, op); err != nil {
		return metadata.Checkpoint{}, checkpoint.Result{}, err
	}
	inst := m.cfg.Instances.get(sb.ID)
	req := disks.TakeRequest{
		Sandbox: sb, Running: inst != nil,
		Trigger: opts.Trigger, Comment: opts.Comment, Label: opts.Label, Name: opts.Name,
		Memory: opts.Memory, StopAfter: opts.StopAfter, FromInside: opts.FromInside,
		Progress: func(phase, msg string) { op.Step(phase, "%s", msg) },
	}
	if inst != nil {
		req.Agent, req.Container = inst.agent, inst.container
		network := inst.network
		req.SaveAgentKeys = func(dir string) error {
			if err := inst.agent.SaveKeys(dir); err != nil {
				return err
			}
			return saveImageNetwork(dir, network)
		}
	}
	start := m.cfg.Now()
	ck, res, err := m.cfg.Disks.Take(ctx, req)
	m.observeCheckpoint(opts, req.Running, m.cfg.Now().Sub(start), res.Paused, err)
	if err != nil {
		return ck, res, err
	}
	m.cfg.Disks.PublishSoon(sb) // off the checkpoint's path
	m.offsiteChanged()
	return ck, res, nil
}

// autoCheckpoint takes an automatic checkpoint with trigger as part of a
// lifecycle operation. Past the disk limit it is skipped, noted for
// `cairn status` and reported on op; other failures are reported too. The
// caller holds sb's lease.
func (m *Manager) autoCheckpoint(ctx context.Context, sb metadata.Sandbox, trigger string, op *operation.Op) error {
	ck, _, err := m.checkpoint(ctx, sb, checkpointOpts{Trigger: trigger}, op)
	m.noteAuto(sb.ID, trigger, err)
	if err != nil {
		op.Notef(api.PhaseCheckpoint, "Automatic checkpoint (%s) skipped: %v", trigger, err)
		slog.Warn("automatic checkpoint skipped", "sandbox", sb.Name, "trigger", trigger, "err", err)
		return err
	}
	op.Step(api.PhaseCheckpoint, "Automatic checkpoint %s taken (%s)", ck.Seq, trigger)
	return nil
}

// noteAuto remembers why the last automatic checkpoint of a sandbox was
// skipped, for `cairn status`; a success clears it.
func (m *Manager) noteAuto(id, trigger string, err error) {
	if err == nil {
		m.cfg.Instances.note(id, "")
		return
	}
	m.cfg.Instances.note(id, fmt.Sprintf("%s checkpoint skipped at %s: error %s: %v", trigger, m.cfg.Now().UTC().Format(time.RFC3339), errdefs.CodeOf(err), err))
}

// validateSnapshotName checks a snapshot name (same rules as sandbox names).
func validateSnapshotName(name string) error {
	if err := ValidateName(name); err != nil {
		return errdefs.New(api.CodeInvalidName, "invalid snapshot name %q: use 1-63 lower-case letters, digits and dashes, starting with a letter or digit", name)
	}
	return nil
}
