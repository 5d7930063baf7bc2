package disks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Purposes of the leases on checkpoint disks.
const (
	PurposeUpload = "upload" // cancelled by a delete of the checkpoint
	// PurposeUploadParent: an upload reads the parent's disk to read only
	// what changed; a delete of the parent waits for it instead of
	// cancelling the child's upload.
	PurposeUploadParent = "upload-parent"
	PurposeRestore      = "restore" // a restore or a fork reads it
	PurposeDiff         = "diff"
)

// Held is a checkpoint's disk (and memory image) lent under a lease: the
// paths stay valid, and the data unchanged, until Release.
type Held struct {
	Checkpoint metadata.Checkpoint
	Disk       string // the disk's read-only subvolume on the host
	Memory     string // the memory image's directory; "" for none
	lease      *lease.Lease
}

// Context is cancelled when the lease ends: released, or revoked by a
// delete of the checkpoint (for PurposeUpload).
func (h *Held) Context() context.Context { return h.lease.Context() }

// Release ends the loan. Safe to call twice.
func (h *Held) Release() { h.lease.Release() }

// Open lends checkpoint ck's disk for purpose. It fails with an error
// wrapping ErrLocalGone when the checkpoint has no local copy (its row
// says so, or the subvolume its row names is not there any more: then the
// row is corrected).
func (d *Disks) Open(ctx context.Context, ck metadata.Checkpoint, purpose string) (*Held, error) {
	l, err := d.cfg.Leases.Acquire(ctx, resourceOf(ck.ID), lease.Options{Purpose: purpose})
	if err != nil {
		return nil, err
	}
	// Re-read under the lease: a delete that committed before it took the
	// row away, and a delete after it waits for the lease.
	cur, err := d.cfg.Store.CheckpointByID(ctx, ck.ID)
	if err != nil {
		l.Release()
		if errors.Is(err, metadata.ErrNotFound) {
			return nil, errdefs.Wrap(api.CodeNoCheckpoint, err, "checkpoint %s/%s was deleted", ck.SandboxName, ck.Seq)
		}
		return nil, err
	}
	h := &Held{Checkpoint: cur, lease: l}
	if h.Disk, err = d.localDisk(ctx, cur); err != nil {
		l.Release()
		return nil, err
	}
	if cur.MemoryPath != "" {
		h.Memory, _ = d.abs(cur.MemoryPath)
	}
	return h, nil
}

// localDisk returns where ck's disk is on the host, checking that it is
// there; a row naming a subvolume that is gone (wiped by hand, a lost
// disk) is corrected to say the checkpoint has no local copy.
func (d *Disks) localDisk(ctx context.Context, ck metadata.Checkpoint) (string, error) {
	gone := fmt.Errorf("checkpoint %s/%s: %w", ck.SandboxName, ck.Seq, ErrLocalGone)
	if ck.DiskPath == "" || !d.mine(ck.HostID) {
		return "", gone // another host's copy is not this pool's
	}
	path, err := d.abs(ck.DiskPath)
	if err != nil {
		return "", err
	}
	ok, err := volume.IsSubvolume(path)
	if err != nil {
		return "", err
	}
	if !ok {
		logErr("record a lost local copy", d.cfg.Store.SetCheckpointDisk(context.WithoutCancel(ctx), ck.ID, ""), "checkpoint", ck.ID)
		return "", gone
	}
	return path, nil
}

// HasLocal reports whether checkpoint ck has its local copy.
func (d *Disks) HasLocal(ctx context.Context, ck metadata.Checkpoint) bool {
	_, err := d.localDisk(ctx, ck)
	return err == nil
}

// MemoryImage checks the memory image of a held memory checkpoint and
// returns its directory; K04 when it is missing or damaged (its disk still
// restores alone).
func (h *Held) MemoryImage() (string, error) {
	return memoryImage(h.Checkpoint, h.Memory)
}

func memoryImage(ck metadata.Checkpoint, dir string) (string, error) {
	if dir == "" {
		return "", errdefs.New(api.CodeMemoryImageBad,
			"checkpoint %s has no memory image here; restore its disk alone with --disk-only", ck.Seq)
	}
	for _, f := range []string{"checkpoint.img", "pages.img", "pages_meta.img"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || (f == "checkpoint.img" && fi.Size() == 0) {
			return "", errdefs.New(api.CodeMemoryImageBad,
				"the memory image of checkpoint %s is missing or damaged (%s); restore its disk alone with --disk-only", ck.Seq, f)
		}
	}
	return dir, nil
}

