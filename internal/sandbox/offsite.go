package sandbox

import (
	"context"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// The manager's side of off-site copies (package offsite does the work):
// it lends the upload queue a checkpoint's disk, shows off-site states,
// and restores a checkpoint from off-site when asked to or when its local
// copy is gone.

// offsiteStatus is checkpoint ck's off-site state for its API view.
func (m *Manager) offsiteStatus(ck metadata.Checkpoint) (string, *api.OffsiteDetail) {
	if m.cfg.Offsite == nil {
		return api.OffsiteOff, nil
	}
	return m.cfg.Offsite.Status(ck)
}

// offsiteChanged tells the upload queue that checkpoints were created or
// deleted.
func (m *Manager) offsiteChanged() {
	if m.cfg.Offsite != nil {
		m.cfg.Offsite.Wake()
	}
}

// lastOffsite returns when the newest of sb's checkpoints that both
// locations hold was taken (nil: none yet), and whether off-site copies
// are off.
func (m *Manager) lastOffsite(ctx context.Context, sb metadata.Sandbox) (*time.Time, bool) {
	if m.cfg.Offsite == nil || !m.cfg.Offsite.Enabled() {
		return nil, true
	}
	cks, err := m.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if err != nil {
		return nil, false
	}
	for i := len(cks) - 1; i >= 0; i-- {
		if m.cfg.Offsite.Complete(cks[i]) {
			return &cks[i].CreatedAt, false
		}
	}
	return nil, false
}

// remote is what brings checkpoints back from off-site; nil when off-site
// copies are off.
func (m *Manager) remote() disks.Remote {
	if m.cfg.Offsite == nil || !m.cfg.Offsite.Enabled() {
		return nil
	}
	return m.cfg.Offsite
}

// sourceFor decides where a root made from ck comes from (see
// disks.SourceFor).
func (m *Manager) sourceFor(ctx context.Context, ck metadata.Checkpoint, fromOffsite bool) (disks.Source, error) {
	return m.cfg.Disks.SourceFor(ctx, ck, fromOffsite, m.remote(), func() string {
		state, _ := m.offsiteStatus(ck)
		return state
	})
}

// fetchProgress reports an off-site fetch on op.
func fetchProgress(op *operation.Op, ck metadata.Checkpoint) func(api.Progress, string) {
	op.Step(api.PhaseFetch, "Fetching checkpoint %s/%s from off-site", ck.SandboxName, ck.Seq)
	return op.Record
}

// Verify checks the account's checkpoints: locally, that every checkpoint's
// disk (and memory image) is there and readable; with req.Offsite, every
// object of the off-site locations (or of req.Location), repairing damage
// from the other location unless req.NoRepair.
func (m *Manager) Verify(ctx context.Context, account string, req api.VerifyRequest) (*operation.Op, error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	if req.Location != "" && !req.Offsite {
		return nil, errdefs.New(api.CodeInvalidArgument, "--location needs --offsite")
	}
	if req.Offsite && (m.cfg.Offsite == nil || !m.cfg.Offsite.Enabled()) {
		return nil, errdefs.New(api.CodeOffsiteUnavailable, "off-site copies are disabled in cairnd's config")
	}
	return m.cfg.Ops.Start("verify", "account/"+acct.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		rep := &api.VerifyReport{}
		if req.Offsite {
			locs, err := m.cfg.Offsite.VerifyWithProgress(ctx, req.Location, req.NoRepair, op.Record)
			if err != nil {
				return nil, err
			}
			rep.Locations, rep.OK = locs, true
			for _, l := range locs {
				rep.OK = rep.OK && l.OK && l.Error == ""
			}
			return rep, nil
		}
		if err := m.verifyLocal(ctx, acct, op, rep); err != nil {
			return nil, err
		}
		return rep, nil
	}), nil
}

// verifyLocal checks that every checkpoint of acct has its disk where its
// row says and, if it has one, its memory image.
func (m *Manager) verifyLocal(ctx context.Context, acct metadata.Account, op *operation.Op, rep *api.VerifyReport) error {
	cks, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return err
	}
	op.Step(api.PhaseVerify, "Verifying %d local checkpoints", len(cks))
	rep.Checkpoints = len(cks)
	rep.Problems = append(rep.Problems, m.cfg.Disks.VerifyLocal(ctx, cks)...)
	rep.OK = len(rep.Problems) == 0
	return nil
}
