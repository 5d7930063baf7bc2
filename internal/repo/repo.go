// Package repo is the off-site checkpoint repository: it backs up a file
// tree into content-defined, deduplicated, compressed and encrypted chunks
// stored in packs at two locations, restores it, deletes checkpoints and
// collects garbage, verifies a location and repairs it from the other. The
// format is docs/repository-format.md; the pieces are in the subpackages
// (crypto, chunker, pack, manifest, index, backend).
//
// A Repository admits one writer: its methods serialise on a mutex, and the
// caller (the daemon) must not open the same account's repository twice.
package repo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/compress"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/index"
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
)

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
	head     *index.Head // nil: unknown (the location failed when read)
	headName string      // object holding head; "" if none
	err      error       // why head is nil
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
	found, wrongKey := 0, 0
	for _, l := range r.locs {
		switch n, err := r.readHead(ctx, l); {
		case errors.Is(err, ErrWrongKey):
			wrongKey++
			l.err = err
		case err != nil:
			l.err = err
		case n > 0:
			found++
		}
	}
	switch {
	case found == 0 && wrongKey > 0:
		return nil, ErrWrongKey
	case found == 0:
		for _, l := range r.locs {
			if l.err != nil {
				return nil, fmt.Errorf("open: %w", l.err)
			}
		}
		return nil, ErrNotInitialized
	}
	for _, l := range r.locs {
		if l.err == nil && l.head == nil {
			l.head, l.headName = &index.Head{}, ""
		}
	}
	if err := r.loadSegments(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// readHead loads the newest readable head of l into l.head and returns how
// many head objects exist.
func (r *Repository) readHead(ctx context.Context, l *location) (int, error) {
	l.head, l.headName = nil, ""
	infos, err := l.Backend.List(ctx, headsDir)
	if err != nil {
		return 0, fmt.Errorf("%s: list heads: %w", l.Name, err)
	}
	var lastErr error
	for _, info := range infos {
		h, err := r.loadHead(ctx, l.Backend, info.Name)
		if err != nil {
			lastErr = err
			continue
		}
		if l.head == nil || h.Generation > l.head.Generation {
			l.head, l.headName = h, info.Name
		}
	}
	if len(infos) > 0 && l.head == nil {
		if errors.Is(lastErr, crypto.ErrAuth) {
			return len(infos), fmt.Errorf("%s: %w", l.Name, ErrWrongKey)
		}
		return len(infos), fmt.Errorf("%s: no readable head: %w", l.Name, lastErr)
	}
	return len(infos), nil
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

// commitHead writes h as l's next head (the commit point), then removes
// l's older heads.
func (r *Repository) commitHead(ctx context.Context, l *location, h *index.Head) error {
	gen := uint64(0)
	if l.head != nil {
		gen = l.head.Generation
	}
	h.Generation = gen + 1
	obj, _, err := r.sealObject(index.EncodeHead(h), headAD)
	if err != nil {
		return err
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	name := headsDir + hex.EncodeToString(rnd[:])
	if err := l.Backend.Save(ctx, name, obj); err != nil {
		return fmt.Errorf("commit head: %w", err)
	}
	l.head, l.headName, l.err = h, name, nil
	r.removeOldHeads(ctx, l)
	return nil
}

// removeOldHeads deletes l's heads other than the current one. It is best
// effort: a leftover older head is harmless (readers take the newest) and
// the next commit tries again.
func (r *Repository) removeOldHeads(ctx context.Context, l *location) {
	infos, err := l.Backend.List(ctx, headsDir)
	if err != nil {
		return
	}
	for _, info := range infos {
		if info.Name != l.headName {
			_ = l.Backend.Remove(ctx, info.Name)
		}
	}
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

// Unavailable returns, per location name, why its head could not be read
// when the repository was opened; such a location takes no writes until a
// Repair of it succeeds. nil when every location was read.
func (r *Repository) Unavailable() map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]error{}
	for _, l := range r.locs {
		if l.head == nil {
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
	return nil, fmt.Errorf("manifest %s: %w", ref.ID, errors.Join(errs...))
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
	return nil, fmt.Errorf("pack %s: %w", name, errors.Join(errs...))
}
