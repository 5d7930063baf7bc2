package disks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// A sandbox's disk size is its root's quota-group limit, set at every
// start (LimitRoot), so that a sandbox that fills its disk sees EDQUOT
// inside and touches nothing else. The pool group is held below the file
// system's size by a reserve (volume.Pool.KeepReserve, at cairnd's start),
// which the sandboxes' data cannot use: the metadata of checkpoints and
// deletes always finds room. See docs/reliability.md.

// LimitRoot gives sandbox sb's root its disk size (no limit for 0). Setting
// a limit is a transaction of its own, which a full pool refuses: a root
// made from a checkpoint usually has its size already (inherited), and
// then that is enough.
func (d *Disks) LimitRoot(ctx context.Context, sb metadata.Sandbox) error {
	root := d.cfg.Pool.SandboxPath(sb.ID)
	err := d.cfg.Pool.LimitSubvolume(root, sb.DiskBytes)
	if err == nil || !errors.Is(err, unix.EDQUOT) {
		return err
	}
	if limit, _, lerr := d.cfg.Pool.SubvolumeLimit(ctx, root); lerr == nil && limit == sb.DiskBytes {
		return nil
	}
	return errdefs.Wrap(api.CodePoolFull, err, "the pool is full: sandbox %s cannot be given its disk size; delete checkpoints or sandboxes", sb.Name)
}

// DiskSizeOf is the disk size checkpoint ck was taken with, which its
// local copy inherited from the sandbox's root; 0 when unknown (no local
// copy, or no size).
func (d *Disks) DiskSizeOf(ctx context.Context, ck metadata.Checkpoint) int64 {
	path, err := d.localDisk(ctx, ck)
	if err != nil {
		return 0
	}
	limit, _, err := d.cfg.Pool.SubvolumeLimit(ctx, path)
	if err != nil {
		return 0
	}
	return limit
}

// RootUsed is what sandbox id's root refers to now, the image's files
// included: what counts against its disk size.
func (u Usage) RootUsed(id string) int64 {
	return u.m[u.pool.Rel(u.pool.SandboxPath(id))].Referenced
}

// PoolSize is the size of the pool's file system; 0 if it cannot be read.
func (d *Disks) PoolSize() int64 {
	size, err := d.cfg.Pool.Size()
	if err != nil {
		return 0
	}
	return size
}

// lowPoolShare is how full the pool group may get, of its limit, before
// cairnd warns that the pool runs low.
const lowPoolShare = 0.9

// PoolSpace says how full the pool is and whether it runs low: its
// content past lowPoolShare of what the reserve leaves to sandboxes, or
// less free space than the reserve still meant to be there.
func (d *Disks) PoolSpace(ctx context.Context) (api.PoolSpace, error) {
	sp, err := d.cfg.Pool.Space(ctx)
	if err != nil {
		return api.PoolSpace{}, err
	}
	out := api.PoolSpace{Size: sp.Size, Used: sp.Used, Free: sp.Free, Limit: sp.Limit}
	if sp.Limit > 0 {
		out.Reserve = sp.Size - sp.Limit
	}
	switch {
	case sp.Limit > 0 && float64(sp.Used) >= lowPoolShare*float64(sp.Limit):
		out.Low = true
		out.Note = fmt.Sprintf("the pool is %.0f%% full: sandboxes' writes fail with EDQUOT past %s; delete checkpoints or sandboxes",
			100*float64(sp.Used)/float64(sp.Limit), bounds.FormatSize(sp.Limit))
	case out.Reserve > 0 && sp.Free < out.Reserve/2:
		out.Low = true
		out.Note = fmt.Sprintf("only %s of the pool is free, less than half its %s reserve; delete checkpoints or sandboxes",
			bounds.FormatSize(sp.Free), bounds.FormatSize(out.Reserve))
	}
	return out, nil
}

// PoolWatch logs when the pool starts and stops running low; the
// scheduler calls Check each tick.
type PoolWatch struct {
	d   *Disks
	mu  sync.Mutex
	low bool
}

// NewPoolWatch returns a watch of d's pool.
func (d *Disks) NewPoolWatch() *PoolWatch { return &PoolWatch{d: d} }

// Check reads the pool's space and logs a change of its low state.
func (w *PoolWatch) Check(ctx context.Context) {
	sp, err := w.d.PoolSpace(ctx)
	if err != nil {
		slog.Warn("pool space", "err", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case sp.Low && !w.low:
		slog.Warn("the pool runs low on space", "note", sp.Note, "used", sp.Used, "limit", sp.Limit, "free", sp.Free)
	case !sp.Low && w.low:
		slog.Info("the pool has room again", "used", sp.Used, "limit", sp.Limit, "free", sp.Free)
	}
	w.low = sp.Low
}
