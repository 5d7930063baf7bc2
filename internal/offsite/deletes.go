package offsite

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/repo"
)

// Deletes off-site: the manifests of deleted checkpoints, and the
// collection a delete that missed a location leaves due.

// deleteQueued deletes from the repository the manifests the store has
// queued for deletion (those of deleted checkpoints, and ones replaced by
// another), and then takes them off the queue, with those already gone. A
// manifest no row names that is not queued stays: this store never
// recorded it (another daemon's, or this account's from before its store
// was lost), or a crash kept its upload from being recorded (its chunks
// are the ones the upload stored again); the log says how many there are.
func (s *Service) deleteQueued(ctx context.Context, r *repo.Repository, cks []metadata.Checkpoint) {
	queued, err := s.store.OffsiteDeletes(ctx, s.account.ID)
	if err != nil {
		slog.Warn("off-site: list deletes", "err", err)
		return
	}
	named := map[string]bool{}
	for _, ck := range cks {
		if ck.OffsiteManifest != "" {
			named[ck.OffsiteManifest] = true
		}
	}
	isQueued := map[string]bool{}
	for _, id := range queued {
		isQueued[id] = true
	}
	stored := map[string]bool{}
	kept := 0
	for _, ref := range r.List() {
		stored[ref.ID] = true
		if !named[ref.ID] && !isQueued[ref.ID] {
			kept++
		}
	}
	s.noteKept(kept)
	if len(queued) == 0 {
		return
	}
	// A queued manifest that no head lists any more was deleted, but the
	// delete may have been cut short (a crash) after the heads were
	// committed and before the objects they no longer need were removed:
	// a collection finishes it. (Delete collects too.)
	var drop []repo.ManifestRef
	cutShort := false
	for _, id := range queued {
		switch {
		case named[id]:
		case stored[id]:
			drop = append(drop, repo.ManifestRef{ID: id})
		default:
			cutShort = true
		}
	}
	allUp := len(r.Unavailable()) == 0
	switch {
	case len(drop) > 0:
		start := s.now()
		before := r.Unavailable()
		err := r.Delete(ctx, drop...)
		if errors.Is(err, repo.ErrConflict) {
			s.reload(ctx, r)
		}
		if err != nil {
			slog.Warn("off-site: delete", "manifests", len(drop), "err", err)
			s.noteLocationErrors(r, before)
			s.mu.Lock()
			s.gcDue = true
			s.mu.Unlock()
			return
		}
		slog.Info("off-site: deleted", "manifests", len(drop), "took", s.now().Sub(start).Round(time.Millisecond))
	case cutShort && allUp:
		start := s.now()
		err := r.GC(ctx)
		if errors.Is(err, repo.ErrConflict) {
			s.reload(ctx, r)
		}
		if err != nil {
			slog.Warn("off-site: garbage collection after a delete cut short", "err", errText(err))
			s.noteLocationErrors(r, nil)
			return
		}
		slog.Info("off-site: garbage collected after a delete cut short", "took", s.now().Sub(start).Round(time.Millisecond))
	}
	// Deleted now, named by a checkpoint again, or gone already: off the
	// queue. (A location that missed the delete learns it from the other
	// one's tombstone when it is repaired.) "Gone" counts only while every
	// location answers: one that is down may hold a manifest the others
	// never had.
	var done []string
	for _, id := range queued {
		if stored[id] || named[id] || allUp {
			done = append(done, id)
		}
	}
	if err := s.store.ForgetOffsiteDeletes(ctx, s.account.ID, done); err != nil {
		slog.Warn("off-site: forget deletes", "err", err)
	}
}

// noteKept logs how many manifests in the repository no checkpoint here
// names and none is queued for deletion, when that changes.
func (s *Service) noteKept(n int) {
	s.mu.Lock()
	changed := n != s.kept
	s.kept = n
	s.mu.Unlock()
	if changed {
		slog.Info("off-site: manifests kept that no checkpoint here names (another daemon's, this account's from before its metadata was lost, or an upload a crash kept from being recorded)", "manifests", n)
	}
}

// collectIfDue runs a garbage collection once every location answers
// after a delete that missed one of them. Repair gives the returning
// location the tombstones, but its head keeps the index segments it had,
// so the packs only the deleted checkpoints used would stay there, still
// listed, until some later delete.
func (s *Service) collectIfDue(ctx context.Context, r *repo.Repository) {
	s.mu.Lock()
	due := s.gcDue
	s.mu.Unlock()
	if !due || len(r.Unavailable()) > 0 {
		return
	}
	start := s.now()
	before := r.Unavailable()
	err := r.GC(ctx)
	if errors.Is(err, repo.ErrConflict) {
		s.reload(ctx, r)
	}
	if err != nil {
		slog.Warn("off-site: garbage collection after a partial delete", "err", errText(err))
		s.noteLocationErrors(r, before)
		return
	}
	s.mu.Lock()
	s.gcDue = false
	s.mu.Unlock()
	slog.Info("off-site: garbage collected after a partial delete", "took", s.now().Sub(start).Round(time.Millisecond))
}
