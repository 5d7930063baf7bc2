package disks

import (
	"context"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// MemoryRemote brings a checkpoint's memory image back from off-site
// into a directory, byte for byte (K04 when the off-site copy holds none).
type MemoryRemote interface {
	RestoreMemoryWithProgress(ctx context.Context, ck metadata.Checkpoint, dir string, progress func(api.Progress, string)) error
}

// FetchMemory reads memory checkpoint ck's image back from off-site, whole
// (runsc restore reads every page before it returns, so nothing of it is
// fetched lazily), into a new subvolume in the pool's work area, for one
// restore from off-site: its processes resume from dir as from a local
// image. remove deletes it; call it once the sandbox runs. A crash leaves
// it in the work area, which is swept when the pool is opened. On failure
// nothing is left.
func (d *Disks) FetchMemory(ctx context.Context, ck metadata.Checkpoint, remote MemoryRemote, progress func(api.Progress, string)) (dir string, remove func(), err error) {
	dir = d.cfg.Pool.TempPath("memory-" + ck.ID + "-" + newID())
	if err := d.cfg.Pool.Create(ctx, dir); err != nil {
		return "", nil, err
	}
	remove = func() {
		logErr("delete a fetched memory image", d.cfg.Pool.Delete(context.Background(), dir), "checkpoint", ck.ID)
	}
	if err := remote.RestoreMemoryWithProgress(ctx, ck, dir, progress); err != nil {
		remove()
		return "", nil, err
	}
	if _, err := memoryImage(ck, dir); err != nil {
		remove()
		return "", nil, err
	}
	return dir, remove, nil
}
