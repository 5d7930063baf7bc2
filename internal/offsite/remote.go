package offsite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"log/slog"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
)

// What survives the host: every manifest carries, sealed with it, the
// metadata of its checkpoint (remoteMeta, JSON), so that a cairnd with
// only the key file and the two locations lists what the repository
// holds (Remote) and makes rows for what it does not know (Import); those
// restore from off-site as any checkpoint without a local copy does.

// metaFormat is the version of remoteMeta written.
const metaFormat = 1

// remoteMeta is what a manifest says of its checkpoint.
type remoteMeta struct {
	Format      int       `json:"format"`
	ID          string    `json:"id"`
	SandboxID   string    `json:"sandbox_id"`
	SandboxName string    `json:"sandbox_name"`
	Seq         string    `json:"seq"`
	Name        string    `json:"name,omitempty"`
	Trigger     string    `json:"trigger"`
	Consistency string    `json:"consistency"`
	Comment     string    `json:"comment,omitempty"`
	Label       string    `json:"label,omitempty"`
	Image       string    `json:"image,omitempty"`
	HasMemory   bool      `json:"has_memory,omitempty"`
	Created     time.Time `json:"created"`
	// ReadOrder names the files the checkpoint's sandbox read first at
	// its last boot, in that order (package accessorder): a lazy restore
	// fetches them first. Read only by Layout, never cached.
	ReadOrder []string `json:"read_order,omitempty"`

	readErr string // why the manifest says nothing usable; not stored
	// memory: the manifest holds the memory image (repo.ManifestInfo.Memory);
	// not stored in the metadata, read from the manifest itself.
	memory bool
}

// Bounds of the free text a manifest carries: what is longer is cut, so
// that the metadata always fits in a manifest (repo's MaxMeta) and a
// checkpoint's upload never fails for its comment.
const (
	metaCommentMax = 8 << 10
	metaTextMax    = 1 << 10 // label, name, image, sandbox name
	// metaOrderMax bounds the read order; it gets at most what the rest
	// of the metadata leaves of manifest.MaxMeta.
	metaOrderMax = 48 << 10
)

// metaOf is the manifest metadata of ck, with the order of its sandbox's
// reads at boot.
func metaOf(ck metadata.Checkpoint, order accessorder.Order) []byte {
	m := remoteMeta{Format: metaFormat, ID: cut(ck.ID, 64), SandboxID: cut(ck.SandboxID, 64),
		SandboxName: cut(ck.SandboxName, metaTextMax), Seq: cut(ck.Seq, metaTextMax), Name: cut(ck.Name, metaTextMax),
		Trigger: cut(ck.Trigger, 64), Consistency: cut(ck.Consistency, 64), Comment: cut(ck.Comment, metaCommentMax),
		Label: cut(ck.Label, metaTextMax), Image: cut(ck.Image, metaTextMax), HasMemory: ck.HasMemory, Created: ck.CreatedAt}
	b, _ := json.Marshal(m)
	// The order takes what is left (JSON escapes can make the rest far
	// longer than its text), less the field's own name.
	room := min(metaOrderMax, manifest.MaxMeta-len(b)-len(`,"read_order":[]`))
	if room <= 0 {
		return b
	}
	if m.ReadOrder = order.Clean().Capped(room).Files; len(m.ReadOrder) > 0 {
		b, _ = json.Marshal(m)
	}
	return b
}

// cut is s in at most n bytes, not splitting a UTF-8 character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// meta reads what ref's manifest says, once: manifests never change.
func (s *Service) meta(ctx context.Context, r *repo.Repository, ref repo.ManifestRef) remoteMeta {
	s.mu.Lock()
	m, ok := s.metas[ref.ID]
	s.mu.Unlock()
	if ok {
		return m
	}
	info, err := r.Info(ctx, ref)
	switch {
	case err != nil:
		// Not cached: a location may answer next time.
		return remoteMeta{readErr: fmt.Sprintf("its manifest cannot be read: %v", err)}
	case len(info.Meta) == 0:
		m = remoteMeta{Created: info.Created, readErr: "written before manifests carried their checkpoint's metadata"}
	default:
		if err := json.Unmarshal(info.Meta, &m); err != nil || m.Format != metaFormat {
			m = remoteMeta{Created: info.Created, readErr: fmt.Sprintf("its metadata is not of a known form (format %d, %v)", m.Format, err)}
		}
	}
	m.memory = info.Memory
	m.ReadOrder = nil // only a lazy restore wants it: see Layout
	s.mu.Lock()
	if s.metas == nil {
		s.metas = map[string]remoteMeta{}
	}
	s.metas[ref.ID] = m
	s.mu.Unlock()
	return m
}

