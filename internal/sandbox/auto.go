package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/checkpoint"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// TickEvery is how often the scheduler looks at every sandbox.
const TickEvery = 10 * time.Second

// RunScheduler takes interval checkpoints and applies retention every
// TickEvery until ctx ends. Everything it decides is derived from the
// stored checkpoints and the clock, so a restarted cairnd neither misses
// nor doubles a checkpoint.
func (m *Manager) RunScheduler(ctx context.Context) {
	t := time.NewTicker(TickEvery)
	defer t.Stop()
	for {
		if err := m.Tick(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("scheduler", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick runs one pass of the scheduler at the manager's clock's now.
func (m *Manager) Tick(ctx context.Context) error {
	now := m.cfg.Now()
	sandboxes, err := m.cfg.Store.AllSandboxes(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, sb := range sandboxes {
		live[sb.ID] = true
		if err := m.intervalCheckpoint(ctx, sb, now); err != nil {
			slog.Warn("interval checkpoint", "sandbox", sb.Name, "err", err)
		}
	}
	return m.applyRetention(ctx, sandboxes, live, now)
}

// IntervalDue reports whether an interval checkpoint is due: the interval
// has passed since the newest checkpoint (or since the sandbox was made, if
// it has none) and the disk changed since that checkpoint.
func IntervalDue(last time.Time, every time.Duration, now time.Time, changed bool) bool {
	return changed && !now.Before(last.Add(every))
}

// intervalCheckpoint takes sb's interval checkpoint if it is due.
func (m *Manager) intervalCheckpoint(ctx context.Context, sb metadata.Sandbox, now time.Time) error {
	last := sb.CreatedAt
	latest, err := m.cfg.Store.LatestCheckpoint(ctx, sb.ID)
	if err == nil {
		last = latest.CreatedAt
	} else if !errors.Is(err, metadata.ErrNotFound) {
		return err
	}
	if now.Before(last.Add(sb.AutoCheckpoint)) {
		return nil // cheap exit before touching the disk
	}
	base, err := m.baselineMarker(ctx, sb, latest)
	if err != nil {
		return err
	}
	cur, err := volume.ChangeMarker(m.cfg.Pool.SandboxPath(sb.ID))
	if err != nil {
		return err
	}
	if !IntervalDue(last, sb.AutoCheckpoint, now, cur != base) {
		return nil
	}
	l, err := m.cfg.Leases.Acquire(ctx, sandboxResource(sb.ID), lease.Options{Exclusive: true, Purpose: purposeCheckpoint})
	if errors.Is(err, metadata.ErrConflict) {
		return nil // a checkpoint or lifecycle operation runs; next tick
	} else if err != nil {
		return err
	}
	defer m.release(l)
	op := m.cfg.Ops.Start("checkpoint.auto", "sandbox/"+sb.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		ck, _, err := m.checkpoint(ctx, sb, checkpointOpts{Trigger: api.TriggerInterval}, op)
		m.noteAuto(sb.ID, api.TriggerInterval, err)
		if err != nil {
			if errdefs.Is(err, api.CodeDiskLimit) {
				slog.Warn("interval checkpoint skipped: disk limit reached", "sandbox", sb.Name)
			}
			return nil, err
		}
		return ck.Seq, nil
	})
	_, err = op.Wait(ctx)
	return err
}

// baselineMarker is the change marker of the state sb's disk is compared
// with: its newest checkpoint, else the checkpoint it was made from, else
// its image. A sandbox nobody wrote to has the same marker as its source
// (cairn itself writes nothing into a new root).
func (m *Manager) baselineMarker(ctx context.Context, sb metadata.Sandbox, latest metadata.Checkpoint) (uint64, error) {
	if latest.ID != "" {
		return latest.RootGeneration, nil
	}
	if sb.SourceCheckpoint != "" {
		if src, err := m.cfg.Store.CheckpointByID(ctx, sb.SourceCheckpoint); err == nil {
			return src.RootGeneration, nil
		}
	}
	return volume.ChangeMarker(m.cfg.Pool.ImagePath(sb.Image))
}

// applyRetention thins the automatic checkpoints of every sandbox with
// checkpoint.Retain, and deletes those of sandboxes deleted more than 14
// days ago. Manual and named checkpoints, and current ones, are never
// deleted.
func (m *Manager) applyRetention(ctx context.Context, sandboxes []metadata.Sandbox, live map[string]bool, now time.Time) error {
	accounts, err := m.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	current := map[string]bool{}
	for _, sb := range sandboxes {
		if sb.CurrentCheckpoint != "" {
			current[sb.CurrentCheckpoint] = true
		}
	}
	for _, acct := range accounts {
		all, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
		if err != nil {
			return err
		}
		bySandbox := map[string][]metadata.Checkpoint{}
		for _, ck := range all {
			if ck.Trigger != api.TriggerManual && ck.Name == "" {
				bySandbox[ck.SandboxID] = append(bySandbox[ck.SandboxID], ck)
			}
		}
		for sbID, cks := range bySandbox {
			remove := m.retentionVictims(sbID, cks, live[sbID], now)
			for _, ck := range remove {
				if current[ck.ID] {
					continue
				}
				if err := m.expire(ctx, ck); err != nil {
					slog.Warn("retention: delete checkpoint", "sandbox", ck.SandboxName, "id", ck.Seq, "err", err)
				}
			}
		}
	}
	return nil
}

// retentionVictims returns the automatic checkpoints of one sandbox that
// retention removes. For a deleted sandbox: all of them once 14 days have
// passed since its final checkpoint, none before.
func (m *Manager) retentionVictims(sbID string, cks []metadata.Checkpoint, alive bool, now time.Time) []metadata.Checkpoint {
	if !alive {
		deletedAt := cks[len(cks)-1].CreatedAt
		for _, ck := range cks {
			if ck.Trigger == api.TriggerDelete {
				deletedAt = ck.CreatedAt
			}
		}
		if checkpoint.ExpiredAfterDelete(deletedAt, now) {
			return cks
		}
		return nil
	}
	cands := make([]checkpoint.Candidate, len(cks))
	for i, ck := range cks {
		cands[i] = checkpoint.Candidate{ID: ck.ID, CreatedAt: ck.CreatedAt}
	}
	var out []metadata.Checkpoint
	for i, d := range checkpoint.Retain(cands, now) {
		if !d.Keep {
			out = append(out, cks[i])
		}
	}
	return out
}

// expire deletes a checkpoint retention gave up.
func (m *Manager) expire(ctx context.Context, ck metadata.Checkpoint) error {
	slog.Info("retention: deleting checkpoint", "sandbox", ck.SandboxName, "id", ck.Seq, "created", ck.CreatedAt)
	return m.deleteCheckpoint(ctx, ck)
}
