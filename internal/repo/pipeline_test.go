package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
	"github.com/cairn-sandbox/cairn/internal/repo/chunker"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
)

// pipelineTree writes many small files (some of them with equal contents,
// some empty), a few files of many chunks, compressible and not, and a
// sparse one.
func pipelineTree(t *testing.T, dir string) {
	t.Helper()
	text := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog\n"), 1<<16)
	for i := range 400 {
		var data []byte
		switch i % 5 {
		case 0:
			data = randomBytes(i*97, uint64(i))
		case 1:
			data = text[i : i+i*311]
		case 2:
			data = randomBytes(70<<10, 7) // the same in 80 files
		case 3:
			data = randomBytes(4096+i, uint64(1000+i))
		case 4:
			data = nil
		}
		write(t, filepath.Join(dir, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%03d", i)), data)
	}
	write(t, filepath.Join(dir, "big", "random"), randomBytes(12<<20, 42))
	write(t, filepath.Join(dir, "big", "text"), text)
	write(t, filepath.Join(dir, "big", "copy"), randomBytes(12<<20, 42))
	write(t, filepath.Join(dir, "zz", "late"), randomBytes(16<<20, 44))
	sp, err := os.Create(filepath.Join(dir, "big", "sparse"))
	must(t, err)
	_, err = sp.WriteAt(randomBytes(6<<20, 43), 8<<20)
	must(t, err)
	must(t, sp.Truncate(32<<20))
	must(t, sp.Close())
}

// referenceChunks chunks every regular file of dir one at a time, with a
// fresh chunker each, and returns the chunk ids by path.
func referenceChunks(t *testing.T, dir string, keys *crypto.Keys) map[string][]manifest.Chunk {
	t.Helper()
	out := map[string][]manifest.Chunk{}
	must(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		ext, err := dataExtents(f, fi.Size())
		if err != nil {
			return err
		}
		c, err := chunker.New(streamReader(f, ext, 0), keys.ChunkerKey())
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var cs []manifest.Chunk
		for {
			chunk, err := c.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			cs = append(cs, manifest.Chunk{ID: keys.ChunkID(chunk), Length: uint32(len(chunk))})
		}
		out[filepath.ToSlash(rel)] = cs
		return nil
	}))
	return out
}

// The sealers compress, encrypt and pack in whatever order they run, but
// the manifest, the chunk ids and the set of stored chunks do not depend on
// how many there are; the tree restores byte for byte.
func TestBackupSameWhateverTheSealers(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	pipelineTree(t, src)
	key, err := crypto.NewKey()
	must(t, err)
	keys, err := key.Derive()
	must(t, err)
	want := referenceChunks(t, src, keys)
	unique := map[crypto.ID]bool{}
	total := 0
	for _, cs := range want {
		for _, c := range cs {
			unique[c.ID] = true
			total++
		}
	}

	var first *manifest.Manifest
	var firstBlobs []crypto.ID
	for _, procs := range []int{1, 2, 7} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			f := newFixtureKey(t, key)
			ref, st := f.backup(t, src, nil)
			if st.ChunksNew != len(unique) || st.ChunksNew+st.ChunksReused != total {
				t.Errorf("%d chunks new, %d reused; want %d of %d new", st.ChunksNew, st.ChunksReused, len(unique), total)
			}
			if st.Packs < 3 {
				t.Errorf("%d packs, want several", st.Packs)
			}
			plain, err := f.repo.loadManifest(context.Background(), ref)
			must(t, err)
			m, err := manifest.Decode(plain)
			must(t, err)
			for _, n := range m.Nodes {
				if n.Type == manifest.File && !slices.Equal(n.Chunks, want[n.Path]) {
					t.Errorf("%s: %d chunks, want %d as chunked alone", n.Path, len(n.Chunks), len(want[n.Path]))
				}
			}
			blobs := slices.SortedFunc(maps.Keys(f.repo.blobs), func(a, b crypto.ID) int { return bytes.Compare(a[:], b[:]) })
			if len(blobs) != len(unique) {
				t.Errorf("%d blobs stored, want %d", len(blobs), len(unique))
			}
			m.Created = 0
			if first == nil {
				first, firstBlobs = m, blobs
			} else {
				if !reflect.DeepEqual(m, first) {
					t.Error("manifest differs from the one of GOMAXPROCS=1")
				}
				if !slices.Equal(blobs, firstBlobs) {
					t.Error("stored chunks differ from those of GOMAXPROCS=1")
				}
			}
			f.restoreEqual(t, ref, src)
			f.verifyClean(t)

			// Unchanged, with the parent: nothing read, nothing new.
			_, st2 := f.backup(t, src, &ref)
			if st2.FilesRead != 0 || st2.ChunksNew != 0 || st2.Packs != 0 {
				t.Errorf("backup of an unchanged tree: %+v", st2)
			}
		})
	}
}

