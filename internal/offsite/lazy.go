package offsite

import (
	"context"
	"errors"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

// Layout lays checkpoint ck's tree out in dir (empty or missing) without
// the files' data, for a lazy restore (repo.Layout): the manifest is read
// and authenticated, the data is fetched later with LoadChunks.
func (s *Service) Layout(ctx context.Context, ck metadata.Checkpoint, dir string) ([]repo.LaidFile, error) {
	r, err := s.opened(ctx)
	if err != nil {
		return nil, err
	}
	ref := repo.ManifestRef{ID: ck.OffsiteManifest}
	if ck.OffsiteManifest == "" || len(r.Holders(ref)) == 0 {
		state, _ := s.Status(ck)
		return nil, errdefs.New(api.CodeNotOffsite, "checkpoint %s/%s is not off-site (state %s)", ck.SandboxName, ck.Seq, state)
	}
	files, err := r.Layout(ctx, ref, dir)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, repo.ErrUnreachable) {
			return nil, errdefs.New(api.CodeOffsiteUnavailable, "restore of checkpoint %s/%s from off-site failed: the locations could not be read now (try again): %s",
				ck.SandboxName, ck.Seq, errText(err))
		}
		return nil, errdefs.New(api.CodeOffsiteFailed, "restore of checkpoint %s/%s from off-site failed: %v", ck.SandboxName, ck.Seq, err)
	}
	return files, nil
}

// LoadChunks fetches chunks for a lazy restore's fill, each verified
// (repo.LoadChunks).
func (s *Service) LoadChunks(ctx context.Context, ids []crypto.ID) (map[crypto.ID][]byte, error) {
	r, err := s.opened(ctx)
	if err != nil {
		return nil, err
	}
	return r.LoadChunks(ctx, ids)
}

// PackOf names the pack holding chunk id (repo.PackOf); an error when
// the repository cannot be opened now.
func (s *Service) PackOf(ctx context.Context, id crypto.ID) (string, bool, error) {
	r, err := s.opened(ctx)
	if err != nil {
		return "", false, err
	}
	name, ok := r.PackOf(id)
	return name, ok, nil
}
