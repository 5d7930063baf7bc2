package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// The manager's side of off-site copies (package offsite does the work):
// it lends the upload queue a checkpoint's disk, shows off-site states,
// and restores a checkpoint from off-site when asked to or when its local
// copy is gone.

var _ offsite.DiskSource = (*Manager)(nil)

// HoldCheckpointDisk snapshots checkpoint ck's disk (constant time) into
// the pool's tmp directory, where nothing moves or deletes it until
// release: the upload reads a stable tree while the checkpoint itself may
// move in and out of /.cairn/checkpoints or be deleted.
//
// It gives way to whoever holds the sandbox's disk lock: a delete of the
// checkpoint cancels ctx (offsite.Service.Forget) while holding it.
func (m *Manager) HoldCheckpointDisk(ctx context.Context, ck metadata.Checkpoint) (string, func(), error) {
	unlock, err := m.lockDiskCtx(ctx, ck.SandboxID)
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	if _, err := m.cfg.Store.CheckpointByID(ctx, ck.ID); err != nil {
		return "", nil, fmt.Errorf("checkpoint %s: %w", ck.ID, err)
	}
	src := m.ckPath(ck)
	if ok, _ := volume.IsSubvolume(src); !ok {
		return "", nil, fmt.Errorf("checkpoint %s/%s: %w", ck.SandboxName, ck.Seq, offsite.ErrLocalGone)
	}
	held := m.cfg.Pool.TempPath("upload-" + ck.ID)
	if ok, _ := volume.IsSubvolume(held); ok {
		if err := m.cfg.Pool.Delete(ctx, held); err != nil {
			return "", nil, err
		}
	}
	if err := m.cfg.Pool.Snapshot(ctx, src, held, true); err != nil {
		return "", nil, err
	}
	release := func() {
		// Reclaim, not just delete: if the checkpoint was deleted
		// meanwhile, its space is freed only once this snapshot is.
		logErr("release held checkpoint disk", m.cfg.Pool.Reclaim(context.Background(), held), "checkpoint", ck.ID)
	}
	return held, release, nil
}

// DiskBytes is what the held directory dir refers to, from the pool's
// quota groups; 0 if they cannot be read.
func (m *Manager) DiskBytes(ctx context.Context, dir string) int64 {
	usage, err := m.cfg.Pool.Usage(ctx)
	if err != nil {
		return 0
	}
	return usage[m.cfg.Pool.Rel(dir)].Referenced
}

// offsiteStatus is checkpoint ck's off-site state for its API view.
func (m *Manager) offsiteStatus(ck metadata.Checkpoint) (string, *api.OffsiteDetail) {
	if m.cfg.Offsite == nil {
		return api.OffsiteOff, nil
	}
	return m.cfg.Offsite.Status(ck)
}

// offsiteForget stops a running upload of checkpoint ck so that deleting it
// frees its space at once.
func (m *Manager) offsiteForget(ck metadata.Checkpoint) {
	if m.cfg.Offsite != nil {
		m.cfg.Offsite.Forget(ck.ID)
	}
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

// localGone reports whether checkpoint ck's local disk no longer exists.
// It takes the disk lock of ck's sandbox, under which checkpoints move.
func (m *Manager) localGone(ck metadata.Checkpoint) (bool, error) {
	defer m.lockDisk(ck.SandboxID)()
	ok, err := volume.IsSubvolume(m.ckPath(ck))
	return err == nil && !ok, err
}

// restoreSource decides where a restore of ck reads its disk from: the
// local copy, or the off-site repository when fromOffsite or when the
// local copy is gone. It fails at once, before anything is made, when the
// checkpoint cannot come from where it must.
func (m *Manager) restoreSource(ck metadata.Checkpoint, fromOffsite bool) (bool, error) {
	if !fromOffsite {
		if gone, _ := m.localGone(ck); !gone {
			return false, nil
		}
	}
	if m.cfg.Offsite == nil || !m.cfg.Offsite.Enabled() {
		if fromOffsite {
			return false, errdefs.New(api.CodeOffsiteUnavailable, "off-site copies are disabled in cairnd's config")
		}
		return false, errdefs.New(api.CodeNotOffsite, "the local copy of checkpoint %s/%s is gone and off-site copies are disabled", ck.SandboxName, ck.Seq)
	}
	if ck.OffsiteManifest == "" {
		state, _ := m.cfg.Offsite.Status(ck)
		what := "is not off-site yet"
		if !fromOffsite {
			what = "has no local copy and is not off-site"
		}
		return false, errdefs.New(api.CodeNotOffsite, "checkpoint %s/%s %s (off-site state: %s)", ck.SandboxName, ck.Seq, what, state)
	}
	return true, nil
}

// fetchOffsite rebuilds ck's disk from the repository into a new
// subvolume in the pool's tmp directory and returns it with the func that
// deletes it.
func (m *Manager) fetchOffsite(ctx context.Context, op *operation.Op, ck metadata.Checkpoint, forID string) (string, func(), error) {
	dir := m.cfg.Pool.TempPath("fetch-" + forID)
	if err := m.cfg.Pool.Create(ctx, dir); err != nil {
		return "", nil, err
	}
	done := func() {
		logErr("delete fetched checkpoint", m.cfg.Pool.Delete(context.Background(), dir), "checkpoint", ck.ID)
	}
	op.Progress("Fetching checkpoint %s/%s from off-site", ck.SandboxName, ck.Seq)
	err := m.cfg.Offsite.Restore(ctx, ck, dir, func(p api.TransferProgress) {
		op.Progress("Fetched %s of %s (%s/s)", formatBytes(p.BytesDone), formatBytes(p.BytesTotal), formatBytes(int64(p.BytesPerSec)))
	})
	if err != nil {
		done()
		return "", nil, err
	}
	return dir, done, nil
}

// formatBytes renders n in binary units for progress lines.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
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
			locs, err := m.cfg.Offsite.Verify(ctx, req.Location, req.NoRepair, op.Progress)
			if err != nil {
				return nil, err
			}
			rep.Locations, rep.OK = locs, true
			for _, l := range locs {
				rep.OK = rep.OK && l.OK && l.Error == ""
				op.Progress("Location %s: %d objects, %s, %d problems, %d repaired", l.Name, l.Objects, formatBytes(l.Bytes), len(l.Problems), len(l.Repaired))
			}
			return rep, nil
		}
		if err := m.verifyLocal(ctx, acct, op, rep); err != nil {
			return nil, err
		}
		return rep, nil
	}), nil
}

// verifyLocal checks that every checkpoint of acct has its disk (a
// subvolume where the checkpoint says) and, if it has one, its memory image.
// It does not read the data: btrfs checksums it (btrfs scrub).
func (m *Manager) verifyLocal(ctx context.Context, acct metadata.Account, op *operation.Op, rep *api.VerifyReport) error {
	cks, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return err
	}
	op.Progress("Verifying %d local checkpoints", len(cks))
	for _, ck := range cks {
		rep.Checkpoints++
		name := ck.SandboxName + "/" + ck.Seq
		switch gone, err := m.localGone(ck); {
		case err != nil:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: disk: %v", name, err))
		case gone && ck.OffsiteManifest != "":
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: the local disk is gone (restore it from off-site)", name))
		case gone:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: the local disk is gone (not off-site either)", name))
		case ck.HasMemory:
			if _, err := m.memoryImage(ck, false); err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", name, err))
			}
		}
	}
	rep.OK = len(rep.Problems) == 0
	return nil
}
