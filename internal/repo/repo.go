// Package repo is the off-site checkpoint repository: it backs up a file
// tree into content-defined, deduplicated, compressed and encrypted chunks
// stored in packs at two locations, restores it, deletes checkpoints and
// collects garbage, verifies a location and repairs it from the other. The
// format is docs/repository-format.md; the pieces are in the subpackages
// (crypto, chunker, pack, manifest, index, backend).
//
// A Repository admits one writer: its methods serialise on a mutex, and the
// caller (the daemon) must not open the same account's repository twice.
// A writer that is stale all the same (another host wrote since it read a
// location's head) is fenced: heads are created under their generation's
// name only if that name is free, so its commit there fails with ErrConflict
// and it deletes nothing. Reload brings it up to date.
package repo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/compress"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/index"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/repo/pack"
)

// Object name prefixes.
const (
	packsDir     = "packs/"
	indexDir     = "index/"
	manifestsDir = "manifests/"
	headsDir     = "heads/"
	keysDir      = "keys/"
)

// Limits on decoded metadata, against hostile or damaged objects.
const (
	maxManifest = 1 << 30
	maxSegment  = 1 << 30
	maxHead     = 64 << 20
)

var (
	manifestAD = []byte("cairn/v1/manifest")
	segmentAD  = []byte("cairn/v1/index")
	headAD     = []byte("cairn/v1/head")
)

var (
	// ErrNotInitialized means no location holds a repository.
	ErrNotInitialized = errors.New("repository not initialized")
	// ErrExists means Init found a repository already there.
	ErrExists = errors.New("repository already initialized")
	// ErrWrongKey means the repository's heads do not open with the key given.
	ErrWrongKey = errors.New("wrong key for this repository")
	// ErrUnknownManifest means no location lists the manifest.
	ErrUnknownManifest = errors.New("no such manifest")
	// ErrConflict means a location's head changed since this Repository read
	// it: another writer committed there. Nothing was committed or deleted in
	// that location; Reload reads the current state.
	ErrConflict = errors.New("another writer changed the repository; reopen it")
	// ErrUnreachable means an object could not be read because a location
	// failed to answer (unreachable, a server error, a cut answer), not
	// because every copy is damaged or missing: trying again may succeed.
	ErrUnreachable = errors.New("a location failed to answer")
)

// readFailure is the error of an object that no location gave intact:
// each location's error, and ErrUnreachable among them unless each says
// the copy is damaged (crypto.ErrAuth) or missing.
func readFailure(what string, errs []error) error {
	for _, err := range errs {
		if !errors.Is(err, crypto.ErrAuth) && !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("%s: %w: %w", what, ErrUnreachable, errors.Join(errs...))
		}
	}
	return fmt.Errorf("%s: %w", what, errors.Join(errs...))
}

// Location is one of an account's object stores.
type Location struct {
	Name    string // as the user knows it, e.g. "primary"
	Backend backend.Backend
}

// ManifestRef names one checkpoint's manifest. The daemon stores it with
// the checkpoint.
type ManifestRef struct {
	ID string // 64 hex digits: the manifest's object name
}

func (r ManifestRef) object() string { return manifestsDir + r.ID }

// Repository is an open repository over its locations.
type Repository struct {
	mu   sync.Mutex
	keys *crypto.Keys
	locs []*location

	segments map[string]*index.Segment // every segment some head lists
	blobs    map[crypto.ID]blobRef     // every blob of those segments
	packs    map[string]*index.Pack    // every pack of those segments
}

type location struct {
	Location
	head     *index.Head // the newest head read or committed; nil if never read
	headName string      // object holding head; "" if none
	gen      uint64      // the highest generation of a head seen there: the next commit is gen+1
	// err, if not nil, is why the location takes no writes: it could not be
	// read, a write to it failed, or another writer committed there
	// (ErrConflict). Reload or a successful Repair clears it.
	err error
}

// fail records the first error that makes l unusable for writes.
func (l *location) fail(err error) {
	if l.err == nil {
		l.err = err
	}
}

// failUnlessCanceled is fail, except for an error that ctx's end caused: a
// canceled save is no fault of the location.
func (l *location) failUnlessCanceled(ctx context.Context, err error) {
	if ctx.Err() == nil {
		l.fail(err)
	}
}

