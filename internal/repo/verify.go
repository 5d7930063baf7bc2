package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/index"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/repo/pack"
)

// Report is what Verify or Repair found in one location.
type Report struct {
	Location string
	Objects  int      // objects read back and checked
	Bytes    int64    // their bytes
	Missing  []string // objects the head needs that are absent
	Damaged  []string // objects that fail authentication, their name check or decoding
	Problems []string // one line per finding, for people
	Repaired []string // objects Repair copied in from another location
}

// OK reports whether the location was found intact.
func (rep *Report) OK() bool { return len(rep.Problems) == 0 }

func (rep *Report) problem(kind *[]string, name string, err error) {
	if kind != nil && !slices.Contains(*kind, name) {
		*kind = append(*kind, name)
	}
	rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", name, err))
}

// record files name under Missing or Damaged by the kind of err.
func (rep *Report) record(name string, err error) {
	if errors.Is(err, backend.ErrNotFound) {
		rep.problem(&rep.Missing, name, err)
	} else {
		rep.problem(&rep.Damaged, name, err)
	}
}

// Verify reads back everything the named location's head refers to and
// checks it: every head, index segment and manifest is authenticated and
// decoded; every pack is hashed against its name, its index authenticated
// and compared with the segments, every blob authenticated, decompressed and
// checked against its id; every chunk a manifest needs must be in an intact
// pack. The error is for failures to run (the location unreachable); what is
// wrong with the data is in the Report.
func (r *Repository) Verify(ctx context.Context, location string) (*Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := r.location(location)
	if err != nil {
		return nil, err
	}
	rep, _, err := r.verify(ctx, l)
	return rep, err
}

// verify checks l and also returns what it found of its heads.
func (r *Repository) verify(ctx context.Context, l *location) (*Report, headScan, error) {
	rep := &Report{Location: l.Name}
	s, err := r.scanHeads(ctx, l.Backend)
	if err != nil {
		return nil, s, fmt.Errorf("verify %s: %w", l.Name, err)
	}
	for _, info := range s.infos {
		rep.Objects++
		rep.Bytes += info.Size
		if err := s.bad[info.Name]; err != nil {
			rep.record(info.Name, err)
		}
	}
	head := s.head
	if head == nil {
		rep.problem(&rep.Missing, headsDir, errors.New("no readable head"))
		return rep, s, nil
	}
	need := map[crypto.ID]string{} // chunk → a manifest needing it
	for _, m := range head.Manifests {
		plain, err := r.loadSealed(ctx, l.Backend, manifestsDir+m, manifestAD, maxManifest, true)
		rep.Objects++
		if err == nil {
			rep.Bytes += int64(len(plain))
			var mf *manifest.Manifest
			if mf, err = manifest.Decode(plain); err == nil {
				mf.EachChunk(func(c manifest.Chunk) { need[c.ID] = m })
			}
		}
		if err != nil {
			rep.record(manifestsDir+m, err)
		}
	}
	have := map[crypto.ID]bool{}
	for _, s := range head.Indexes {
		seg, err := r.loadSegment(ctx, l.Backend, s)
		rep.Objects++
		if err != nil {
			rep.record(indexDir+s, err)
			continue
		}
		for _, p := range seg.Packs {
			if err := r.verifyPack(ctx, l.Backend, p, rep); err != nil {
				rep.record(packsDir+p.Name, err)
				continue
			}
			for _, e := range p.Entries {
				have[e.ID] = true
			}
		}
	}
	for id, m := range need {
		if !have[id] {
			rep.problem(nil, manifestsDir+m, fmt.Errorf("chunk %s is in no intact pack", id))
		}
	}
	return rep, s, nil
}

func (r *Repository) verifyPack(ctx context.Context, b backend.Backend, p index.Pack, rep *Report) error {
	data, err := b.Load(ctx, packsDir+p.Name)
	if err != nil {
		return err
	}
	rep.Objects++
	rep.Bytes += int64(len(data))
	if r.keys.ObjectName(data) != p.Name {
		return fmt.Errorf("%w: content does not match its name", crypto.ErrAuth)
	}
	entries, err := pack.ReadIndex(r.keys, data)
	if err != nil {
		return err
	}
	if !slices.Equal(entries, p.Entries) || uint64(len(data)) != p.Size {
		return errors.New("pack index disagrees with the index segment")
	}
	for _, e := range entries {
		if _, err := pack.Blob(r.keys, data, e); err != nil {
			return err
		}
	}
	return nil
}

