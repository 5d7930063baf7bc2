package catalog

import (
	"context"
	"errors"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
)

// offsiteOn is the account's off-site side, or R01 when its off-site
// copies are off.
func (c *Catalog) offsiteOn(ctx context.Context, account string) (metadata.Account, *offsite.Service, error) {
	acct, err := c.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return metadata.Account{}, nil, err
	}
	svc := c.offsiteOf(acct.ID)
	if svc == nil {
		return acct, nil, errdefs.New(api.CodeOffsiteUnavailable, "off-site copies are disabled in cairnd's config")
	}
	return acct, svc, nil
}

// OffsiteCheckpoints lists what the account's off-site repository holds,
// as its manifests describe it, and which of it this host knows.
func (c *Catalog) OffsiteCheckpoints(ctx context.Context, account string) ([]api.RemoteCheckpoint, error) {
	_, svc, err := c.offsiteOn(ctx, account)
	if err != nil {
		return nil, err
	}
	return svc.Remote(ctx)
}

// ImportOffsite makes checkpoints here for what the account's off-site
// repository holds and this host does not know (a dead host's): listed
// as snapshots of deleted sandboxes, restored from off-site.
func (c *Catalog) ImportOffsite(ctx context.Context, account string, req api.ImportRequest) (api.ImportResult, error) {
	_, svc, err := c.offsiteOn(ctx, account)
	if err != nil {
		return api.ImportResult{}, err
	}
	cks, skipped, notes, err := svc.Import(ctx, req)
	res := api.ImportResult{Imported: []api.Checkpoint{}, Skipped: skipped, Notes: notes}
	if res.Skipped == nil {
		res.Skipped = []api.ImportSkipped{}
	}
	for _, ck := range cks {
		sb, lerr := c.cfg.Store.SandboxByID(ctx, ck.SandboxID)
		if lerr != nil && !errors.Is(lerr, metadata.ErrNotFound) {
			return res, lerr
		}
		v := c.checkpointView(sb, ck, nil)
		v.SandboxDeleted = sb.ID == ""
		res.Imported = append(res.Imported, v)
	}
	return res, err
}
