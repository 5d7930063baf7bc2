package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo/chunker"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/index"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/repo/pack"
)

// uploadsInFlight bounds the packs held in memory while they upload.
const uploadsInFlight = 2

// Stats says what a backup did.
type Stats struct {
	Files         int   // regular files in the tree (hard links counted once)
	FilesRead     int   // files read; the others reused the parent's chunk lists unread
	BytesRead     int64 // bytes read from files
	ChunksNew     int   // chunks packed and uploaded
	ChunksReused  int   // chunks already stored (or already packed by this backup)
	Packs         int   // new packs
	BytesUploaded int64 // bytes saved, summed over locations
	// Failed names the locations that did not commit the checkpoint, and
	// why (ErrConflict if another writer committed there since it was
	// read). Repair brings them up to date.
	Failed map[string]error
}

// progressEvery is the shortest interval between two progress reports.
const progressEvery = 100 * time.Millisecond

// BackupOptions are the optional parts of a Backup.
type BackupOptions struct {
	// Parent is a manifest of an earlier checkpoint of the same tree: regular
	// files whose size, mtime, ctime and inode are unchanged reuse its chunk
	// lists without being read.
	Parent *ManifestRef
	// Progress, if not nil, is called with the running Stats at most every
	// progressEvery while the backup runs, and once more at the end. Calls
	// never overlap; Progress must not call the Repository.
	Progress func(Stats)
}

// Backup stores the tree at srcDir as a new checkpoint and returns its
// manifest. Only chunks not yet stored are uploaded. The checkpoint is
// committed in every location that takes all of it; the others are listed
// in Stats.Failed, and a location that failed during this backup is left
// out of later writes (see Unavailable). A location where another writer
// committed since it was read fails like that with an error wrapping
// ErrConflict. Backup fails only if no location commits (then its error
// wraps each location's, ErrConflict included), leaving every location as
// it was apart from unreferenced objects that GC removes.
func (r *Repository) Backup(ctx context.Context, srcDir string, opts BackupOptions) (ManifestRef, Stats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &backupRun{r: r, ctx: ctx, failed: map[*location]error{}, pending: map[crypto.ID]bool{},
		uploaded: map[*location]map[string]bool{}, sem: make(chan struct{}, uploadsInFlight), progress: opts.Progress}
	ref, err := b.run(srcDir, opts.Parent)
	for l, e := range b.failed {
		l.failUnlessCanceled(ctx, e)
	}
	if b.progress != nil {
		b.progress(b.snapshot())
	}
	return ref, b.snapshot(), err
}

func (b *backupRun) run(srcDir string, parent *ManifestRef) (ManifestRef, error) {
	r, ctx := b.r, b.ctx
	for _, l := range r.locs {
		if l.err != nil {
			b.failed[l] = fmt.Errorf("location unavailable: %w", l.err)
			continue
		}
		b.live = append(b.live, l)
		b.uploaded[l] = map[string]bool{}
	}
	if len(b.live) == 0 {
		return ManifestRef{}, fmt.Errorf("backup: no location available: %w", b.failures())
	}
	b.held = r.packsOf(b.live[0])
	for _, l := range b.live[1:] {
		lp := r.packsOf(l)
		for p := range b.held {
			if !lp[p] {
				delete(b.held, p)
			}
		}
	}
	if parent != nil {
		plain, err := r.loadManifest(ctx, *parent)
		if err != nil {
			return ManifestRef{}, fmt.Errorf("backup: parent: %w", err)
		}
		pm, err := manifest.Decode(plain)
		if err != nil {
			return ManifestRef{}, fmt.Errorf("backup: parent: %w", err)
		}
		b.parent = map[string]*manifest.Node{}
		for i := range pm.Nodes {
			if pm.Nodes[i].Type == manifest.File {
				b.parent[pm.Nodes[i].Path] = &pm.Nodes[i]
			}
		}
	}
	m := &manifest.Manifest{Created: time.Now().UnixNano()}
	err := b.walk(srcDir, m)
	if err == nil {
		err = b.flush()
	}
	b.wg.Wait()
	if err == nil {
		err = b.uploadErr()
	}
	if err != nil {
		return ManifestRef{}, fmt.Errorf("backup %s: %w", srcDir, err)
	}
	ref, err := b.commit(m)
	if err != nil {
		return ManifestRef{}, fmt.Errorf("backup %s: %w", srcDir, err)
	}
	return ref, nil
}

// snapshot returns the running stats with the failed locations so far.
func (b *backupRun) snapshot() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.stats
	if len(b.failed) > 0 {
		st.Failed = map[string]error{}
		for l, e := range b.failed {
			st.Failed[l.Name] = e
		}
	}
	return st
}