// A backup canceled while chunks are queued and packs upload stops, leaves
// the repository as it was, and the next backup completes.
func TestBackupCanceledMidway(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	pipelineTree(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first pack's upload cancels: the walk is then far from done.
	for _, fy := range f.faulty {
		fy.Inject(func(op backendtest.Op, name string) error {
			if op == backendtest.OpSave && strings.HasPrefix(name, packsDir) {
				cancel()
				return ctx.Err()
			}
			return nil
		})
	}
	_, st, err := f.repo.Backup(ctx, src, BackupOptions{})
	for _, fy := range f.faulty {
		fy.Inject(nil)
	}
	keys, err2 := f.key.Derive()
	must(t, err2)
	var size int64
	for _, cs := range referenceChunks(t, src, keys) {
		for _, c := range cs {
			size += int64(c.Length)
		}
	}
	if !errors.Is(err, context.Canceled) || st.BytesRead >= size {
		t.Fatalf("canceled backup: %v after %d of %d bytes read", err, st.BytesRead, size)
	}
	if l := f.repo.List(); len(l) != 0 {
		t.Fatalf("List after a canceled backup = %v", l)
	}
	if u := f.repo.Unavailable(); u != nil {
		t.Fatalf("a canceled backup failed locations: %v", u)
	}
	f.verifyClean(t)
	ref, _ := f.backup(t, src, nil)
	f.restoreEqual(t, ref, src)
	f.verifyClean(t)
}

// A backup canceled at its head's commit (the delete of a checkpoint
// cancels its upload at any point) leaves no location failed: the next
// backup goes to both. It used to mark them failed, and every upload after
// failed with "no location available" until they were repaired. One
// canceled once its head is written is committed.
func TestBackupCanceledAtTheCommitFailsNoLocation(t *testing.T) {
	for _, at := range []backendtest.Op{backendtest.OpCreate, backendtest.OpList} {
		t.Run(string(at), func(t *testing.T) {
			f := newFixture(t)
			src := filepath.Join(t.TempDir(), "src")
			pipelineTree(t, src)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, fy := range f.faulty {
				fired := false // once per location: the look done again past the cancel works
				fy.Inject(func(op backendtest.Op, name string) error {
					if op == at && strings.HasPrefix(name, headsDir) && !fired {
						fired = true
						cancel()
						return ctx.Err()
					}
					return nil
				})
			}
			first, _, err := f.repo.Backup(ctx, src, BackupOptions{})
			for _, fy := range f.faulty {
				fy.Inject(nil)
			}
			switch {
			case at == backendtest.OpCreate && !errors.Is(err, context.Canceled):
				t.Fatalf("backup canceled before its head was written: %v", err)
			case at == backendtest.OpList && err != nil:
				// Its head is written: it is committed, and says so
				// (else its manifest would be kept with no checkpoint
				// naming it).
				t.Fatalf("backup canceled after its head was written: %v", err)
			case at == backendtest.OpList:
				f.restoreEqual(t, first, src)
			}
			if u := f.repo.Unavailable(); u != nil {
				t.Fatalf("a backup canceled at the commit failed locations: %v", u)
			}
			ref, st := f.backup(t, src, nil)
			if len(st.Failed) != 0 {
				t.Fatalf("the backup after: failed %v", st.Failed)
			}
			f.restoreEqual(t, ref, src)
		})
	}
}