// Repair makes the named location hold, intact, everything the account's
// checkpoints need: it verifies the location, copies every missing or
// damaged object, and every object it lacks (a checkpoint it missed while
// down), from another location after checking each copy against its name,
// then commits a head listing every checkpoint. Deleted checkpoints stay
// deleted. After a successful Repair the location holds every checkpoint
// and takes writes again.
//
// The new head builds on the location's head as this Repository last read
// it, so if another writer committed there since, Repair fails with
// ErrConflict (Reload, then repair again). A location never read (it could
// not be reached at Open or Reload) is read here.
func (r *Repository) Repair(ctx context.Context, location string) (*Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, err := r.location(location)
	if err != nil {
		return nil, err
	}
	rep, scan, err := r.verify(ctx, l)
	if err != nil {
		return nil, err
	}
	if l.head == nil {
		// Keep what it holds that the other locations may not list.
		l.head, l.headName, l.gen = scan.head, scan.name, scan.gen
		if l.head == nil {
			l.head = &index.Head{}
		}
		if err := r.loadSegments(ctx); err != nil {
			return rep, fmt.Errorf("repair %s: %w", l.Name, err)
		}
	}
	bad := map[string]bool{}
	for _, n := range append(slices.Clone(rep.Missing), rep.Damaged...) {
		bad[n] = true
	}
	infos, err := l.Backend.List(ctx, "")
	if err != nil {
		return rep, fmt.Errorf("repair %s: %w", l.Name, err)
	}
	present := map[string]bool{}
	for _, i := range infos {
		present[i.Name] = !bad[i.Name]
	}
	h := &index.Head{Manifests: r.manifestNames()}
	for _, o := range r.locs {
		if o.head == nil {
			continue
		}
		for _, m := range o.head.Deleted {
			if !slices.Contains(h.Deleted, m) {
				h.Deleted = append(h.Deleted, m)
			}
		}
		for _, s := range o.head.Indexes {
			if !slices.Contains(h.Indexes, s) {
				h.Indexes = append(h.Indexes, s)
			}
		}
	}
	var needed []string
	for _, s := range h.Indexes {
		seg := r.segments[s]
		if seg == nil {
			return rep, fmt.Errorf("repair %s: index segment %s is unreadable", l.Name, s)
		}
		needed = append(needed, indexDir+s)
		for _, p := range seg.Packs {
			needed = append(needed, packsDir+p.Name)
		}
	}
	for _, m := range h.Manifests {
		needed = append(needed, manifestsDir+m)
	}
	for _, name := range needed {
		if present[name] {
			continue
		}
		if err := r.copyIn(ctx, l, name); err != nil {
			return rep, fmt.Errorf("repair %s: %w", l.Name, err)
		}
		present[name] = true
		rep.Repaired = append(rep.Repaired, name)
	}
	if err := r.commitHead(ctx, l, h); err != nil {
		return rep, fmt.Errorf("repair %s: %w", l.Name, err)
	}
	return rep, nil
}

// copyIn copies a content-named object into l from the first other
// location whose copy matches its name.
func (r *Repository) copyIn(ctx context.Context, l *location, name string) error {
	base := name[len(name)-64:]
	var errs []error
	for _, o := range r.locs {
		if o == l {
			continue
		}
		data, err := o.Backend.Load(ctx, name)
		if err == nil && r.keys.ObjectName(data) != base {
			err = fmt.Errorf("%w: content does not match its name", crypto.ErrAuth)
		}
		if err == nil {
			return l.Backend.Save(ctx, name, data)
		}
		errs = append(errs, fmt.Errorf("%s: %w", o.Name, err))
	}
	return fmt.Errorf("no intact copy of %s: %w", name, errors.Join(errs...))
}