// report calls the progress function if progressEvery has passed since the
// last call. Only the goroutine running Backup calls it.
func (b *backupRun) report() {
	if b.progress == nil || time.Since(b.lastProgress) < progressEvery {
		return
	}
	b.lastProgress = time.Now()
	b.progress(b.snapshot())
}

// backupRun is the state of one Backup.
type backupRun struct {
	r      *Repository
	ctx    context.Context
	parent map[string]*manifest.Node // regular files of the parent manifest
	held   map[string]bool           // packs every live location holds
	stats  Stats

	progress     func(Stats)
	lastProgress time.Time

	writer   *pack.Writer
	pending  map[crypto.ID]bool // blobs packed by this backup
	newPacks []index.Pack

	wg       sync.WaitGroup
	sem      chan struct{}
	mu       sync.Mutex // guards what uploads change below
	live     []*location
	failed   map[*location]error
	uploaded map[*location]map[string]bool
}

func (b *backupRun) walk(src string, m *manifest.Manifest) error {
	links := map[[2]uint64]string{}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := b.ctx.Err(); err != nil {
			return err
		}
		if err := b.uploadErr(); err != nil {
			return err
		}
		b.report()
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		n, st, err := statNode(p, filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if p == src && n.Type != manifest.Dir {
			return fmt.Errorf("%s is not a directory", src)
		}
		if n.Type == manifest.File {
			if st.Nlink > 1 {
				key := [2]uint64{st.Dev, st.Ino}
				if first, ok := links[key]; ok {
					m.Nodes = append(m.Nodes, manifest.Node{Path: n.Path, Type: manifest.Hardlink, Target: first})
					return nil
				}
				links[key] = n.Path
			}
			b.stats.Files++
			if err := b.file(p, &n); err != nil {
				return err
			}
		}
		m.Nodes = append(m.Nodes, n)
		return nil
	})
}

// file fills in the extents and chunks of a regular file, reusing the
// parent's when the file is unchanged and its chunks are stored.
func (b *backupRun) file(p string, n *manifest.Node) error {
	if old := b.parent[n.Path]; old != nil && old.Size == n.Size && old.Mtime == n.Mtime &&
		old.Ctime == n.Ctime && old.Inode == n.Inode && b.allKnown(old.Chunks) {
		n.Extents, n.Chunks = old.Extents, old.Chunks
		b.stats.ChunksReused += len(old.Chunks)
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	ext, err := dataExtents(f, int64(n.Size))
	if err != nil {
		return err
	}
	c, err := chunker.New(extentReader(f, ext), b.r.keys.ChunkerKey())
	if err != nil {
		return err
	}
	var read uint64
	for {
		chunk, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		read += uint64(len(chunk))
		b.stats.BytesRead += int64(len(chunk))
		b.report()
		id := b.r.keys.ChunkID(chunk)
		n.Chunks = append(n.Chunks, manifest.Chunk{ID: id, Length: uint32(len(chunk))})
		if b.known(id) {
			b.stats.ChunksReused++
			continue
		}
		if err := b.add(id, chunk); err != nil {
			return err
		}
	}
	n.Extents = ext
	if read != n.DataSize() {
		return fmt.Errorf("%s changed while it was read (%d bytes read, %d expected)", p, read, n.DataSize())
	}
	b.stats.FilesRead++
	return nil
}

func (b *backupRun) known(id crypto.ID) bool {
	if b.pending[id] {
		return true
	}
	ref, ok := b.r.blobs[id]
	return ok && b.held[ref.pack]
}

func (b *backupRun) allKnown(chunks []manifest.Chunk) bool {
	for _, c := range chunks {
		if !b.known(c.ID) {
			return false
		}
	}
	return true
}

func (b *backupRun) add(id crypto.ID, chunk []byte) error {
	if b.writer == nil {
		b.writer = pack.NewWriter(b.r.keys)
	}
	if err := b.writer.Add(pack.Data, id, chunk); err != nil {
		return err
	}
	b.pending[id] = true
	b.stats.ChunksNew++
	if b.writer.Size() >= pack.TargetSize {
		return b.flush()
	}
	return nil
}

// flush closes the current pack and starts uploading it.
func (b *backupRun) flush() error {
	if b.writer == nil || b.writer.Count() == 0 {
		return nil
	}
	data, entries, err := b.writer.Finish()
	b.writer = nil
	if err != nil {
		return err
	}
	name := b.r.keys.ObjectName(data)
	b.newPacks = append(b.newPacks, index.Pack{Name: name, Size: uint64(len(data)), Entries: entries})
	b.stats.Packs++
	select {
	case b.sem <- struct{}{}:
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
	b.wg.Go(func() {
		defer func() { <-b.sem }()
		b.saveEverywhere(packsDir+name, data, func(l *location) { b.uploaded[l][name] = true })
	})
	return nil
}

// saveEverywhere saves an object in every live location at once; a location
// that fails is dropped from this backup. done runs (under b.mu) for each
// location that saved it.
func (b *backupRun) saveEverywhere(name string, data []byte, done func(*location)) {
	b.mu.Lock()
	live := slices.Clone(b.live)
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range live {
		wg.Go(func() {
			err := l.Backend.Save(b.ctx, name, data)
			b.mu.Lock()
			defer b.mu.Unlock()
			if err != nil {
				b.drop(l, err)
				return
			}
			b.stats.BytesUploaded += int64(len(data))
			if done != nil {
				done(l)
			}
		})
	}
	wg.Wait()
}

// drop removes l from the live locations (b.mu held).
func (b *backupRun) drop(l *location, err error) {
	if _, ok := b.failed[l]; !ok {
		b.failed[l] = err
	}
	b.live = slices.DeleteFunc(b.live, func(x *location) bool { return x == l })
}

// uploadErr returns an error once no location is left.
func (b *backupRun) uploadErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.live) == 0 {
		return fmt.Errorf("every location failed: %w", b.failuresLocked())
	}
	return nil
}

