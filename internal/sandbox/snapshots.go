package sandbox

import (
	"context"
	"errors"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// CreateSnapshot takes a named checkpoint (a snapshot) of the sandbox
// called name; without a name it is called <sandbox>-YYYYMMDD-HHMMSS (UTC).
func (m *Manager) CreateSnapshot(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
	if req.Name == "" {
		req.Name = name + "-" + m.cfg.Now().UTC().Format("20060102-150405")
	}
	return m.CreateCheckpoint(ctx, account, name, req)
}

// Snapshots lists every named and automatic checkpoint of the account,
// those of deleted sandboxes included, oldest first.
func (m *Manager) Snapshots(ctx context.Context, account string) ([]api.Checkpoint, error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	rows, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return nil, err
	}
	usage, err := m.cfg.Disks.Usage(ctx)
	if err != nil {
		return nil, err
	}
	sandboxes := map[string]metadata.Sandbox{}
	out := []api.Checkpoint{}
	for _, ck := range rows {
		if ck.Trigger == api.TriggerManual && ck.Name == "" {
			continue
		}
		sb, ok := sandboxes[ck.SandboxID]
		if !ok {
			sb, err = m.cfg.Store.SandboxByID(ctx, ck.SandboxID)
			if err != nil && !errors.Is(err, metadata.ErrNotFound) {
				return nil, err
			}
			sandboxes[ck.SandboxID] = sb
		}
		v := m.checkpointView(sb, ck, &usage)
		v.SandboxDeleted = sb.ID == ""
		out = append(out, v)
	}
	return out, nil
}

// DeleteSnapshot deletes a checkpoint named account-wide (global id,
// snapshot name or SANDBOX/ID), also one of a deleted sandbox.
func (m *Manager) DeleteSnapshot(ctx context.Context, account, ref string) (api.Checkpoint, error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return api.Checkpoint{}, err
	}
	ck, err := m.resolveSnapshot(ctx, acct, ref)
	if err != nil {
		return api.Checkpoint{}, err
	}
	if err := m.deleteCheckpoint(ctx, ck); err != nil {
		return api.Checkpoint{}, err
	}
	return m.checkpointView(metadata.Sandbox{}, ck, nil), nil
}

// Configure changes settings of the sandbox called name.
func (m *Manager) Configure(ctx context.Context, account, name string, req api.ConfigureSandboxRequest) (api.Sandbox, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return api.Sandbox{}, err
	}
	if req.AutoCheckpoint == "" {
		return api.Sandbox{}, errdefs.New(api.CodeInvalidArgument, "nothing to change: give --auto-checkpoint")
	}
	every, err := parseInterval(req.AutoCheckpoint)
	if err != nil {
		return api.Sandbox{}, err
	}
	if err := m.cfg.Store.SetAutoCheckpoint(ctx, sb.ID, every); err != nil {
		return api.Sandbox{}, err
	}
	return m.Get(ctx, account, name)
}

// Account returns the account's disk use and counts.
func (m *Manager) Account(ctx context.Context, account string) (api.AccountInfo, error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return api.AccountInfo{}, err
	}
	sbs, err := m.cfg.Store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{})
	if err != nil {
		return api.AccountInfo{}, err
	}
	cks, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return api.AccountInfo{}, err
	}
	used, err := m.cfg.Pool.ContentUsage(ctx)
	if err != nil {
		return api.AccountInfo{}, err
	}
	info := api.AccountInfo{Name: acct.Name, DiskUsed: used, DiskLimit: m.cfg.Disks.DiskLimit(), Sandboxes: len(sbs), Checkpoints: len(cks)}
	if m.cfg.Offsite != nil && m.cfg.Offsite.Enabled() {
		info.OffsiteLocations = m.cfg.Offsite.Locations()
		info.Offsite = map[string]int{}
		for _, ck := range cks {
			state, _ := m.cfg.Offsite.Status(ck)
			info.Offsite[state]++
		}
	}
	return info, nil
}