// knowMeta caches what the manifest just uploaded for ck says, without
// reading it back.
func (s *Service) knowMeta(manifest string, ck metadata.Checkpoint, memory bool) {
	var m remoteMeta
	if json.Unmarshal(metaOf(ck, accessorder.Order{}), &m) != nil {
		return
	}
	m.memory = memory
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metas == nil {
		s.metas = map[string]remoteMeta{}
	}
	s.metas[manifest] = m
}

// Memory images go off-site in the checkpoint's manifest (since manifest
// version 3). A memory checkpoint uploaded before holds its disk only
// there: while its memory image is still here, it is uploaded again (the
// new manifest replaces the old, which is deleted; only what the
// repository lacks goes up) and, until then, it is not off-site.

// learnMemory reads, once, whether the manifests of the memory
// checkpoints among cks that keep their image here hold it.
func (s *Service) learnMemory(ctx context.Context, r *repo.Repository, cks []metadata.Checkpoint) {
	for _, ck := range cks {
		if !ck.HasMemory || ck.MemoryPath == "" || ck.OffsiteManifest == "" {
			continue
		}
		s.mu.Lock()
		_, known := s.metas[ck.OffsiteManifest]
		s.mu.Unlock()
		if !known {
			s.meta(ctx, r, repo.ManifestRef{ID: ck.OffsiteManifest})
		}
	}
}

// memoryState says whether ck's off-site copy lacks the memory image it
// has here (lacks), and whether that is known yet (known: the manifest was
// read). s.mu is held.
func (s *Service) memoryStateLocked(ck metadata.Checkpoint) (lacks, known bool) {
	if !ck.HasMemory || ck.MemoryPath == "" || ck.OffsiteManifest == "" || s.memoryLost[ck.ID] {
		return false, true
	}
	m, ok := s.metas[ck.OffsiteManifest]
	if !ok {
		return false, false
	}
	return !m.memory, true
}

// lacksMemoryLocked reports whether ck's off-site copy is known to lack
// the memory image it has here. s.mu is held.
func (s *Service) lacksMemoryLocked(ck metadata.Checkpoint) bool {
	lacks, known := s.memoryStateLocked(ck)
	return known && lacks
}