type blobRef struct {
	pack  string
	entry pack.Entry
}

// Init creates an empty repository in every location and opens it. It fails
// with ErrExists if any location already holds one.
func Init(ctx context.Context, key *crypto.Key, locs ...Location) (*Repository, error) {
	keys, err := key.Derive()
	if err != nil {
		return nil, err
	}
	if len(locs) == 0 {
		return nil, errors.New("init: no location")
	}
	for _, l := range locs {
		heads, err := l.Backend.List(ctx, headsDir)
		if err != nil {
			return nil, fmt.Errorf("init %s: %w", l.Name, err)
		}
		if len(heads) > 0 {
			return nil, fmt.Errorf("init %s: %w", l.Name, ErrExists)
		}
	}
	r := newRepository(keys, locs)
	for _, l := range r.locs {
		l.head = &index.Head{}
		if err := r.commitHead(ctx, l, &index.Head{}); err != nil {
			return nil, fmt.Errorf("init %s: %w", l.Name, err)
		}
	}
	return r, nil
}

func newRepository(keys *crypto.Keys, locs []Location) *Repository {
	r := &Repository{keys: keys, segments: map[string]*index.Segment{}, blobs: map[crypto.ID]blobRef{}, packs: map[string]*index.Pack{}}
	for _, l := range locs {
		r.locs = append(r.locs, &location{Location: l})
	}
	return r
}

// Open opens the repository in locs with the account's master key. A
// location that cannot be read is remembered as such (see Unavailable); Open
// fails only if none can be read, if none holds a repository
// (ErrNotInitialized), or if the key opens no head (ErrWrongKey). A location
// that holds no repository yet (a new second location) counts as empty and
// is filled by Repair.
func Open(ctx context.Context, key *crypto.Key, locs ...Location) (*Repository, error) {
	keys, err := key.Derive()
	if err != nil {
		return nil, err
	}
	if len(locs) == 0 {
		return nil, errors.New("open: no location")
	}
	r := newRepository(keys, locs)
	if err := r.load(ctx); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return r, nil
}

// Reload reads every location's head and the index segments again, as Open
// does: a location that could not be read (at Open, at an earlier Reload) or
// that failed a write since is usable again if it answers now, and a writer
// that got ErrConflict continues from the current state. Unavailable then
// lists the locations that still cannot be read. Reload fails for the
// reasons Open does; the Repository keeps what it knew of a location it
// cannot read.
func (r *Repository) Reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(ctx); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	return nil
}

// load reads every location's head, then the segments they list.
func (r *Repository) load(ctx context.Context) error {
	found, wrongKey := 0, 0
	for _, l := range r.locs {
		switch n, err := r.readHead(ctx, l); {
		case errors.Is(err, ErrWrongKey):
			wrongKey++
		case err != nil:
		case n > 0:
			found++
		}
	}
	switch {
	case found == 0 && wrongKey > 0:
		return ErrWrongKey
	case found == 0:
		for _, l := range r.locs {
			if l.err != nil {
				return l.err
			}
		}
		return ErrNotInitialized
	}
	return r.loadSegments(ctx)
}

// readHead reads l's heads and returns how many exist. On success l.head is
// the newest readable one (empty if there is none) and l.err is cleared; on
// failure l.err says why and l keeps what it knew.
func (r *Repository) readHead(ctx context.Context, l *location) (int, error) {
	s, err := r.scanHeads(ctx, l.Backend)
	switch {
	case err != nil:
		err = fmt.Errorf("%s: list heads: %w", l.Name, err)
	case len(s.infos) > 0 && s.head == nil && errors.Is(s.lastErr, crypto.ErrAuth):
		err = fmt.Errorf("%s: %w", l.Name, ErrWrongKey)
	case len(s.infos) > 0 && s.head == nil:
		err = fmt.Errorf("%s: no readable head: %w", l.Name, s.lastErr)
	}
	if err != nil {
		l.err = err
		return len(s.infos), err
	}
	l.head, l.headName, l.gen, l.err = s.head, s.name, s.gen, nil
	if l.head == nil {
		l.head = &index.Head{}
	}
	return len(s.infos), nil
}

// headScan is what scanHeads found in a location.
type headScan struct {
	infos   []backend.Info
	head    *index.Head      // the readable head with the highest generation; nil if none
	name    string           // its object name
	gen     uint64           // the highest generation any head has, by name or content
	bad     map[string]error // heads that do not open, and why
	lastErr error            // one of them
}

