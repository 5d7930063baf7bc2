package repo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/repo/pack"
)

// restoreWorkers is how many packs are fetched and written at once.
const restoreWorkers = 2

// target is one place a chunk's bytes go: at stream offset off of a file's
// data (its extents laid end to end).
type target struct {
	root    *hosttree.Dir
	path    string // below root
	extents []manifest.Extent
	off     uint64
}

// RestoreOptions are the optional parts of a Restore.
type RestoreOptions struct {
	// Progress, if not nil, is called with the running RestoreStats at most
	// every progressEvery while file data is written, and once more at the
	// end. Calls never overlap; Progress must not call the Repository.
	Progress func(RestoreStats)
	// Memory restores the checkpoint's memory image (BackupOptions.MemoryDir)
	// instead of its disk; a manifest without one fails with an error
	// wrapping ErrNoMemory.
	Memory bool
}

// ErrNoMemory is wrapped by the error of a restore of a memory image from
// a manifest that holds none (the checkpoint had none, or it was uploaded
// before manifests carried memory images).
var ErrNoMemory = errors.New("the off-site copy holds no memory image")

// RestoreStats says how far a restore is.
type RestoreStats struct {
	Files        int   // regular files whose data is written (hard links counted once)
	FilesTotal   int   // regular files in the checkpoint
	BytesWritten int64 // file data written
	// BytesTotal is the file data to write: the sum of the regular files'
	// sizes, less their holes (which take no writing). BytesWritten
	// reaches it when the restore succeeds.
	BytesTotal int64
}

// Restore rebuilds checkpoint ref in dstDir, which is created if missing and
// must be empty. Every chunk is authenticated and checked against its id;
// contents, holes, hard links, symlinks, special files, owners, modes,
// xattrs and mtimes are restored. On error dstDir holds a partial tree that
// the caller should remove.
func (r *Repository) Restore(ctx context.Context, ref ManifestRef, dstDir string, opts RestoreOptions) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	prog := &restoreProgress{fn: opts.Progress, left: map[string]int{}}
	err := r.restore(ctx, ref, dstDir, opts.Memory, prog)
	prog.report(true)
	return err
}