func (b *backupRun) failures() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failuresLocked()
}

func (b *backupRun) failuresLocked() error {
	var errs []error
	for l, err := range b.failed {
		errs = append(errs, fmt.Errorf("%s: %w", l.Name, err))
	}
	return errors.Join(errs...)
}

// commit writes the index segment and the manifest, then a new head, in
// each location that holds every pack the manifest needs.
func (b *backupRun) commit(m *manifest.Manifest) (ManifestRef, error) {
	r := b.r
	var seg *index.Segment
	var segName string
	var segObj []byte
	if len(b.newPacks) > 0 {
		seg = &index.Segment{Packs: b.newPacks}
		var err error
		if segObj, segName, err = r.sealObject(index.EncodeSegment(seg), segmentAD); err != nil {
			return ManifestRef{}, err
		}
	}
	mObj, mName, err := r.sealObject(manifest.Encode(m), manifestAD)
	if err != nil {
		return ManifestRef{}, err
	}
	newPack := map[string]bool{}
	for _, p := range b.newPacks {
		newPack[p.Name] = true
	}
	committed := 0
	for _, l := range slices.Clone(b.live) {
		if err := b.commitTo(l, m, newPack, segName, segObj, mName, mObj); err != nil {
			b.drop(l, err)
			continue
		}
		committed++
	}
	if committed == 0 {
		return ManifestRef{}, fmt.Errorf("no location committed: %w", b.failuresLocked())
	}
	if seg != nil {
		r.segments[segName] = seg
		r.rebuild()
	}
	return ManifestRef{ID: mName}, nil
}

func (b *backupRun) commitTo(l *location, m *manifest.Manifest, newPack map[string]bool, segName string, segObj []byte, mName string, mObj []byte) error {
	r := b.r
	has := r.packsOf(l)
	for p := range b.uploaded[l] {
		has[p] = true
	}
	for p := range newPack {
		if !b.uploaded[l][p] {
			return fmt.Errorf("pack %s was not uploaded", p)
		}
	}
	for i := range m.Nodes {
		for _, c := range m.Nodes[i].Chunks {
			if b.pending[c.ID] {
				continue
			}
			if ref, ok := r.blobs[c.ID]; !ok || !has[ref.pack] {
				return fmt.Errorf("lacks the pack of chunk %s (repair it from the other location)", c.ID)
			}
		}
	}
	h := &index.Head{
		Manifests: append(slices.Clone(l.head.Manifests), mName),
		Deleted:   slices.Clone(l.head.Deleted),
		Indexes:   slices.Clone(l.head.Indexes),
	}
	if segObj != nil {
		if err := l.Backend.Save(b.ctx, indexDir+segName, segObj); err != nil {
			return err
		}
		b.stats.BytesUploaded += int64(len(segObj))
		h.Indexes = append(h.Indexes, segName)
	}
	if err := l.Backend.Save(b.ctx, manifestsDir+mName, mObj); err != nil {
		return err
	}
	b.stats.BytesUploaded += int64(len(mObj))
	return r.commitHead(b.ctx, l, h)
}