// scanHeads lists and opens every head in b. A head that does not open
// still counts towards gen through its name, so that the next commit takes a
// generation above it (and readers, who take the newest head they can
// open, then take that commit).
func (r *Repository) scanHeads(ctx context.Context, b backend.Backend) (headScan, error) {
	var s headScan
	var err error
	if s.infos, err = b.List(ctx, headsDir); err != nil {
		return s, err
	}
	for _, info := range s.infos {
		if g, ok := headGeneration(info.Name); ok {
			s.gen = max(s.gen, g)
		}
		h, err := r.loadHead(ctx, b, info.Name)
		if err != nil {
			if s.bad == nil {
				s.bad = map[string]error{}
			}
			s.bad[info.Name], s.lastErr = err, err
			continue
		}
		s.gen = max(s.gen, h.Generation)
		if s.head == nil || h.Generation > s.head.Generation {
			s.head, s.name = h, info.Name
		}
	}
	return s, nil
}

// headName is the name of the head of generation gen: fixed-width hex, so
// that names sort by generation.
func headName(gen uint64) string { return fmt.Sprintf("%s%016x", headsDir, gen) }

// headGeneration parses a name made by headName. Heads written before heads
// were named by generation have 32 random hex digits and do not parse.
func headGeneration(name string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, headsDir)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	g, err := strconv.ParseUint(hex, 16, 64)
	return g, err == nil
}

func (r *Repository) loadHead(ctx context.Context, b backend.Backend, name string) (*index.Head, error) {
	plain, err := r.loadSealed(ctx, b, name, headAD, maxHead, false)
	if err != nil {
		return nil, err
	}
	return index.DecodeHead(plain)
}

// loadSegments reads every segment some head lists (from any location that
// lists it) and rebuilds the blob and pack maps.
func (r *Repository) loadSegments(ctx context.Context) error {
	want := map[string]bool{}
	for _, l := range r.locs {
		if l.head == nil {
			continue
		}
		for _, s := range l.head.Indexes {
			want[s] = true
			if r.segments[s] != nil {
				continue
			}
			seg, err := r.loadSegment(ctx, l.Backend, s)
			if err != nil {
				continue // another location may have it; checked below
			}
			r.segments[s] = seg
		}
	}
	for s := range want {
		if r.segments[s] != nil {
			continue
		}
		var err error
		for _, l := range r.locs {
			var seg *index.Segment
			if seg, err = r.loadSegment(ctx, l.Backend, s); err == nil {
				r.segments[s] = seg
				break
			}
		}
		if r.segments[s] == nil {
			r.rebuild()
			return fmt.Errorf("index segment %s is unreadable in every location: %w", s, err)
		}
	}
	for s := range r.segments {
		if !want[s] {
			delete(r.segments, s)
		}
	}
	r.rebuild()
	return nil
}

func (r *Repository) loadSegment(ctx context.Context, b backend.Backend, name string) (*index.Segment, error) {
	plain, err := r.loadSealed(ctx, b, indexDir+name, segmentAD, maxSegment, true)
	if err != nil {
		return nil, err
	}
	return index.DecodeSegment(plain)
}

// rebuild recomputes the blob and pack maps from the segments.
func (r *Repository) rebuild() {
	r.blobs = map[crypto.ID]blobRef{}
	r.packs = map[string]*index.Pack{}
	for _, seg := range r.segments {
		for i := range seg.Packs {
			p := &seg.Packs[i]
			r.packs[p.Name] = p
			for _, e := range p.Entries {
				r.blobs[e.ID] = blobRef{pack: p.Name, entry: e}
			}
		}
	}
}

// packsOf returns the packs a location's head describes.
func (r *Repository) packsOf(l *location) map[string]bool {
	out := map[string]bool{}
	for _, s := range l.head.Indexes {
		if seg := r.segments[s]; seg != nil {
			for _, p := range seg.Packs {
				out[p.Name] = true
			}
		}
	}
	return out
}

// sealObject compresses (if asked) and seals plaintext; it returns the
// object and its content name.
func (r *Repository) sealObject(plain, ad []byte) ([]byte, string, error) {
	obj, err := r.keys.SealMeta(compress.Encode(plain), ad)
	if err != nil {
		return nil, "", err
	}
	return obj, r.keys.ObjectName(obj), nil
}