func (r *Repository) restore(ctx context.Context, ref ManifestRef, dstDir string, memory bool, prog *restoreProgress) error {
	plain, err := r.loadManifest(ctx, ref)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	m, err := manifest.Decode(plain)
	if err != nil {
		return fmt.Errorf("restore: manifest %s: %w", ref.ID, err)
	}
	nodes := m.Nodes
	if memory {
		if nodes = m.Memory; len(nodes) == 0 {
			return fmt.Errorf("restore: manifest %s: %w", ref.ID, ErrNoMemory)
		}
	}
	if err := os.MkdirAll(dstDir, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if entries, err := os.ReadDir(dstDir); err != nil || len(entries) > 0 {
		return fmt.Errorf("restore: %s is not an empty directory (%v)", dstDir, err)
	}
	root, err := hosttree.OpenRoot(dstDir)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer root.Close()
	dirs := &parentDirs{root: root}
	defer dirs.close()

	// Plan where every chunk goes, grouped by pack.
	plan := map[string]map[crypto.ID][]target{}
	entries := map[crypto.ID]pack.Entry{}
	for i := range nodes {
		n := &nodes[i]
		dir, name, err := dirs.of(n.Path)
		if err == nil {
			err = makeNode(root, dir, name, n)
		}
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if n.Type == manifest.File {
			prog.add(n.Path, n)
		}
		var off uint64
		for _, c := range n.Chunks {
			br, ok := r.blobs[c.ID]
			if !ok {
				return fmt.Errorf("restore: %s: chunk %s is in no pack", n.Path, c.ID)
			}
			if plan[br.pack] == nil {
				plan[br.pack] = map[crypto.ID][]target{}
			}
			plan[br.pack][c.ID] = append(plan[br.pack][c.ID], target{root: root, path: n.Path, extents: n.Extents, off: off})
			entries[c.ID] = br.entry
			off += uint64(c.Length)
		}
	}
	if err := r.restoreData(ctx, plan, entries, prog); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// Metadata last, children before parents so directory times stay.
	for i := len(nodes) - 1; i >= 0; i-- {
		n := &nodes[i]
		if n.Type == manifest.Hardlink {
			continue // shares its inode with the file it names
		}
		dir, name, err := dirs.of(n.Path)
		if err == nil {
			err = applyMeta(dir, name, n)
		}
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	return nil
}

func (r *Repository) restoreData(ctx context.Context, plan map[string]map[crypto.ID][]target, entries map[crypto.ID]pack.Entry, prog *restoreProgress) error {
	packs := make([]string, 0, len(plan))
	for p := range plan {
		packs = append(packs, p)
	}
	slices.Sort(packs)
	work := make(chan string)
	errs := make(chan error, restoreWorkers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range restoreWorkers {
		wg.Go(func() {
			for name := range work {
				if err := r.restorePack(ctx, name, plan[name], entries, prog); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
feed:
	for _, p := range packs {
		select {
		case work <- p:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

func (r *Repository) restorePack(ctx context.Context, name string, blobs map[crypto.ID][]target, entries map[crypto.ID]pack.Entry, prog *restoreProgress) error {
	data, err := r.loadPack(ctx, name)
	if err != nil {
		return err
	}
	for id, targets := range blobs {
		plain, err := pack.Blob(r.keys, data, entries[id])
		if err != nil {
			return fmt.Errorf("pack %s: %w", name, err)
		}
		for _, t := range targets {
			if err := writeTarget(t, plain); err != nil {
				return err
			}
			prog.wrote(t.path, len(plain))
		}
	}
	return nil
}

// restoreProgress counts what a restore wrote and reports it.
type restoreProgress struct {
	mu   sync.Mutex // held while fn runs, so calls never overlap
	fn   func(RestoreStats)
	st   RestoreStats
	left map[string]int // per file, chunks still to write
	last time.Time
}

// add counts a regular file about to be restored to p.
func (pr *restoreProgress) add(p string, n *manifest.Node) {
	pr.st.FilesTotal++
	pr.st.BytesTotal += int64(n.DataSize())
	if len(n.Chunks) == 0 {
		pr.st.Files++
		return
	}
	pr.left[p] = len(n.Chunks)
}

// wrote counts n bytes of one chunk written to the file at p.
func (pr *restoreProgress) wrote(p string, n int) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.st.BytesWritten += int64(n)
	if pr.left[p]--; pr.left[p] == 0 {
		pr.st.Files++
	}
	pr.reportLocked(false)
}

// report calls fn at the end of the restore.
func (pr *restoreProgress) report(final bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.reportLocked(final)
}

func (pr *restoreProgress) reportLocked(final bool) {
	if pr.fn == nil || !final && time.Since(pr.last) < progressEvery {
		return
	}
	pr.last = time.Now()
	pr.fn(pr.st)
}

// writeTarget writes p at stream offset t.off of the file's extents.
func writeTarget(t target, p []byte) error {
	fd, err := hosttree.OpenBeneath(t.root, t.path, os.O_WRONLY)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), t.path)
	defer f.Close()
	var stream uint64
	for _, x := range t.extents {
		if len(p) == 0 {
			break
		}
		if t.off >= stream+x.Length {
			stream += x.Length
			continue
		}
		skip := t.off - stream
		n := min(uint64(len(p)), x.Length-skip)
		if _, err := f.WriteAt(p[:n], int64(x.Offset+skip)); err != nil {
			return err
		}
		p, t.off = p[n:], t.off+n
		stream += x.Length
	}
	if len(p) != 0 {
		return fmt.Errorf("%s: chunk extends past the file's extents", hosttree.Quote(t.path))
	}
	return f.Close()
}

// parentDirs opens the directory holding each node of a restore, keeping
// the last one open: nodes of one directory come one after another.
type parentDirs struct {
	root *hosttree.Dir
	last *hosttree.Dir // nil or not the root
}

// of returns the directory holding the node at rel and its name there;
// for the root, the root and "".
func (p *parentDirs) of(rel string) (*hosttree.Dir, string, error) {
	if rel == "." {
		return p.root, "", nil
	}
	dir, name := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return p.root, name, nil
	}
	if p.last != nil && p.last.Rel() == dir {
		return p.last, name, nil
	}
	p.close()
	d, err := p.root.OpenSub(dir)
	if err != nil {
		return nil, "", err
	}
	p.last = d
	return d, name, nil
}

func (p *parentDirs) close() {
	if p.last != nil {
		p.last.Close()
		p.last = nil
	}
}
