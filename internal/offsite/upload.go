package offsite

// Uploads: the queue's next checkpoint, its disk (and memory image) read
// through a lease and backed up against its parent's manifest.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/repo"
)

// uploadNext uploads the oldest checkpoint that waits for it, if any.
func (s *Service) uploadNext(ctx context.Context, r *repo.Repository, cks []metadata.Checkpoint) bool {
	now := s.now()
	var next *metadata.Checkpoint
	s.mu.Lock()
	for i := range cks {
		ck := &cks[i]
		if ck.OffsiteManifest != "" && !s.lacksMemoryLocked(*ck) || ck.OffsiteUnstorable != "" {
			continue
		}
		if f := s.ckFail[ck.ID]; f != nil && (f.final || !f.retry.due(now)) {
			continue
		}
		if next == nil || ck.CreatedAt.Before(next.CreatedAt) {
			next = ck
		}
	}
	s.mu.Unlock()
	if next == nil {
		return false
	}
	s.uploadOne(ctx, r, *next, cks)
	return true
}

// forgetFailures drops the failures of checkpoints that are gone.
func (s *Service) forgetFailures(cks []metadata.Checkpoint) {
	exists := map[string]bool{}
	for _, ck := range cks {
		exists[ck.ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.ckFail {
		if !exists[id] {
			delete(s.ckFail, id)
		}
	}
}

// uploadOne uploads checkpoint ck, reading its disk under a lease: a delete
// of the checkpoint revokes the lease, which ends the upload at once.
func (s *Service) uploadOne(ctx context.Context, r *repo.Repository, ck metadata.Checkpoint, cks []metadata.Checkpoint) {
	log := slog.With("sandbox", ck.SandboxName, "checkpoint", ck.Seq, "global_id", ck.ID)
	held, err := s.disk.Open(ctx, ck, disks.PurposeUpload)
	if errors.Is(err, metadata.ErrNotFound) {
		log.Info("off-site: checkpoint deleted before its upload began")
		return
	}
	if err != nil {
		s.failCheckpoint(ck.ID, err, errors.Is(err, disks.ErrLocalGone))
		log.Warn("off-site: upload", "err", errText(err))
		return
	}
	defer held.Release()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(held.Context(), cancel)
	defer stop()
	t := &transfer{ck: ck.ID}
	s.mu.Lock()
	s.upload = t
	s.mu.Unlock()
	dir := held.Path()
	opts := repo.BackupOptions{Meta: metaOf(ck, s.readOrderOf(ck.SandboxID)), MemoryDir: held.MemoryDir()}
	if ck.HasMemory && opts.MemoryDir == "" {
		// Its disk goes up all the same: it is all there is to restore.
		log.Warn("off-site: the checkpoint's memory image is missing or damaged here; uploading its disk alone")
		s.mu.Lock()
		s.memoryLost[ck.ID] = true
		s.mu.Unlock()
	}
	if p := s.parentOf(ctx, r, ck, cks); p != nil {
		opts.Parent = &repo.ManifestRef{ID: p.OffsiteManifest}
		// The parent's disk too, if it is still here: changed files then
		// read only what no longer shares extents with the parent's.
		if ph, err := s.disk.Open(ctx, *p, disks.PurposeUploadParent); err == nil {
			defer ph.Release()
			opts.ParentDir = ph.Path()
		}
	}
	total := s.disk.DiskBytes(ctx, dir)
	if opts.MemoryDir != "" {
		total += s.disk.DiskBytes(ctx, opts.MemoryDir)
	}
	start := s.now()
	s.mu.Lock()
	t.prog = api.TransferProgress{BytesTotal: total, StartedAt: start}
	s.mu.Unlock()
	opts.Progress = func(st repo.Stats) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.upload.prog = progressOf(st, total, start, s.now())
	}
	before := r.Unavailable()
	ref, st, err := r.Backup(ctx, dir, opts)
	s.observeUpload(st.BytesUploaded, err)
	s.mu.Lock()
	s.upload = nil
	// A canceled upload (its checkpoint was deleted) says nothing of the
	// locations: what failed, failed for the cancel.
	for name, e := range st.Failed {
		if ctx.Err() != nil {
			break
		}
		s.locErr[name] = e
		if _, skipped := before[name]; !skipped {
			s.retryOf(name).failed(s.now(), time.Duration(s.cfg.RetryMax))
		}
	}
	s.mu.Unlock()
	if err != nil {
		if errors.Is(err, repo.ErrConflict) {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			s.reload(rctx, r)
			cancel()
		}
		if ctx.Err() != nil {
			log.Info("off-site: upload cancelled")
			return
		}
		if errors.Is(err, repo.ErrUnstorable) {
			// Logged once: it is not tried again, after a restart neither.
			s.markUnstorable(ctx, ck, err)
			log.Error("off-site: the checkpoint cannot be stored off-site; not retried", "err", errText(err))
			return
		}
		s.failCheckpoint(ck.ID, err, false)
		log.Warn("off-site: upload failed", "err", errText(err))
		return
	}
	s.refreshHolders(r) // before the row names the manifest, so Status never shows ×0
	s.knowMeta(ref.ID, ck, opts.MemoryDir != "")
	// Committed: record it even if the upload was cancelled meanwhile (the
	// checkpoint's delete then queues the manifest for deletion).
	rctx := context.WithoutCancel(ctx)
	if err := s.store.SetCheckpointOffsite(rctx, ck.ID, ref.ID); err != nil {
		log.Info("off-site: upload not recorded", "err", err)
		if errors.Is(err, metadata.ErrNotFound) {
			// Deleted meanwhile: the manifest is this upload's own, and
			// no row will ever queue it for deletion.
			if derr := r.Delete(rctx, ref); derr != nil {
				log.Warn("off-site: delete the upload of a deleted checkpoint", "manifest", ref.ID[:12], "err", derr)
			}
		}
		// Otherwise the upload is redone.
		return
	}
	s.mu.Lock()
	delete(s.ckFail, ck.ID)
	s.mu.Unlock()
	took := s.now().Sub(start)
	log.Info("off-site: uploaded", "manifest", ref.ID[:12], "memory", opts.MemoryDir != "", "files_read", st.FilesRead, "read", st.BytesRead, "unread_shared", st.BytesShared,
		"new_chunks", st.ChunksNew, "sent", st.BytesUploaded, "took", took.Round(time.Millisecond), "failed_locations", len(st.Failed))
}

func progressOf(st repo.Stats, total int64, start, now time.Time) api.TransferProgress {
	p := api.TransferProgress{BytesDone: st.BytesRead, BytesTotal: total, BytesSent: st.BytesUploaded,
		Files: st.FilesRead, StartedAt: start}
	if d := now.Sub(start).Seconds(); d > 0 {
		p.BytesPerSec = float64(st.BytesRead) / d
	}
	return p
}

// parentOf picks the checkpoint whose manifest ck's upload builds on,
// reusing its chunk lists for the files that did not change: the newest
// uploaded checkpoint of the same sandbox taken before ck, else the
// checkpoint the sandbox was forked or restored from; nil if none is
// uploaded. Inode numbers and change times carry over between snapshots of
// one lineage, which is what the reuse relies on.
func (s *Service) parentOf(ctx context.Context, r *repo.Repository, ck metadata.Checkpoint, cks []metadata.Checkpoint) *metadata.Checkpoint {
	stored := map[string]bool{}
	for _, ref := range r.List() {
		stored[ref.ID] = true
	}
	var best *metadata.Checkpoint
	for i := range cks {
		c := &cks[i]
		if c.SandboxID == ck.SandboxID && c.ID != ck.ID && stored[c.OffsiteManifest] && !c.CreatedAt.After(ck.CreatedAt) &&
			(best == nil || c.CreatedAt.After(best.CreatedAt)) {
			best = c
		}
	}
	if best != nil {
		return best
	}
	sb, err := s.store.SandboxByID(ctx, ck.SandboxID)
	if err != nil || sb.SourceCheckpoint == "" {
		return nil
	}
	for i := range cks {
		if cks[i].ID == sb.SourceCheckpoint && stored[cks[i].OffsiteManifest] {
			return &cks[i]
		}
	}
	return nil
}

// markUnstorable records that the repository cannot store checkpoint ck
// (err says why): it is not tried again, by this service or after a
// restart (the row keeps the reason).
func (s *Service) markUnstorable(ctx context.Context, ck metadata.Checkpoint, err error) {
	s.failCheckpoint(ck.ID, err, true)
	if merr := s.store.SetCheckpointUnstorable(context.WithoutCancel(ctx), ck.ID, errText(err)); merr != nil {
		slog.Warn("off-site: record that the checkpoint cannot be stored (it is tried again after a restart)", "checkpoint", ck.Seq, "global_id", ck.ID, "err", merr)
	}
}

func (s *Service) failCheckpoint(id string, err error, final bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.ckFail[id]
	if f == nil {
		f = &ckFailure{}
		s.ckFail[id] = f
	}
	f.err, f.final = err, final
	f.unstorable = errors.Is(err, repo.ErrUnstorable)
	f.retry.failed(s.now(), time.Duration(s.cfg.RetryMax))
}
