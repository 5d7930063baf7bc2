package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
}

// CreateCheckpoint starts an operation that checkpoints the sandbox called
// name. Concurrent checkpoints of one sandbox queue behind each other, and
// behind a lifecycle operation that runs on it.
func (m *Manager) CreateCheckpoint(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
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
	return m.cfg.Ops.Start("checkpoint.create", "sandbox/"+name, func(ctx context.Context, op *operation.Op) (any, error) {
		op.Step(api.PhaseCheckpoint, "Creating checkpoint of %s…", name)
		l, err := m.queue(ctx, sb, purposeCheckpoint)
		if err != nil {
			return nil, err
		}
		defer m.release(l)
		// Re-read: a lifecycle operation may have run while we queued.
		cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID)
		if err != nil {
			if errors.Is(err, metadata.ErrNotFound) {
				return nil, errdefs.New(api.CodeNoSandbox, "sandbox %s was deleted", name)
			}
			return nil, err
		}
		ck, res, err := m.checkpoint(ctx, cur, checkpointOpts{Trigger: api.TriggerManual, Comment: req.Comment, Label: req.Label, Name: req.Name, Memory: req.Memory}, op)
		if err != nil {
			return nil, err
		}
		op.Step(api.PhaseDone, "Checkpoint %s created", ck.Seq)
		// Sizes are left out of this answer: measuring them commits the
		// pool, which would slow every checkpoint down. `checkpoint info`
		// has them.
		out := m.checkpointView(cur, ck, nil)
		out.PausedMS = float64(res.Paused.Microseconds()) / 1000
		return out, nil
	}), nil
}

// checkpoint takes a checkpoint of sb (through the disks component) and
// refreshes what the sandbox browses. The caller holds sb's lease.
func (m *Manager) checkpoint(ctx context.Context, sb metadata.Sandbox, opts checkpointOpts, op *operation.Op) (metadata.Checkpoint, checkpoint.Result, error) {
	m.mu.Lock()
	inst := m.live[sb.ID]
	m.mu.Unlock()
	req := disks.TakeRequest{
		Sandbox: sb, Running: inst != nil,
		Trigger: opts.Trigger, Comment: opts.Comment, Label: opts.Label, Name: opts.Name,
		Memory: opts.Memory, StopAfter: opts.StopAfter,
		Progress: func(phase, msg string) { op.Step(phase, "%s", msg) },
	}
	if inst != nil {
		req.Agent, req.Container = inst.agent, inst.container
	}
	ck, res, err := m.cfg.Disks.Take(ctx, req)
	if err != nil {
		return ck, res, err
	}
	m.publish(ctx, sb)
	m.offsiteChanged()
	return ck, res, nil
}

// publish brings what sandbox sb browses under /.cairn/checkpoints up to
// date. A failure is logged: the view is a convenience, and the next
// change or start publishes it whole again.
func (m *Manager) publish(ctx context.Context, sb metadata.Sandbox) {
	logErr("refresh /.cairn/checkpoints", m.cfg.Disks.Publish(context.WithoutCancel(ctx), sb), "sandbox", sb.Name)
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.autoSkipped, id)
		return
	}
	m.autoSkipped[id] = fmt.Sprintf("%s checkpoint skipped at %s: error %s: %v", trigger, m.cfg.Now().UTC().Format(time.RFC3339), errdefs.CodeOf(err), err)
}

// validateSnapshotName checks a snapshot name (same rules as sandbox names).
func validateSnapshotName(name string) error {
	if err := ValidateName(name); err != nil {
		return errdefs.New(api.CodeInvalidName, "invalid snapshot name %q: use 1-63 lower-case letters, digits and dashes, starting with a letter or digit", name)
	}
	return nil
}

