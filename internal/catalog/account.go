package catalog

import (
	"context"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// Account returns the account's disk use and counts.
func (c *Catalog) Account(ctx context.Context, account string) (api.AccountInfo, error) {
	acct, err := c.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return api.AccountInfo{}, err
	}
	sbs, err := c.cfg.Store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{})
	if err != nil {
		return api.AccountInfo{}, err
	}
	cks, err := c.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return api.AccountInfo{}, err
	}
	used, err := c.cfg.Disks.AccountUsage(ctx, acct.ID)
	if err != nil {
		return api.AccountInfo{}, err
	}
	info := api.AccountInfo{Name: acct.Name, DiskUsed: used, DiskLimit: c.cfg.Disks.LimitOf(acct), Sandboxes: len(sbs), Checkpoints: len(cks)}
	pool, err := c.cfg.Disks.PoolSpace(ctx)
	if err != nil {
		return api.AccountInfo{}, err
	}
	info.Pool = &pool
	if svc := c.offsiteOf(acct.ID); svc != nil {
		info.OffsiteLocations = svc.Locations()
		info.Offsite = map[string]int{}
		for _, ck := range cks {
			state, _ := svc.Status(ck)
			info.Offsite[state]++
		}
	}
	return info, nil
}

// Verify checks the account's checkpoints: locally, that every checkpoint's
// disk (and memory image) is there and readable; with req.Offsite, every
// object of the off-site locations (or of req.Location), repairing damage
// from the other location unless req.NoRepair.
func (c *Catalog) Verify(ctx context.Context, account string, req api.VerifyRequest) (*operation.Op, error) {
	acct, err := c.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	if req.Location != "" && !req.Offsite {
		return nil, errdefs.New(api.CodeInvalidArgument, "--location needs --offsite")
	}
	svc := c.offsiteOf(acct.ID)
	if req.Offsite && svc == nil {
		return nil, errdefs.New(api.CodeOffsiteUnavailable, "off-site copies are disabled in cairnd's config")
	}
	return c.cfg.Ops.Start("verify", "account/"+acct.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		rep := &api.VerifyReport{}
		if req.Offsite {
			locs, err := svc.VerifyWithProgress(ctx, req.Location, req.NoRepair, op.Record)
			if err != nil {
				return nil, err
			}
			rep.Locations, rep.OK = locs, true
			for _, l := range locs {
				rep.OK = rep.OK && l.OK && l.Error == ""
			}
			return rep, nil
		}
		if err := c.verifyLocal(ctx, acct, op, rep); err != nil {
			return nil, err
		}
		return rep, nil
	}), nil
}

// verifyLocal checks that every checkpoint of acct has its disk where its
// row says and, if it has one, its memory image.
func (c *Catalog) verifyLocal(ctx context.Context, acct metadata.Account, op *operation.Op, rep *api.VerifyReport) error {
	cks, err := c.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return err
	}
	op.Step(api.PhaseVerify, "Verifying %d local checkpoints", len(cks))
	rep.Checkpoints = len(cks)
	rep.Problems = append(rep.Problems, c.cfg.Disks.VerifyLocal(ctx, cks)...)
	rep.OK = len(rep.Problems) == 0
	return nil
}

// DeleteAccountCheckpoint deletes ck, a checkpoint of an account being
// deleted, as a user's delete does (its off-site copies are queued for
// deletion); one deleted meanwhile is no error.
func (c *Catalog) DeleteAccountCheckpoint(ctx context.Context, ck metadata.Checkpoint) error {
	if err := c.deleteCheckpoint(ctx, ck); err != nil && !errdefs.Is(err, api.CodeNoCheckpoint) {
		return err
	}
	return nil
}
