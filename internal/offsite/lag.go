package offsite

import (
	"context"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Observer is told how each upload ended (package metrics).
type Observer interface {
	// Uploaded is called once per upload that ended, with the bytes it
	// stored in the locations (summed over them; a failed upload may
	// have stored some) and its error (nil: committed).
	Uploaded(bytes int64, err error)
}

// SetObserver sets who is told about uploads; call it before Run.
func (s *Service) SetObserver(o Observer) { s.observer = o }

func (s *Service) observeUpload(bytes int64, err error) {
	if s.observer != nil {
		s.observer.Uploaded(bytes, err)
	}
}

// OffsiteLag says how far the account's off-site copies are behind its
// checkpoints: the age of its oldest checkpoint that not every location
// holds yet, 0 when they hold all. Checkpoints that will never go up are
// left out: those the repository cannot store and those whose local copy
// went before their upload. ok is false when off-site copies are off.
func (s *Service) OffsiteLag(ctx context.Context) (account string, lag time.Duration, ok bool, err error) {
	if s.cfg.Disabled {
		return s.account.Name, 0, false, nil
	}
	cks, err := s.store.ListCheckpoints(ctx, s.account.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return s.account.Name, 0, false, err
	}
	now := s.now()
	var oldest time.Time
	for _, ck := range cks {
		if ck.OffsiteUnstorable != "" || s.Complete(ck) || s.neverUploaded(ck.ID) {
			continue
		}
		if oldest.IsZero() || ck.CreatedAt.Before(oldest) {
			oldest = ck.CreatedAt
		}
	}
	if oldest.IsZero() {
		return s.account.Name, 0, true, nil
	}
	return s.account.Name, max(now.Sub(oldest), 0), true, nil
}

// neverUploaded reports whether checkpoint id's upload failed for good.
func (s *Service) neverUploaded(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.ckFail[id]
	return f != nil && f.final
}