// Remote lists every checkpoint the repository holds, oldest first, and
// which of them a checkpoint here names.
func (s *Service) Remote(ctx context.Context) ([]api.RemoteCheckpoint, error) {
	r, err := s.opened(ctx)
	if err != nil {
		return nil, err
	}
	known, err := s.knownManifests(ctx)
	if err != nil {
		return nil, err
	}
	var out []api.RemoteCheckpoint
	for _, ref := range r.List() {
		m := s.meta(ctx, r, ref)
		rc := api.RemoteCheckpoint{Manifest: ref.ID, Locations: r.Holders(ref), GlobalID: m.ID, Sandbox: m.SandboxName,
			SandboxID: m.SandboxID, ID: m.Seq, Name: m.Name, Trigger: m.Trigger, Consistency: m.Consistency,
			Comment: m.Comment, Label: m.Label, Image: m.Image, HasMemory: m.HasMemory && m.memory, CreatedAt: m.Created, Error: m.readErr}
		if rc.Locations == nil {
			rc.Locations = []string{}
		}
		if id, ok := known[ref.ID]; ok {
			rc.Known, rc.Checkpoint = true, id
		}
		out = append(out, rc)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// knownManifests maps the manifests the account's checkpoints name to
// their ids.
func (s *Service) knownManifests(ctx context.Context) (map[string]string, error) {
	cks, err := s.store.ListCheckpoints(ctx, s.account.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		return nil, err
	}
	known := map[string]string{}
	for _, ck := range cks {
		if ck.OffsiteManifest != "" {
			known[ck.OffsiteManifest] = ck.ID
		}
	}
	return known, nil
}

// Import makes a checkpoint here for each manifest of req (or, with
// req.All, each one no checkpoint here names) from what it says: no local
// copy, restored from off-site. A manifest that says nothing usable, or
// whose checkpoint's id or per-sandbox id is taken here, is skipped with
// the reason; a snapshot name taken here is dropped, with a note.
func (s *Service) Import(ctx context.Context, req api.ImportRequest) ([]metadata.Checkpoint, []api.ImportSkipped, []api.ImportSkipped, error) {
	if req.All == (len(req.Manifests) > 0) {
		return nil, nil, nil, errdefs.New(api.CodeInvalidArgument, "name the manifests to import, or import --all (not both)")
	}
	r, err := s.opened(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	known, err := s.knownManifests(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	held := map[string]bool{}
	for _, ref := range r.List() {
		held[ref.ID] = true
	}
	wanted := req.Manifests
	if req.All {
		wanted = nil
		for id := range held {
			if _, ok := known[id]; !ok {
				wanted = append(wanted, id)
			}
		}
		sort.Strings(wanted)
	}
	var imported []metadata.Checkpoint
	var skipped, notes []api.ImportSkipped
	skip := func(id, format string, args ...any) {
		skipped = append(skipped, api.ImportSkipped{Manifest: id, Reason: fmt.Sprintf(format, args...)})
	}
	for _, id := range wanted {
		if !held[id] {
			if req.All {
				continue
			}
			return nil, nil, nil, errdefs.New(api.CodeNotOffsite, "the off-site repository holds no manifest %q (cairn offsite list shows what it holds)", id)
		}
		if ck, ok := known[id]; ok {
			skip(id, "checkpoint %s here names it already", ck)
			continue
		}
		m := s.meta(ctx, r, repo.ManifestRef{ID: id})
		if m.readErr != "" {
			skip(id, "%s", m.readErr)
			continue
		}
		ck := metadata.Checkpoint{ID: m.ID, AccountID: s.account.ID, SandboxID: m.SandboxID, SandboxName: m.SandboxName,
			Seq: m.Seq, Name: m.Name, Trigger: m.Trigger, Consistency: m.Consistency, Comment: m.Comment, Label: m.Label,
			Image: m.Image, CreatedAt: m.Created, OffsiteManifest: id,
			// A manifest from before memory images went off-site holds
			// the disk only: imported, it restores its disk and boots.
			HasMemory: m.HasMemory && m.memory}
		stored, err := s.store.ImportCheckpoint(ctx, ck)
		if errors.Is(err, metadata.ErrConflict) && ck.Name != "" {
			if _, byName := s.store.CheckpointByName(ctx, s.account.ID, ck.Name); byName == nil {
				notes = append(notes, api.ImportSkipped{Manifest: id, Reason: fmt.Sprintf("imported without its name %q: a checkpoint here has it", ck.Name)})
				ck.Name = ""
				stored, err = s.store.ImportCheckpoint(ctx, ck)
			}
		}
		switch {
		case errors.Is(err, metadata.ErrConflict):
			skip(id, "checkpoint %s (%s/%s) conflicts with what is here: a checkpoint with its id, or its sandbox and id; a sandbox of another account with its sandbox's id; or the account deleted it", ck.ID, ck.SandboxName, ck.Seq)
			continue
		case err != nil && ctx.Err() == nil && !errors.Is(err, metadata.ErrNotFound):
			skip(id, "%v", err)
			continue
		case err != nil:
			return imported, skipped, notes, err
		}
		slog.Info("off-site: checkpoint imported", "sandbox", stored.SandboxName, "id", stored.Seq, "global_id", stored.ID, "manifest", id)
		imported = append(imported, stored)
	}
	return imported, skipped, notes, nil
}
