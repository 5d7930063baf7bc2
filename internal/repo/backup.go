package repo

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/repo/chunker"
	"github.com/cairn-sandbox/cairn/internal/repo/compress"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/fiemap"
	"github.com/cairn-sandbox/cairn/internal/repo/index"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/repo/pack"
)

// uploadsInFlight bounds the packs held in memory while they upload.
const uploadsInFlight = 2

// sealQueuePerSealer is how many new chunks may wait for each sealer.
const sealQueuePerSealer = 2

// maxSealers bounds the sealers (one per CPU otherwise): 8 compress some
// 700 MB/s of mixed data, more than an off-site link takes, and leave the
// other CPUs of a large host to its sandboxes.
const maxSealers = 8

// A backup is a pipeline. The goroutine that calls Backup walks the tree in
// order, reads and chunks each file, hashes each chunk and decides, against
// the index and the chunks this backup already took, whether the chunk is
// new: the manifest, the chunk ids and the set of chunks stored are
// therefore the same however the rest is scheduled. It copies each new
// chunk into a buffer and queues it for the sealers (one per CPU, up to
// maxSealers), which compress and encrypt chunks and append them to the
// open pack; whichever sealer fills the pack closes it and starts its
// upload. Only the order of blobs in packs, and so the packs' names,
// depends on scheduling. Memory stays bounded: besides the chunker's
// buffer, at most sealQueuePerSealer+1 chunks and one sealed blob per
// sealer (1 MiB each at most), the open pack, one full pack waiting for an
// upload slot and uploadsInFlight packs uploading (17 MiB each at most).

