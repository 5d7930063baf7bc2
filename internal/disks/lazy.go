package disks

import (
	"context"
	"os"

	"github.com/cairn-sandbox/cairn/internal/lazy"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/repo"
)

// LazyRemote lays a checkpoint's tree out without its data, for a lazy
// restore; the data is fetched later (lazy.Source).
type LazyRemote interface {
	// Layout returns the files with data in the order to fill them, and
	// how many of them, from the first, its sandbox read first at its
	// last boot.
	Layout(ctx context.Context, ck metadata.Checkpoint, dir string) (files []repo.LaidFile, prefetch int, err error)
}

// MaterializeLazy makes dst, a new subvolume, checkpoint ck's disk laid
// out from off-site without its files' data, and writes the plan of what
// is to fill into the state directory stateDir (see internal/lazy): the
// FromOffsite way of Materialize for a lazy restore. The root is used
// through a lazyfs server on stateDir, never directly, until the fill is
// complete. On failure dst and stateDir are removed.
func (d *Disks) MaterializeLazy(ctx context.Context, ck metadata.Checkpoint, dst, stateDir string, remote LazyRemote) (err error) {
	if err := d.cfg.Pool.Create(ctx, dst); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			logErr("delete a partly laid out disk", d.cfg.Pool.Delete(context.WithoutCancel(ctx), dst), "checkpoint", ck.ID)
			os.RemoveAll(stateDir)
		}
	}()
	files, prefetch, err := remote.Layout(ctx, ck, dst)
	if err != nil {
		return err
	}
	plan := lazy.NewPlan(ck.AccountID, ck.ID, ck.OffsiteManifest, dst, files)
	plan.Prefetch = prefetch
	if plan.Subvolume, err = d.cfg.Pool.SubvolumeID(dst); err != nil {
		return err
	}
	return lazy.WritePlan(stateDir, plan)
}
