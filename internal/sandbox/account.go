package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// Emptying an account that is being deleted (access.Emptier).

// busyWait bounds how long emptying an account waits for one of its
// sandboxes that another operation holds (a start, a restore).
const busyWait = 5 * time.Minute

// emptyRounds is how many times emptying looks again for what was made
// in the account while it was emptied (an operation started before its
// tokens were revoked).
const emptyRounds = 3

// EmptyAccount implements access.Emptier: each sandbox of account is
// deleted by a sandbox.delete operation of its own (journalled as any
// delete, so that a crash midway is finished or undone at the next start),
// without the final checkpoint; then each checkpoint of the account
// through the catalog, as a single delete.
func (m *Manager) EmptyAccount(ctx context.Context, op *operation.Op, account string) (sandboxes, checkpoints int, err error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return 0, 0, fmt.Errorf("account %s: %w", account, err)
	}
	for range emptyRounds {
		sbs, err := m.cfg.Store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{})
		if err != nil {
			return sandboxes, checkpoints, err
		}
		cks, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
		if err != nil {
			return sandboxes, checkpoints, err
		}
		if len(sbs) == 0 && len(cks) == 0 {
			break
		}
		if len(sbs) > 0 {
			op.Step(api.PhaseDelete, "Deleting the %d sandboxes of account %s", len(sbs), account)
		}
		for i, sb := range sbs {
			if err := m.deleteWaiting(ctx, account, sb.Name); err != nil {
				return sandboxes, checkpoints, fmt.Errorf("delete sandbox %s: %w", sb.Name, err)
			}
			sandboxes++
			op.Report(api.Progress{Phase: api.PhaseDelete, Done: int64(i + 1), Total: int64(len(sbs)), Unit: api.UnitSandboxes},
				"Deleted sandbox %s (%d of %d)", sb.Name, i+1, len(sbs))
		}
		// Read again: the deletes may have made none, but a sandbox
		// deleted by someone else meanwhile left its checkpoints.
		cks, err = m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
		if err != nil {
			return sandboxes, checkpoints, err
		}
		if len(cks) > 0 {
			op.Step(api.PhaseDelete, "Deleting the %d checkpoints of account %s", len(cks), account)
		}
		for i, ck := range cks {
			if err := m.cfg.Catalog.DeleteAccountCheckpoint(ctx, ck); err != nil {
				return sandboxes, checkpoints, fmt.Errorf("delete checkpoint %s/%s: %w", ck.SandboxName, ck.Seq, err)
			}
			checkpoints++
			op.Report(api.Progress{Phase: api.PhaseDelete, Done: int64(i + 1), Total: int64(len(cks)), Unit: api.UnitCheckpoints},
				"Deleted checkpoint %s/%s (%d of %d)", ck.SandboxName, ck.Seq, i+1, len(cks))
		}
	}
	return sandboxes, checkpoints, nil
}

// deleteWaiting deletes the sandbox called name without its final
// checkpoint, waiting (up to busyWait) for another operation that holds
// it; one that is gone by then is no error.
func (m *Manager) deleteWaiting(ctx context.Context, account, name string) error {
	deadline := time.Now().Add(busyWait)
	for {
		del, err := m.delete(ctx, account, name, false)
		switch {
		case errdefs.Is(err, api.CodeNoSandbox):
			return nil
		case errdefs.Is(err, api.CodeSandboxBusy) && time.Now().Before(deadline):
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(busyPoll * 5):
			}
			continue
		case err != nil:
			return err
		}
		if _, err := del.Wait(ctx); err != nil {
			return fmt.Errorf("operation %s: %w", del.Info().ID, err)
		}
		return nil
	}
}