// Stats says what a backup did.
type Stats struct {
	Files         int   // regular files in the tree (hard links counted once)
	FilesRead     int   // files read; the others reused the parent's chunk lists unread
	BytesRead     int64 // bytes read from files, the chunker's read-ahead included
	BytesShared   int64 // bytes of changed files whose chunks were the parent's, unread (see BackupOptions.ParentDir)
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
	// lists without being read. A backup without a parent is a base: every
	// later backup of the tree builds on it, so it compresses at zstd's
	// better level (0.5% smaller, a quarter more CPU); backups with a parent
	// compress at the default level, to keep their latency down.
	Parent *ManifestRef
	// ParentDir, if set with Parent, is the tree Parent was made from, still
	// as it was then: a read-only btrfs snapshot on the same file system as
	// the tree being backed up, such as the parent checkpoint's. A changed
	// file then reads only the parts of it that no longer share disk
	// extents with its parent's file and takes the parent's chunks for the
	// rest: a 1 GiB database with a few changed pages reads a few MiB.
	// Without it, or where it cannot be relied on (another file system, a
	// parent file that differs from the manifest), changed files are read
	// whole. The chunks are the same either way.
	ParentDir string
	// Progress, if not nil, is called with the running Stats at most every
	// progressEvery while the backup runs, and once more at the end. Calls
	// never overlap; Progress must not call the Repository.
	Progress func(Stats)
	// Meta is stored, encrypted, in the manifest (at most
	// manifest.MaxMeta bytes): what the writer wants a reader without its
	// own records to know of the checkpoint. Read back by Meta.
	Meta []byte
	// MemoryDir, if set, is the checkpoint's memory image (a directory,
	// read-only while the backup runs), stored as the manifest's second
	// tree (Manifest.Memory) and restored with RestoreOptions.Memory. Its
	// files are read whole, never from Parent (each image is a new file),
	// and chunked like any file: successive images of one sandbox share
	// most of their chunks, which are stored once.
	MemoryDir string
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
	if len(opts.Meta) > manifest.MaxMeta {
		return ManifestRef{}, Stats{}, fmt.Errorf("backup: meta of %d bytes exceeds %d", len(opts.Meta), manifest.MaxMeta)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &backupRun{r: r, ctx: ctx, failed: map[*location]error{}, pending: map[crypto.ID]bool{},
		uploaded: map[*location]map[string]bool{}, sem: make(chan struct{}, uploadsInFlight), progress: opts.Progress,
		chunkBufs: sync.Pool{New: func() any { b := make([]byte, 0, chunker.MaxSize); return &b }}}
	ref, err := b.run(srcDir, opts)
	if b.parentDir != nil {
		b.parentDir.Close()
	}
	for l, e := range b.failed {
		l.failUnlessCanceled(ctx, e)
	}
	if b.progress != nil {
		b.progress(b.snapshot())
	}
	return ref, b.snapshot(), err
}

func (b *backupRun) run(srcDir string, opts BackupOptions) (ManifestRef, error) {
	r, ctx := b.r, b.ctx
	parent, parentDir := opts.Parent, opts.ParentDir
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
		if parentDir != "" {
			// Otherwise its extents prove nothing.
			if ok, err := fiemap.SameCopyOnWrite(srcDir, parentDir); ok && err == nil {
				b.parentDir, _ = hosttree.OpenRoot(parentDir)
			}
		}
	}
	if parent == nil {
		b.level = compress.Better
	}
	m := &manifest.Manifest{Created: time.Now().UnixNano(), Meta: opts.Meta}
	b.startSealers(min(runtime.GOMAXPROCS(0), maxSealers))
	err := b.walk(srcDir, &m.Nodes)
	if err == nil && opts.MemoryDir != "" {
		// Nothing of the parent applies to another tree.
		b.parent = nil
		if b.parentDir != nil {
			b.parentDir.Close()
			b.parentDir = nil
		}
		if err = b.walk(opts.MemoryDir, &m.Memory); err != nil {
			err = fmt.Errorf("memory image: %w", err)
		}
	}
	if err != nil {
		b.abort.Store(true)
	}
	close(b.queue)
	if err == nil {
		// The manifest is complete: it uploads while the sealers finish
		// and the last packs upload.
		err = b.saveManifest(m)
	}
	b.sealers.Wait()
	if err == nil {
		err = b.sealErr()
	}
	if err == nil {
		err = b.flush()
	}
	if err == nil {
		err = b.saveSegment()
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
	// parentDir is BackupOptions.ParentDir, open, if it is on the same
	// btrfs as the tree, else nil.
	parentDir *hosttree.Dir
	held      map[string]bool // packs every live location holds
	// stats: the walk's counts are written by the walk only; Packs and
	// BytesUploaded (and the reading of the whole) take mu.
	stats Stats

	progress     func(Stats)
	lastProgress time.Time

	chunker   *chunker.Chunker
	level     compress.Level     // of the new chunks
	pending   map[crypto.ID]bool // blobs taken by this backup: queued, packed or uploaded
	queue     chan sealJob       // new chunks for the sealers
	chunkBufs sync.Pool          // of *[]byte, for the chunks in queue
	sealers   sync.WaitGroup
	abort     atomic.Bool // the walk failed: sealers drop what is queued

	// What commit needs besides the packs, set once the walk is done: the
	// manifest's name, and the index segment of the new packs and its name
	// (nil if none).
	mName   string
	seg     *index.Segment
	segName string

	packMu sync.Mutex   // guards writer
	writer *pack.Writer // the pack being filled

	wg       sync.WaitGroup // uploads
	sem      chan struct{}
	mu       sync.Mutex // guards what sealers and uploads change below
	newPacks []index.Pack
	sealFail error // the first error of a sealer
	live     []*location
	failed   map[*location]error
	uploaded map[*location]map[string]bool // object names (packs/…, index/…, manifests/…) saved in each location
}

// sealJob is a new chunk for a sealer: its id and its bytes, in a buffer of
// chunkBufs.
type sealJob struct {
	id    crypto.ID
	chunk *[]byte
}

// walk adds the tree at src to nodes.
func (b *backupRun) walk(src string, nodes *[]manifest.Node) error {
	root, err := hosttree.OpenRoot(src)
	if err != nil {
		return err
	}
	defer root.Close()
	links := map[[2]uint64]string{}
	return hosttree.Walk(b.ctx, root, func(e *hosttree.Entry) error {
		if err := b.uploadErr(); err != nil {
			return err
		}
		if err := b.sealErr(); err != nil {
			return err
		}
		b.report()
		n, err := statNode(e)
		if err != nil {
			return err
		}
		if e.Path == "." && n.Type != manifest.Dir {
			return fmt.Errorf("%s is not a directory", src)
		}
		if n.Type == manifest.File {
			if e.Stat.Nlink > 1 {
				key := [2]uint64{e.Stat.Dev, e.Stat.Ino}
				if first, ok := links[key]; ok {
					*nodes = append(*nodes, manifest.Node{Path: n.Path, Type: manifest.Hardlink, Target: first})
					return nil
				}
				links[key] = n.Path
			}
			b.stats.Files++
			if err := b.file(e, &n); err != nil {
				return err
			}
		}
		*nodes = append(*nodes, n)
		return nil
	})
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

// add queues a new chunk for the sealers.
func (b *backupRun) add(id crypto.ID, chunk []byte) error {
	buf := b.chunkBufs.Get().(*[]byte)
	*buf = append((*buf)[:0], chunk...)
	select {
	case b.queue <- sealJob{id: id, chunk: buf}:
	case <-b.ctx.Done():
		b.chunkBufs.Put(buf)
		return b.ctx.Err()
	}
	b.pending[id] = true
	b.stats.ChunksNew++
	return nil
}

// startSealers starts n sealers reading b.queue.
func (b *backupRun) startSealers(n int) {
	b.queue = make(chan sealJob, sealQueuePerSealer*n)
	for range n {
		b.sealers.Go(b.seal)
	}
}

// seal compresses and encrypts the chunks of b.queue into the open pack
// until the queue is closed. After an error it only drains the queue.
func (b *backupRun) seal() {
	s := pack.NewSealer(b.r.keys, b.level)
	failed := false
	for job := range b.queue {
		if !failed && !b.abort.Load() {
			if err := b.sealOne(s, job); err != nil {
				b.mu.Lock()
				if b.sealFail == nil {
					b.sealFail = err
				}
				b.mu.Unlock()
				failed = true
			}
		}
		b.chunkBufs.Put(job.chunk)
	}
}

func (b *backupRun) sealOne(s *pack.Sealer, job sealJob) error {
	chunk := *job.chunk
	sealed, err := s.Seal(pack.Data, job.id, chunk)
	if err != nil {
		return err
	}
	full, err := b.pack(pack.Entry{Type: pack.Data, ID: job.id, PlainLength: uint32(len(chunk))}, sealed)
	if full == nil || err != nil {
		return err
	}
	return b.upload(full)
}

// pack appends a sealed blob to the open pack. If that fills the pack, it
// waits for an upload slot and returns the full pack, to be passed to
// upload. Waiting under packMu holds every sealer back until the slot is
// free, so that one full pack at most waits, however many sealers run.
func (b *backupRun) pack(e pack.Entry, sealed []byte) (*pack.Writer, error) {
	b.packMu.Lock()
	defer b.packMu.Unlock()
	if b.writer == nil {
		b.writer = pack.NewWriter(b.r.keys)
	}
	b.writer.AddSealed(e, sealed)
	if b.writer.Size() < pack.TargetSize {
		return nil, nil
	}
	if err := b.uploadSlot(); err != nil {
		return nil, err
	}
	full := b.writer
	b.writer = nil
	return full, nil
}

// uploadSlot waits until fewer than uploadsInFlight packs upload and takes
// a slot, which upload gives back.
func (b *backupRun) uploadSlot() error {
	select {
	case b.sem <- struct{}{}:
		return nil
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}

// sealErr returns the first error of a sealer.
func (b *backupRun) sealErr() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sealFail
}

// flush closes the open pack, if any, and starts uploading it. The sealers
// must have stopped.
func (b *backupRun) flush() error {
	w := b.writer
	b.writer = nil
	if w == nil || w.Count() == 0 {
		return nil
	}
	if err := b.uploadSlot(); err != nil {
		return err
	}
	return b.upload(w)
}

// upload closes a pack and starts uploading it in the upload slot its
// caller took.
func (b *backupRun) upload(w *pack.Writer) error {
	data, entries, err := w.Finish()
	if err != nil {
		<-b.sem
		return err
	}
	name := b.r.keys.ObjectName(data)
	b.mu.Lock()
	b.newPacks = append(b.newPacks, index.Pack{Name: name, Size: uint64(len(data)), Entries: entries})
	b.stats.Packs++
	b.mu.Unlock()
	b.wg.Go(func() {
		defer func() { <-b.sem }()
		b.saveEverywhere(packsDir+name, data)
	})
	return nil
}

// saveManifest seals m and starts uploading it. The manifest, like the
// index segment and the packs, is no checkpoint before a head lists it (and
// commit writes a head only once they are all saved), so they upload at
// once: a crash before the head leaves objects nothing refers to.
func (b *backupRun) saveManifest(m *manifest.Manifest) error {
	plain := manifest.Encode(m)
	if len(plain) > maxManifest {
		return fmt.Errorf("manifest of %d bytes, over the %d a manifest may have: %w", len(plain), maxManifest, ErrUnstorable)
	}
	obj, name, err := b.r.sealObject(plain, manifestAD)
	if err != nil {
		return err
	}
	b.mName = name
	b.wg.Go(func() { b.saveEverywhere(manifestsDir+name, obj) })
	return nil
}

// saveSegment seals the index segment of the new packs, if any, and starts
// uploading it (see saveManifest). Every pack must be closed.
func (b *backupRun) saveSegment() error {
	if len(b.newPacks) == 0 {
		return nil
	}
	b.seg = &index.Segment{Packs: b.newPacks}
	obj, name, err := b.r.sealObject(index.EncodeSegment(b.seg), segmentAD)
	if err != nil {
		return err
	}
	b.segName = name
	b.wg.Go(func() { b.saveEverywhere(indexDir+name, obj) })
	return nil
}

// saveEverywhere saves an object in every live location at once and notes
// where it is saved; a location that fails is dropped from this backup.
func (b *backupRun) saveEverywhere(name string, data []byte) {
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
			b.uploaded[l][name] = true
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

// commit writes a new head in each location that holds every pack the
// manifest needs, the new packs, the index segment and the manifest.
func (b *backupRun) commit(m *manifest.Manifest) (ManifestRef, error) {
	r := b.r
	committed := 0
	for _, l := range slices.Clone(b.live) {
		if err := b.commitTo(l, m); err != nil {
			b.drop(l, err)
			continue
		}
		committed++
	}
	if committed == 0 {
		return ManifestRef{}, fmt.Errorf("no location committed: %w", b.failuresLocked())
	}
	if b.seg != nil {
		r.segments[b.segName] = b.seg
		r.rebuild()
	}
	return ManifestRef{ID: b.mName}, nil
}

func (b *backupRun) commitTo(l *location, m *manifest.Manifest) error {
	r := b.r
	saved := b.uploaded[l]
	has := r.packsOf(l)
	for _, p := range b.newPacks {
		if !saved[packsDir+p.Name] {
			return fmt.Errorf("pack %s was not uploaded", p.Name)
		}
		has[p.Name] = true
	}
	var lacks error
	m.EachChunk(func(c manifest.Chunk) {
		if lacks != nil || b.pending[c.ID] {
			return
		}
		if ref, ok := r.blobs[c.ID]; !ok || !has[ref.pack] {
			lacks = fmt.Errorf("lacks the pack of chunk %s (repair it from the other location)", c.ID)
		}
	})
	if lacks != nil {
		return lacks
	}
	h := &index.Head{
		Manifests: append(slices.Clone(l.head.Manifests), b.mName),
		Deleted:   slices.Clone(l.head.Deleted),
		Indexes:   slices.Clone(l.head.Indexes),
	}
	if b.seg != nil {
		if !saved[indexDir+b.segName] {
			return fmt.Errorf("index segment %s was not uploaded", b.segName)
		}
		h.Indexes = append(h.Indexes, b.segName)
	}
	if !saved[manifestsDir+b.mName] {
		return fmt.Errorf("manifest %s was not uploaded", b.mName)
	}
	return r.commitHead(b.ctx, l, h)
}