// CheckMemory is MemoryImage for a checkpoint not held: for checks made
// before an operation starts.
func (d *Disks) CheckMemory(ck metadata.Checkpoint) error {
	dir := ""
	if ck.MemoryPath != "" {
		dir, _ = d.abs(ck.MemoryPath)
	}
	_, err := memoryImage(ck, dir)
	return err
}

// Materialize makes dst, a new writable subvolume, the held checkpoint's
// disk (a snapshot: constant time).
func (h *Held) Materialize(ctx context.Context, pool *volume.Pool, dst string) error {
	return pool.Snapshot(ctx, h.Disk, dst, false)
}

// Remote brings a checkpoint's disk back from off-site into a directory.
type Remote interface {
	RestoreWithProgress(ctx context.Context, ck metadata.Checkpoint, dir string, progress func(api.Progress, string)) error
}

// Source is where a sandbox root is materialized from.
type Source int

// Sources.
const (
	FromLocal   Source = iota // the local copy: a snapshot, constant time
	FromOffsite               // the off-site repository: read back in full
)

// SourceFor decides where a root made from ck comes from: the local copy,
// or off-site when fromOffsite or when the local copy is gone. It fails at
// once, before anything is made, when the checkpoint cannot come from where
// it must. remote is nil when off-site copies are off.
func (d *Disks) SourceFor(ctx context.Context, ck metadata.Checkpoint, fromOffsite bool, remote Remote, offsiteState func() string) (Source, error) {
	if !fromOffsite && d.HasLocal(ctx, ck) {
		return FromLocal, nil
	}
	if remote == nil {
		if fromOffsite {
			return 0, errdefs.New(api.CodeOffsiteUnavailable, "off-site copies are disabled in cairnd's config")
		}
		return 0, errdefs.New(api.CodeNotOffsite, "the local copy of checkpoint %s/%s is gone and off-site copies are disabled", ck.SandboxName, ck.Seq)
	}
	if ck.OffsiteManifest == "" {
		what := "is not off-site yet"
		if !fromOffsite {
			what = "has no local copy and is not off-site"
		}
		return 0, errdefs.New(api.CodeNotOffsite, "checkpoint %s/%s %s (off-site state: %s)", ck.SandboxName, ck.Seq, what, offsiteState())
	}
	return FromOffsite, nil
}

// Fetch makes dst, a new subvolume, checkpoint ck's disk read back from
// off-site. On failure dst is removed.
func (d *Disks) Fetch(ctx context.Context, ck metadata.Checkpoint, dst string, remote Remote, progress func(api.Progress, string)) error {
	if err := d.cfg.Pool.Create(ctx, dst); err != nil {
		return err
	}
	if err := remote.RestoreWithProgress(ctx, ck, dst, progress); err != nil {
		logErr("delete a partly fetched disk", d.cfg.Pool.Delete(context.WithoutCancel(ctx), dst), "checkpoint", ck.ID)
		return err
	}
	return nil
}

// Materialize makes dst a writable copy of checkpoint ck's disk from src:
// the one seam for every way a root is made from a checkpoint (the local
// copy; off-site, read back in full; lazily, later). For FromLocal it
// holds the disk for purpose and returns it, with its memory image, for
// the caller to release once the sandbox runs; for FromOffsite the
// returned Held is nil.
func (d *Disks) Materialize(ctx context.Context, ck metadata.Checkpoint, dst string, src Source, remote Remote, progress func(api.Progress, string)) (*Held, error) {
	if src == FromOffsite {
		return nil, d.Fetch(ctx, ck, dst, remote, progress)
	}
	h, err := d.Open(ctx, ck, PurposeRestore)
	if err != nil {
		return nil, err
	}
	if err := h.Materialize(ctx, d.cfg.Pool, dst); err != nil {
		h.Release()
		return nil, err
	}
	return h, nil
}

// DiskBytes is what the held directory dir refers to, from the pool's
// quota groups; 0 if they cannot be read.
func (d *Disks) DiskBytes(ctx context.Context, dir string) int64 {
	usage, err := d.cfg.Pool.Usage(ctx)
	if err != nil {
		return 0
	}
	return usage[d.cfg.Pool.Rel(dir)].Referenced
}

// Path is the held disk's directory (Held.Disk).
func (h *Held) Path() string { return h.Disk }

// MemoryDir is the held memory checkpoint's image, checked as by
// MemoryImage; "" for a checkpoint without one or whose image is missing
// or damaged.
func (h *Held) MemoryDir() string {
	if !h.Checkpoint.HasMemory {
		return ""
	}
	dir, err := h.MemoryImage()
	if err != nil {
		return ""
	}
	return dir
}
