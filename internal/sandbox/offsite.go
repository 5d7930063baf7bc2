package sandbox

import (
	"context"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// The manager's side of off-site copies (package offsite does the work;
// the upload queue borrows disks from package disks): it wakes the queue
// and decides when a root comes from off-site, when asked to or when the
// local copy is gone.

// offsiteChanged tells the upload queue that checkpoints were created or
// deleted.
func (m *Manager) offsiteChanged() {
	if m.cfg.Offsite != nil {
		m.cfg.Offsite.Wake()
	}
}

// remote is what brings the account's checkpoints back from off-site;
// nil when its off-site copies are off.
func (m *Manager) remote(accountID int64) disks.Remote {
	if m.cfg.Offsite == nil {
		return nil
	}
	svc := m.cfg.Offsite.For(accountID)
	if svc == nil || !svc.Enabled() {
		return nil
	}
	return svc
}

// sourceFor decides where a root made from ck comes from (see
// disks.SourceFor).
func (m *Manager) sourceFor(ctx context.Context, ck metadata.Checkpoint, fromOffsite bool) (disks.Source, error) {
	return m.cfg.Disks.SourceFor(ctx, ck, fromOffsite, m.remote(ck.AccountID), func() string { return m.cfg.Catalog.OffsiteState(ck) })
}

// fetchProgress reports an off-site fetch on op.
func fetchProgress(op *operation.Op, ck metadata.Checkpoint) func(api.Progress, string) {
	op.Step(api.PhaseFetch, "Fetching checkpoint %s/%s from off-site", ck.SandboxName, ck.Seq)
	return op.Record
}

// fetchMemory reads memory checkpoint ck's image back from off-site, whole,
// for a restore whose disk comes from there too (see disks.FetchMemory):
// its processes then resume as from a local image. remove deletes it once
// the sandbox runs.
func (m *Manager) fetchMemory(ctx context.Context, op *operation.Op, ck metadata.Checkpoint) (string, func(), error) {
	remote := m.remote(ck.AccountID)
	mr, ok := remote.(disks.MemoryRemote)
	if !ok {
		return "", nil, errdefs.New(api.CodeOffsiteUnavailable, "off-site copies are disabled in cairnd's config")
	}
	op.Step(api.PhaseFetch, "Fetching the memory image of %s/%s from off-site", ck.SandboxName, ck.Seq)
	return m.cfg.Disks.FetchMemory(ctx, ck, mr, op.Record)
}