// findCheckpoint returns sandbox sb's checkpoint with the per-sandbox id
// (v3, auto-…) or the account-wide id ref.
func (m *Manager) findCheckpoint(ctx context.Context, sb metadata.Sandbox, ref string) (metadata.Checkpoint, error) {
	ck, err := m.cfg.Store.CheckpointBySeq(ctx, sb.ID, ref)
	if errors.Is(err, metadata.ErrNotFound) {
		ck, err = m.cfg.Store.CheckpointByID(ctx, ref)
		if err == nil && ck.SandboxID != sb.ID {
			err = metadata.ErrNotFound
		}
	}
	if errors.Is(err, metadata.ErrNotFound) {
		return ck, errdefs.New(api.CodeNoCheckpoint, "sandbox %s has no checkpoint %q (see `cairn checkpoint list %s`)", sb.Name, ref, sb.Name)
	}
	return ck, err
}

// resolveSnapshot finds a checkpoint named account-wide: its global id, its
// snapshot name, or SANDBOX/ID.
func (m *Manager) resolveSnapshot(ctx context.Context, acct metadata.Account, ref string) (metadata.Checkpoint, error) {
	notFound := errdefs.New(api.CodeNoCheckpoint, "no checkpoint or snapshot %q in your account", ref)
	if sbName, seq, ok := strings.Cut(ref, "/"); ok {
		sb, err := m.cfg.Store.SandboxByName(ctx, acct.ID, sbName)
		if errors.Is(err, metadata.ErrNotFound) {
			return metadata.Checkpoint{}, notFound
		} else if err != nil {
			return metadata.Checkpoint{}, err
		}
		ck, err := m.cfg.Store.CheckpointBySeq(ctx, sb.ID, seq)
		if errors.Is(err, metadata.ErrNotFound) {
			return ck, notFound
		}
		return ck, err
	}
	ck, err := m.cfg.Store.CheckpointByName(ctx, acct.ID, ref)
	if errors.Is(err, metadata.ErrNotFound) {
		ck, err = m.cfg.Store.CheckpointByID(ctx, ref)
		if err == nil && ck.AccountID != acct.ID {
			err = metadata.ErrNotFound
		}
	}
	if errors.Is(err, metadata.ErrNotFound) {
		return ck, notFound
	}
	return ck, err
}

// checkpointView turns a stored checkpoint into its API form; usage may be
// nil (sizes then stay zero).
func (m *Manager) checkpointView(sb metadata.Sandbox, ck metadata.Checkpoint, usage *disks.Usage) api.Checkpoint {
	out := api.Checkpoint{
		ID: ck.Seq, GlobalID: ck.ID, Sandbox: ck.SandboxName, Name: ck.Name, Trigger: ck.Trigger,
		Consistency: ck.Consistency, Comment: ck.Comment, Label: ck.Label, HasMemory: ck.HasMemory,
		Image: ck.Image, CreatedAt: ck.CreatedAt, Current: sb.CurrentCheckpoint == ck.ID,
	}
	out.Offsite, out.OffsiteDetail = m.offsiteStatus(ck)
	if usage != nil {
		out.SizeExclusive, out.SizeTotal = usage.Checkpoint(ck)
	}
	return out
}

// Checkpoints lists the checkpoints of the sandbox called name, oldest
// first; automatic ones only with includeAuto.
func (m *Manager) Checkpoints(ctx context.Context, account, name string, includeAuto bool) ([]api.Checkpoint, error) {
	acct, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	rows, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: includeAuto})
	if err != nil {
		return nil, err
	}
	usage, err := m.cfg.Disks.Usage(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Checkpoint, 0, len(rows))
	for _, ck := range rows {
		out = append(out, m.checkpointView(sb, ck, &usage))
	}
	return out, nil
}

// Checkpoint returns one checkpoint of the sandbox called name.
func (m *Manager) Checkpoint(ctx context.Context, account, name, ref string) (api.Checkpoint, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return api.Checkpoint{}, err
	}
	ck, err := m.findCheckpoint(ctx, sb, ref)
	if err != nil {
		return api.Checkpoint{}, err
	}
	usage, err := m.cfg.Disks.Usage(ctx)
	if err != nil {
		return api.Checkpoint{}, err
	}
	return m.checkpointView(sb, ck, &usage), nil
}

