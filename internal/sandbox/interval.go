package sandbox

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// IntervalCheckpoint takes sb's automatic interval checkpoint now (the
// scheduler decided it is due), as an operation it waits for. A sandbox
// that a checkpoint or a lifecycle operation holds is skipped: the next
// tick sees it again.
func (m *Manager) IntervalCheckpoint(ctx context.Context, sb metadata.Sandbox) error {
	l, err := m.cfg.Leases.Acquire(ctx, sandboxResource(sb.ID), lease.Options{Exclusive: true, Purpose: purposeCheckpoint})
	if errors.Is(err, metadata.ErrConflict) {
		return nil // a checkpoint or lifecycle operation runs; next tick
	} else if err != nil {
		return err
	}
	defer m.ex.release(l)
	// A crashed sandbox, or one whose cairn-init is away, is skipped
	// quietly: its disk is checkpointed when it stops or is deleted, and
	// the tick after it runs again.
	if cur, err := m.cfg.Store.SandboxByID(ctx, sb.ID); err == nil && cur.State == metadata.SandboxCrashed {
		m.cfg.Instances.note(sb.ID, "interval checkpoint skipped: the sandbox crashed")
		return nil
	}
	if inst := m.cfg.Instances.get(sb.ID); inst != nil && !inst.agent.Connected() {
		m.cfg.Instances.note(sb.ID, "interval checkpoint skipped: cairn-init not connected")
		return nil
	}
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
