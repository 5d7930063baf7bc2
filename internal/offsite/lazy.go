package offsite

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

// Layout lays checkpoint ck's tree out in dir (empty or missing) without
// the files' data, for a lazy restore (repo.Layout): the manifest is read
// and authenticated, the data is fetched later with LoadChunks.
func (s *Service) Layout(ctx context.Context, ck metadata.Checkpoint, dir string) ([]repo.LaidFile, int, error) {
	r, err := s.opened(ctx)
	if err != nil {
		return nil, 0, err
	}
	ref := repo.ManifestRef{ID: ck.OffsiteManifest}
	if ck.OffsiteManifest == "" || len(r.Holders(ref)) == 0 {
		state, _ := s.Status(ck)
		return nil, 0, errdefs.New(api.CodeNotOffsite, "checkpoint %s/%s is not off-site (state %s)", ck.SandboxName, ck.Seq, state)
	}
	files, err := r.Layout(ctx, ref, dir)
	prefetch := 0
	if err == nil {
		order := readOrderIn(ctx, r, ref)
		if prefetch = inReadOrder(files, order); prefetch > 0 {
			slog.Info("lazy restore: fetching first the files its sandbox read first at its last boot",
				"sandbox", ck.SandboxName, "checkpoint", ck.Seq, "files", prefetch, "of", len(files))
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		if errors.Is(err, repo.ErrUnreachable) {
			return nil, 0, errdefs.New(api.CodeOffsiteUnavailable, "restore of checkpoint %s/%s from off-site failed: the locations could not be read now (try again): %s",
				ck.SandboxName, ck.Seq, errText(err))
		}
		return nil, 0, errdefs.New(api.CodeOffsiteFailed, "restore of checkpoint %s/%s from off-site failed: %v", ck.SandboxName, ck.Seq, err)
	}
	return files, prefetch, nil
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

// readOrderOf is the order of sandbox id's reads at its last boot, empty
// when it was not recorded; it goes up with the sandbox's checkpoints.
func (s *Service) readOrderOf(id string) accessorder.Order {
	if s.readOrders == "" {
		return accessorder.Order{}
	}
	o, err := accessorder.Load(accessorder.PathFor(s.readOrders, id))
	if err != nil {
		slog.Warn("off-site: the order of a boot's reads is unreadable; uploading without it", "sandbox_id", id, "err", err)
	}
	return o
}

// readOrderIn is the read order ref's manifest carries; empty when it
// carries none or cannot be read (the order is a hint only).
func readOrderIn(ctx context.Context, r *repo.Repository, ref repo.ManifestRef) accessorder.Order {
	info, err := r.Info(ctx, ref)
	if err != nil || len(info.Meta) == 0 {
		return accessorder.Order{}
	}
	var m remoteMeta
	if json.Unmarshal(info.Meta, &m) != nil {
		return accessorder.Order{}
	}
	return accessorder.Order{Files: m.ReadOrder}.Clean()
}

// inReadOrder puts the files that order names first, in its order, and
// the rest after them as they were (the manifest's order): the fill of a
// lazy restore goes in this order. It reports how many came first.
func inReadOrder(files []repo.LaidFile, order accessorder.Order) int {
	rank := order.Rank()
	first := 0
	sort.SliceStable(files, func(i, j int) bool {
		ri, oki := rank(files[i].Node.Path)
		rj, okj := rank(files[j].Node.Path)
		switch {
		case oki && okj:
			return ri < rj
		default:
			return oki && !okj
		}
	})
	for _, f := range files {
		if _, ok := rank(f.Node.Path); !ok {
			break
		}
		first++
	}
	return first
}