// DeleteCheckpoint deletes a checkpoint of the sandbox called name and
// frees its space before returning. A sandbox's current checkpoint cannot
// be deleted.
func (m *Manager) DeleteCheckpoint(ctx context.Context, account, name, ref string) error {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return err
	}
	ck, err := m.findCheckpoint(ctx, sb, ref)
	if err != nil {
		return err
	}
	return m.deleteCheckpoint(ctx, ck)
}

// deleteCheckpoint deletes ck, queued behind whatever holds its sandbox
// (if the sandbox still exists), and refreshes what the sandbox browses.
func (m *Manager) deleteCheckpoint(ctx context.Context, ck metadata.Checkpoint) error {
	sb, err := m.cfg.Store.SandboxByID(ctx, ck.SandboxID)
	if err != nil && !errors.Is(err, metadata.ErrNotFound) {
		return err
	}
	if sb.ID != "" {
		l, err := m.queue(ctx, sb, purposeCheckpoint)
		if err != nil {
			return err
		}
		defer m.release(l)
	}
	if err := m.cfg.Disks.Delete(ctx, ck); err != nil {
		return err
	}
	m.offsiteChanged() // its manifest goes from the locations too
	if sb.ID != "" {
		m.publish(ctx, sb) // the next newest checkpoint (if any) becomes browsable
	}
	return nil
}

// Diff lists what differs between checkpoint from and checkpoint to of the
// sandbox called name, or its current disk when to is "".
func (m *Manager) Diff(ctx context.Context, account, name, from, to string) ([]api.DiffEntry, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if from == "" {
		return nil, errdefs.New(api.CodeInvalidArgument, "diff needs a checkpoint to compare from")
	}
	a, err := m.findCheckpoint(ctx, sb, from)
	if err != nil {
		return nil, err
	}
	ha, err := m.cfg.Disks.Open(ctx, a, disks.PurposeDiff)
	if err != nil {
		return nil, errdefs.Wrap(api.CodeLocalGone, err, "diff from %s", a.Seq)
	}
	defer ha.Release()
	fromPath, toPath := ha.Disk, m.cfg.Pool.SandboxPath(sb.ID)
	if to != "" {
		b, err := m.findCheckpoint(ctx, sb, to)
		if err != nil {
			return nil, err
		}
		hb, err := m.cfg.Disks.Open(ctx, b, disks.PurposeDiff)
		if err != nil {
			return nil, errdefs.Wrap(api.CodeLocalGone, err, "diff to %s", b.Seq)
		}
		defer hb.Release()
		toPath = hb.Disk
	} else {
		// The root stays in place meanwhile: a restore waits.
		l, err := m.queue(ctx, sb, purposeDiff)
		if err != nil {
			return nil, err
		}
		defer m.release(l)
	}
	changes, err := checkpoint.Diff(ctx, fromPath, toPath)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	out := make([]api.DiffEntry, 0, len(changes))
	for _, c := range changes {
		out = append(out, api.DiffEntry{Path: c.Path, Kind: c.Kind, What: c.What, Mode: c.Mode})
	}
	return out, nil
}

// diskUsage returns what a sandbox's root and its checkpoints alone hold.
func (m *Manager) diskUsage(ctx context.Context, sb metadata.Sandbox) (*api.DiskUsage, error) {
	usage, err := m.cfg.Disks.Usage(ctx)
	if err != nil {
		return nil, err
	}
	cks, err := m.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if err != nil {
		return nil, err
	}
	du := &api.DiskUsage{Sandbox: usage.Root(sb.ID), CheckpointCount: len(cks)}
	for _, ck := range cks {
		excl, _ := usage.Checkpoint(ck)
		du.Checkpoints += excl
	}
	return du, nil
}
