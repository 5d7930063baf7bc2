package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/index"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/repo/pack"
)

// Delete removes checkpoints and, at once, in every location it can reach,
// every pack that no remaining checkpoint needs. A location that fails (or
// is unavailable, or where another writer committed: ErrConflict) keeps its
// objects and learns of the deletion from the other location's tombstone at
// the next Repair; its error is returned, joined with the others', after
// the rest is done, and it is left out of later writes (see Unavailable).
// Nothing is deleted in a location before its new head is committed.
func (r *Repository) Delete(ctx context.Context, refs ...ManifestRef) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	known := r.manifestNames()
	drop := map[string]bool{}
	for _, ref := range refs {
		if !slices.Contains(known, ref.ID) {
			return fmt.Errorf("delete %s: %w", ref.ID, ErrUnknownManifest)
		}
		drop[ref.ID] = true
	}
	return r.collect(ctx, drop)
}

// GC deletes, in every location it can reach, what no checkpoint needs:
// packs, index segments and manifests left by interrupted backups or
// deletes. It also merges each location's index segments into one.
func (r *Repository) GC(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.collect(ctx, nil)
}

func (r *Repository) collect(ctx context.Context, drop map[string]bool) error {
	live := map[crypto.ID]bool{}
	for _, name := range r.manifestNames() {
		if drop[name] {
			continue
		}
		plain, err := r.loadManifest(ctx, ManifestRef{ID: name})
		if err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		m, err := manifest.Decode(plain)
		if err != nil {
			return fmt.Errorf("gc: manifest %s: %w", name, err)
		}
		m.EachChunk(func(c manifest.Chunk) { live[c.ID] = true })
	}
	// A tombstone may go once every head is known and none lists its manifest.
	prune := map[string]bool{}
	allKnown := true
	listed := map[string]bool{}
	for _, l := range r.locs {
		if l.err != nil {
			allKnown = false
		}
		if l.head == nil {
			continue
		}
		for _, m := range l.head.Manifests {
			listed[m] = true
		}
	}
	if allKnown {
		for _, l := range r.locs {
			for _, m := range l.head.Deleted {
				prune[m] = !listed[m]
			}
		}
	}
	// Packs with no live blob go; packs with a large dead share are rewritten.
	gone := map[string]bool{}
	var rewrite []string
	for name, p := range r.packs {
		var deadBytes uint64
		anyLive := false
		for _, e := range p.Entries {
			if live[e.ID] {
				anyLive = true
			} else {
				deadBytes += uint64(e.Length)
			}
		}
		switch {
		case !anyLive:
			gone[name] = true
		case deadBytes*rewriteDeadShare >= p.Size:
			gone[name] = true
			rewrite = append(rewrite, name)
		}
	}
	slices.Sort(rewrite)
	rw := &repack{r: r, failed: map[*location]error{}, targets: map[*location]bool{}}
	for _, l := range r.locs {
		if l.err == nil && slices.ContainsFunc(rewrite, func(p string) bool { return r.packsOf(l)[p] }) {
			rw.targets[l] = true
		}
	}
	// A live blob that every target keeps in another pack is not copied
	// again: a location repaired after missing a delete lists both the
	// pack the delete rewrote and the rewritten one.
	carry := map[crypto.ID]bool{}
	for id := range live {
		carry[id] = true
	}
	for l := range rw.targets {
		kept := map[crypto.ID]bool{}
		for p := range r.packsOf(l) {
			if !gone[p] {
				for _, e := range r.packs[p].Entries {
					kept[e.ID] = true
				}
			}
		}
		for id := range carry {
			if kept[id] {
				delete(carry, id)
			}
		}
	}
	if len(rw.targets) == 0 {
		carry = live
	}
	if err := rw.run(ctx, rewrite, carry); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	var errs []error
	for _, l := range r.locs {
		switch {
		case l.err != nil:
			errs = append(errs, fmt.Errorf("gc %s: location unavailable: %w", l.Name, l.err))
			continue
		case rw.failed[l] != nil:
			l.failUnlessCanceled(ctx, rw.failed[l])
			errs = append(errs, fmt.Errorf("gc %s: upload rewritten pack: %w", l.Name, rw.failed[l]))
			continue
		}
		var fresh []string
		if rw.targets[l] {
			fresh = rw.fresh
		}
		if err := r.collectIn(ctx, l, drop, prune, gone, fresh); err != nil {
			l.failUnlessCanceled(ctx, err)
			errs = append(errs, fmt.Errorf("gc %s: %w", l.Name, err))
		}
	}
	if err := r.loadSegments(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// rewriteDeadShare: a pack is rewritten once dead blobs take 1/rewriteDeadShare
// of it.
const rewriteDeadShare = 5

// repack copies the live blobs of packs into new packs, uploaded to targets.
type repack struct {
	r       *Repository
	targets map[*location]bool
	failed  map[*location]error
	w       *pack.Writer
	fresh   []string
}

func (rw *repack) run(ctx context.Context, names []string, live map[crypto.ID]bool) error {
	seen := map[crypto.ID]bool{}
	for _, name := range names {
		data, err := rw.r.loadPack(ctx, name)
		if err != nil {
			return err
		}
		for _, e := range rw.r.packs[name].Entries {
			if !live[e.ID] || seen[e.ID] {
				continue
			}
			if _, err := pack.Blob(rw.r.keys, data, e); err != nil {
				return fmt.Errorf("pack %s: %w", name, err)
			}
			seen[e.ID] = true
			if rw.w == nil {
				rw.w = pack.NewWriter(rw.r.keys)
			}
			rw.w.AddSealed(e, data[e.Offset:e.Offset+e.Length])
			if rw.w.Size() >= pack.TargetSize {
				if err := rw.flush(ctx); err != nil {
					return err
				}
			}
		}
	}
	return rw.flush(ctx)
}

func (rw *repack) flush(ctx context.Context) error {
	if rw.w == nil {
		return nil
	}
	data, entries, err := rw.w.Finish()
	rw.w = nil
	if err != nil {
		return err
	}
	name := rw.r.keys.ObjectName(data)
	for l := range rw.targets {
		if rw.failed[l] == nil {
			if err := l.Backend.Save(ctx, packsDir+name, data); err != nil {
				rw.failed[l] = err
			}
		}
	}
	rw.r.packs[name] = &index.Pack{Name: name, Size: uint64(len(data)), Entries: entries}
	rw.fresh = append(rw.fresh, name)
	return nil
}

// collectIn commits l's new head (without the dropped manifests, with one
// segment for its remaining packs and the fresh ones), then deletes what
// that head does not need.
func (r *Repository) collectIn(ctx context.Context, l *location, drop, prune, gone map[string]bool, fresh []string) error {
	has := r.packsOf(l)
	keep := slices.Clone(fresh)
	changed := len(fresh) > 0
	for p := range has {
		if gone[p] {
			changed = true
		} else {
			keep = append(keep, p)
		}
	}
	slices.Sort(keep)
	h := &index.Head{Indexes: slices.Clone(l.head.Indexes)}
	for _, m := range l.head.Manifests {
		if !drop[m] {
			h.Manifests = append(h.Manifests, m)
		}
	}
	for _, m := range l.head.Deleted {
		if !prune[m] {
			h.Deleted = append(h.Deleted, m)
		}
	}
	for m := range drop {
		if !slices.Contains(h.Deleted, m) {
			h.Deleted = append(h.Deleted, m)
		}
	}
	slices.Sort(h.Deleted)
	if changed || len(h.Indexes) > 1 {
		h.Indexes = nil
		if len(keep) > 0 {
			seg := &index.Segment{}
			for _, p := range keep {
				seg.Packs = append(seg.Packs, *r.packs[p])
			}
			obj, name, err := r.sealObject(index.EncodeSegment(seg), segmentAD)
			if err != nil {
				return err
			}
			if err := l.Backend.Save(ctx, indexDir+name, obj); err != nil {
				return err
			}
			r.segments[name] = seg
			h.Indexes = []string{name}
		}
	}
	if err := r.commitHead(ctx, l, h); err != nil {
		return err
	}
	// Only now, with this commit the newest head and no head referring to
	// them, delete objects. A writer whose commit failed deletes nothing.
	infos, err := l.Backend.List(ctx, "")
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	keepPack := map[string]bool{}
	for _, p := range keep {
		keepPack[p] = true
	}
	for _, info := range infos {
		dir, base, _ := strings.Cut(info.Name, "/")
		var garbage bool
		switch dir + "/" {
		case packsDir:
			garbage = !keepPack[base]
		case indexDir:
			garbage = !slices.Contains(h.Indexes, base)
		case manifestsDir:
			garbage = !slices.Contains(h.Manifests, base)
		}
		if garbage {
			if err := l.Backend.Remove(ctx, info.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