// loadSealed loads, checks (content name, if named) and opens an object.
func (r *Repository) loadSealed(ctx context.Context, b backend.Backend, name string, ad []byte, limit int, named bool) ([]byte, error) {
	obj, err := b.Load(ctx, name)
	if err != nil {
		return nil, err
	}
	if named && r.keys.ObjectName(obj) != name[strings.LastIndexByte(name, '/')+1:] {
		return nil, fmt.Errorf("%s: %w: content does not match its name", name, crypto.ErrAuth)
	}
	body, err := r.keys.OpenMeta(obj, ad)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	plain, err := compress.Decode(body, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return plain, nil
}

// commitHead commits h as l's next head: it creates the head of generation
// l.gen+1, which fails if that name is taken, then lists l's heads, since a
// higher generation may exist (another writer committed twice and removed
// the older heads). Either way another writer committed since l was read:
// the commit fails with ErrConflict, and the head just created, if any, is
// an older one that readers ignore and the next commit removes. Only a head
// that is the newest is a commit; then l's older heads are removed.
//
// A failure marks l (see location.err): after an error from Create, whether
// the head landed is unknown until l is read again.
// commitCheckWait bounds the look for a newer head that commitHead does
// again when a cancel cut the first one short.
const commitCheckWait = 15 * time.Second

func (r *Repository) commitHead(ctx context.Context, l *location, h *index.Head) error {
	h.Generation = l.gen + 1
	obj, _, err := r.sealObject(index.EncodeHead(h), headAD)
	if err != nil {
		return err
	}
	name := headName(h.Generation)
	err = l.Backend.Create(ctx, name, obj)
	if errors.Is(err, backend.ErrExists) {
		err = fmt.Errorf("commit head: generation %d exists: %w", h.Generation, ErrConflict)
	}
	// A commit that ctx's end cut short fails no location: its head was
	// written or not, and the next commit or reload finds out which.
	if errors.Is(err, ErrConflict) {
		l.fail(err)
		return fmt.Errorf("commit head: %w", err)
	}
	if err != nil {
		l.failUnlessCanceled(ctx, err)
		return fmt.Errorf("commit head: %w", err)
	}
	infos, err := l.Backend.List(ctx, headsDir)
	if err != nil && ctx.Err() != nil {
		// The head is written (Create succeeded, and only one Create of a
		// name does); the look for a newer one, which fences a stale
		// writer, was cut short: it is done again past the cancel, for a
		// bounded time, so that a head is never claimed unchecked.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitCheckWait)
		infos, err = l.Backend.List(lctx, headsDir)
		cancel()
		if err != nil {
			return fmt.Errorf("commit head: %w", err) // not a fault of the location's
		}
	}
	if err != nil {
		l.fail(fmt.Errorf("commit head: %w", err))
		return fmt.Errorf("commit head: %w", err)
	}
	for _, info := range infos {
		if g, ok := headGeneration(info.Name); ok && g > h.Generation {
			err := fmt.Errorf("commit head: generation %d exists: %w", g, ErrConflict)
			l.fail(err)
			return err
		}
	}
	l.head, l.headName, l.gen, l.err = h, name, h.Generation, nil
	// Best effort: a leftover older head is harmless (readers take the
	// newest) and the next commit tries again.
	for _, info := range infos {
		if info.Name != name {
			_ = l.Backend.Remove(ctx, info.Name)
		}
	}
	return nil
}

// manifestNames returns the account's checkpoints: every manifest some head
// lists, less every tombstone.
func (r *Repository) manifestNames() []string {
	deleted := map[string]bool{}
	for _, l := range r.locs {
		if l.head != nil {
			for _, m := range l.head.Deleted {
				deleted[m] = true
			}
		}
	}
	var out []string
	for _, l := range r.locs {
		if l.head != nil {
			for _, m := range l.head.Manifests {
				if !deleted[m] && !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// List returns the account's checkpoints, in no meaningful order.
func (r *Repository) List() []ManifestRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ManifestRef
	for _, m := range r.manifestNames() {
		out = append(out, ManifestRef{ID: m})
	}
	return out
}

// Holders returns the names of the locations that hold ref entirely (whose
// head lists it). A checkpoint is off-site when every location holds it.
func (r *Repository) Holders(ref ManifestRef) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.locs {
		if l.head != nil && slices.Contains(l.head.Manifests, ref.ID) && !slices.Contains(l.head.Deleted, ref.ID) {
			out = append(out, l.Name)
		}
	}
	return out
}

// MissedDelete reports whether the named location's head still lists a
// checkpoint that another location's head records as deleted: a Delete or
// GC cut short (a crash) after one location committed its new head and
// before the other did. The merged view (List) no longer shows that
// checkpoint, so only a Repair of the location, then a GC, brings it up to
// date and frees there what the delete freed in the other.
func (r *Repository) MissedDelete(location string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	deleted := map[string]bool{}
	for _, l := range r.locs {
		if l.head != nil {
			for _, m := range l.head.Deleted {
				deleted[m] = true
			}
		}
	}
	for _, l := range r.locs {
		if l.Name == location && l.head != nil {
			return slices.ContainsFunc(l.head.Manifests, func(m string) bool { return deleted[m] })
		}
	}
	return false
}

// Unavailable returns, per location name, why the location takes no
// writes: its head could not be read (at Open or Reload), a write to it
// failed, or another writer committed there (ErrConflict). Such a location
// is left out of Backup, Delete and GC until Reload reads it again or a
// Repair of it succeeds. nil when every location is usable.
func (r *Repository) Unavailable() map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]error{}
	for _, l := range r.locs {
		if l.err != nil {
			out[l.Name] = l.err
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (r *Repository) location(name string) (*location, error) {
	for _, l := range r.locs {
		if l.Name == name {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no location named %q", name)
}

// ManifestInfo is what a manifest says of its checkpoint besides the tree.
type ManifestInfo struct {
	Created time.Time // when the backup was made
	Meta    []byte    // BackupOptions.Meta; nil if none was given
	// Memory says the manifest holds a memory image (BackupOptions.MemoryDir).
	Memory bool
	// DiskBytes and MemoryBytes are the data the disk's tree and the
	// memory image hold (regular files, less their holes): what a
	// restore of each writes.
	DiskBytes, MemoryBytes int64
}

// Info reads the manifest of ref (authenticated, from the first location
// with an intact copy) and returns when it was made and its Meta.
func (r *Repository) Info(ctx context.Context, ref ManifestRef) (ManifestInfo, error) {
	plain, err := r.loadManifest(ctx, ref)
	if err != nil {
		return ManifestInfo{}, err
	}
	m, err := manifest.Decode(plain)
	if err != nil {
		return ManifestInfo{}, fmt.Errorf("manifest %s: %w", ref.ID, err)
	}
	return ManifestInfo{Created: time.Unix(0, m.Created), Meta: m.Meta, Memory: len(m.Memory) > 0,
		DiskBytes: dataBytes(m.Nodes), MemoryBytes: dataBytes(m.Memory)}, nil
}

// dataBytes is the data of a tree's regular files.
func dataBytes(nodes []manifest.Node) int64 {
	var n int64
	for i := range nodes {
		n += int64(nodes[i].DataSize())
	}
	return n
}

// loadManifest returns the checked and decrypted plaintext of a manifest
// from the first location that has an intact copy.
func (r *Repository) loadManifest(ctx context.Context, ref ManifestRef) ([]byte, error) {
	if !index.ValidName(ref.ID) {
		return nil, fmt.Errorf("manifest %q: %w", ref.ID, ErrUnknownManifest)
	}
	var errs []error
	for _, l := range r.locs {
		plain, err := r.loadSealed(ctx, l.Backend, ref.object(), manifestAD, maxManifest, true)
		if err == nil {
			return plain, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", l.Name, err))
	}
	return nil, readFailure("manifest "+ref.ID, errs)
}

// loadPack returns a pack from the first location whose copy matches its
// name.
func (r *Repository) loadPack(ctx context.Context, name string) ([]byte, error) {
	var errs []error
	for _, l := range r.locs {
		p, err := l.Backend.Load(ctx, packsDir+name)
		if err == nil && r.keys.ObjectName(p) != name {
			err = fmt.Errorf("%w: content does not match its name", crypto.ErrAuth)
		}
		if err == nil {
			return p, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", l.Name, err))
	}
	return nil, readFailure("pack "+name, errs)
}
