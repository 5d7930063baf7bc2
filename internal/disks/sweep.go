package disks

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Sweep brings the pool in line with the rows after cairnd starts, before
// it serves anything: it reclaims the leases of this host's dead
// predecessor (ownerPrefix) and expired ones, frees the queued deletes,
// deletes disks and memory images no row names (a crash between making one
// and recording it), and moves the disks of an older cairn out of its
// browse directories (where it kept the five newest) to where their rows
// say they are.
func (d *Disks) Sweep(ctx context.Context, ownerPrefix string) error {
	reclaimed, err := d.cfg.Leases.Reclaim(ctx, ownerPrefix)
	if err != nil {
		return err
	}
	if len(reclaimed) > 0 {
		slog.Info("recover: reclaimed leases of a stopped cairnd", "leases", len(reclaimed))
	}
	all, err := d.cfg.Store.AllCheckpoints(ctx)
	if err != nil {
		return err
	}
	var cks []metadata.Checkpoint // those whose disks are in this pool
	for _, ck := range all {
		if d.mine(ck.HostID) {
			cks = append(cks, ck)
		}
	}
	if err := d.adoptLegacyBrowse(ctx, cks); err != nil {
		return err
	}
	// Rows naming a disk that is not there (lost with a disk, wiped by
	// hand, or from before rows named them) say so from now on, so that
	// the browse view and restores know at once.
	for i, ck := range cks {
		if ck.DiskPath != "" && !d.HasLocal(ctx, ck) {
			slog.Warn("recover: a checkpoint's local copy is gone; it restores from off-site", "checkpoint", ck.ID, "path", ck.DiskPath)
			cks[i].DiskPath = ""
		}
	}
	if err := d.collect(ctx); err != nil {
		return err
	}
	queued, err := d.cfg.Store.DiskDeletes(ctx)
	if err != nil {
		return err
	}
	named := map[string]bool{}
	for _, ck := range cks {
		named[filepath.Clean(ck.DiskPath)] = true
		named[filepath.Clean(ck.MemoryPath)] = true
	}
	for _, q := range queued {
		named[filepath.Clean(q.Path)] = true // a reader holds it still
	}
	disks, err := d.cfg.Pool.CheckpointNames()
	if err != nil {
		return err
	}
	images, err := d.cfg.Pool.MemoryNames()
	if err != nil {
		return err
	}
	var paths []string
	for _, id := range disks {
		paths = append(paths, d.cfg.Pool.CheckpointPath(id))
	}
	for _, id := range images {
		paths = append(paths, d.cfg.Pool.MemoryPath(id))
	}
	for _, path := range paths {
		if rel := d.cfg.Pool.Rel(path); !named[rel] {
			slog.Info("recover: removing a disk no checkpoint names", "path", rel)
			if err := d.cfg.Pool.Delete(ctx, path); err != nil {
				return err
			}
		}
	}
	return nil
}

// adoptLegacyBrowse moves each checkpoint disk an older cairn kept in
// pool/browse/<sandbox>/<seq> to the place its row names (constant time: a
// snapshot, then the old one is deleted) and removes pool/browse. Only the
// old layout is looked at; rows name every disk from here on.
func (d *Disks) adoptLegacyBrowse(ctx context.Context, cks []metadata.Checkpoint) error {
	legacy := filepath.Join(d.cfg.Pool.Root(), "browse")
	if _, err := os.Stat(legacy); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, ck := range cks {
		old := filepath.Join(legacy, ck.SandboxID, ck.Seq)
		if ok, _ := volume.IsSubvolume(old); !ok || ck.DiskPath == "" {
			continue
		}
		dst, err := d.abs(ck.DiskPath)
		if err != nil {
			return err
		}
		if ok, _ := volume.IsSubvolume(dst); !ok {
			slog.Info("recover: moving a checkpoint disk out of the old browse directory", "checkpoint", ck.ID)
			if err := d.cfg.Pool.Snapshot(ctx, old, dst, true); err != nil {
				return err
			}
		}
	}
	entries, _ := os.ReadDir(legacy)
	for _, sb := range entries {
		dir := filepath.Join(legacy, sb.Name())
		subs, _ := os.ReadDir(dir)
		for _, e := range subs {
			if err := d.cfg.Pool.Delete(ctx, filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
		os.Remove(dir)
	}
	return os.Remove(legacy)
}
