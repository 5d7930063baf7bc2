package disks

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Evict drops checkpoint ck's local disk, and its memory image if it has
// one, and keeps its row: from then on it is restored from off-site (a
// memory checkpoint's image with it, so its processes resume). Whether it may is the caller's to decide
// (package localtier: only a checkpoint both locations hold, never a
// current one). The row is changed first (the store queues the disk and
// the memory image to free in the same transaction), so a crash leaves at worst a queued path;
// the space is freed at once, or when the last lease on the checkpoint
// ends. The sandbox's browse view drops it.
func (d *Disks) Evict(ctx context.Context, ck metadata.Checkpoint) error {
	if ck.DiskPath == "" {
		return nil
	}
	if err := d.cfg.Store.DropLocalCopy(ctx, ck.ID); err != nil {
		if errors.Is(err, metadata.ErrNotFound) {
			return errdefs.Wrap(api.CodeNoCheckpoint, err, "checkpoint %s/%s was deleted", ck.SandboxName, ck.Seq)
		}
		return err
	}
	if sb, err := d.cfg.Store.SandboxByID(ctx, ck.SandboxID); err == nil {
		d.PublishSoon(sb)
	}
	slog.Info("local copy of a checkpoint dropped; it restores from off-site", "sandbox", ck.SandboxName, "id", ck.Seq, "global_id", ck.ID)
	return d.collect(ctx)
}
