package disks

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// deleteWait bounds how long Delete waits for this process's readers of
// the checkpoint to let go before it returns; the space is then freed when
// they do.
const deleteWait = 30 * time.Second

// Delete deletes checkpoint ck: its row at once (the store queues its disk
// and memory image to be freed in the same transaction), then its space,
// as soon as no lease holds it. An upload of it is cancelled; a restore or
// a fork reading it is waited for (up to deleteWait). A sandbox's current
// checkpoint cannot be deleted (K06).
func (d *Disks) Delete(ctx context.Context, ck metadata.Checkpoint) error {
	// A restore as new or a fork reading it makes it a sandbox's current
	// checkpoint: let those finish first, then check.
	if err := d.waitRestores(ctx, ck); err != nil {
		return err
	}
	users, err := d.cfg.Store.ListSandboxes(ctx, ck.AccountID, metadata.SandboxFilter{})
	if err != nil {
		return err
	}
	for _, u := range users {
		if u.CurrentCheckpoint == ck.ID {
			return errdefs.New(api.CodeCheckpointCurrent,
				"checkpoint %s is the current checkpoint of sandbox %s (its disk was restored or forked from it) and cannot be deleted", ck.Seq, u.Name)
		}
	}
	if err := d.cfg.Store.DeleteCheckpoint(ctx, ck.ID); err != nil {
		if errors.Is(err, metadata.ErrNotFound) {
			return errdefs.Wrap(api.CodeNoCheckpoint, err, "checkpoint %s/%s was deleted", ck.SandboxName, ck.Seq)
		}
		return err
	}
	res := resourceOf(ck.ID)
	logErr("cancel uploads of a deleted checkpoint", d.cfg.Leases.Revoke(ctx, res, PurposeUpload), "checkpoint", ck.ID)
	wctx, cancel := context.WithTimeout(ctx, deleteWait)
	err = d.cfg.Leases.WaitReleased(wctx, res)
	cancel()
	if err != nil {
		slog.Info("checkpoint deleted; its space is freed once its readers let go", "checkpoint", ck.ID, "err", err)
	}
	if err := d.collect(ctx); err != nil {
		return err
	}
	slog.Info("checkpoint deleted", "sandbox", ck.SandboxName, "id", ck.Seq, "global_id", ck.ID)
	return nil
}

// Collect frees the disks and memory images of deleted checkpoints that no
// lease holds any more.
func (d *Disks) Collect(ctx context.Context) error { return d.collect(ctx) }

func (d *Disks) collect(ctx context.Context) error {
	d.collecting.Lock()
	defer d.collecting.Unlock()
	queued, err := d.cfg.Store.DiskDeletes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	// Every disk no lease holds, freed in one batch: one btrfs commit and
	// one wait for the cleaner for all of them.
	free := map[string]string{} // absolute path → queued path
	var paths []string
	for _, q := range queued {
		if !d.mine(q.HostID) {
			continue // in another host's pool: that host frees it
		}
		holders, err := d.cfg.Leases.Holders(ctx, resourceOf(q.CheckpointID))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(holders) > 0 {
			continue // freed when the last one lets go
		}
		path, err := d.abs(q.Path)
		if err != nil {
			slog.Warn("disk delete queue: a path outside the pool is dropped", "path", q.Path)
			if err := d.cfg.Store.ForgetDiskDelete(ctx, q.Path); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		free[path] = q.Path
		paths = append(paths, path)
	}
	// ReclaimAll waits for btrfs to free them: deleting a checkpoint frees
	// its space at once, its memory image's too.
	failed := d.cfg.Pool.ReclaimAll(ctx, paths)
	for _, path := range paths {
		if err := failed[path]; err != nil {
			errs = append(errs, err)
			continue
		}
		if err := d.cfg.Store.ForgetDiskDelete(ctx, free[path]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitRestores waits (up to deleteWait) until no restore or fork reads
// checkpoint ck, so that the current-checkpoint rule sees their sandboxes.
func (d *Disks) waitRestores(ctx context.Context, ck metadata.Checkpoint) error {
	deadline := time.Now().Add(deleteWait)
	for {
		holders, err := d.cfg.Leases.Holders(ctx, resourceOf(ck.ID))
		if err != nil {
			return err
		}
		busy := false
		for _, h := range holders {
			busy = busy || h.Purpose == PurposeRestore
		}
		if !busy {
			return nil
		}
		if time.Now().After(deadline) {
			return errdefs.New(api.CodeSandboxBusy, "checkpoint %s/%s is being restored or forked from; try again when that is done", ck.SandboxName, ck.Seq)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
