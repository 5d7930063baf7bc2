package repo

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/repo/chunker"
	"github.com/cairn-sandbox/cairn/internal/repo/fiemap"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// A changed file in a btrfs snapshot is read only where it no longer shares
// extents with the parent snapshot's file, and its chunks are the ones a
// full read gives, whatever the change: pages rewritten in place at the
// start, middle and end, growth past MaxSize, truncation, a hole, a file
// rewritten whole.
func TestChangedFileReadsOnlyWhatChanged(t *testing.T) {
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	ctx := context.Background()
	dir := t.TempDir()
	pool, err := volume.OpenLoop(ctx, dir, 1<<30)
	must(t, err)
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	live := pool.TempPath("live")
	must(t, pool.Create(ctx, live))

	const size = 24 << 20
	base := randomBytes(size, 1)
	files := []string{"inplace", "start", "end", "grow", "shrink", "rewritten", "sparse", "nextbyte"}
	for _, name := range files[:len(files)-1] {
		write(t, filepath.Join(live, name), base)
	}
	// FastCDC decides a cut at c by the byte at c, the first of the next
	// chunk: a chunk all of whose bytes are shared is not the parent's if
	// the byte after it changed. "nextbyte" has a cut on a page boundary,
	// and the page there is rewritten.
	f := newFixture(t)
	nextByte, cut := cutOnPage(t, base, f.repo.keys.ChunkerKey())
	write(t, filepath.Join(live, "nextbyte"), nextByte)
	write(t, filepath.Join(live, "same"), randomBytes(3<<20, 2))
	snap1 := pool.TempPath("snap1")
	must(t, pool.Snapshot(ctx, live, snap1, true))

	pwrite := func(name string, off int64, n int, seed uint64) {
		t.Helper()
		fh, err := os.OpenFile(filepath.Join(live, name), os.O_WRONLY, 0)
		must(t, err)
		_, err = fh.WriteAt(randomBytes(n, seed), off)
		must(t, err)
		must(t, fh.Close())
	}
	for i, off := range []int64{3 << 20, 9<<20 + 123, 17 << 20} { // three pages, as a database writes them
		pwrite("inplace", off, 4096, uint64(10+i))
	}
	pwrite("nextbyte", int64(cut), 4096, 24)
	pwrite("start", 0, 100, 20)
	pwrite("end", size-5000, 5000, 21)
	pwrite("grow", size, 3<<20, 22)
	must(t, os.Truncate(filepath.Join(live, "shrink"), size-700<<10))
	write(t, filepath.Join(live, "rewritten"), randomBytes(size, 23))
	fh, err := os.OpenFile(filepath.Join(live, "sparse"), os.O_WRONLY, 0)
	must(t, err)
	must(t, unix.Fallocate(int(fh.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 8<<20, 1<<20))
	must(t, fh.Close())
	snap2 := pool.TempPath("snap2")
	must(t, pool.Snapshot(ctx, live, snap2, true))

	ref1, _ := f.backup(t, snap1, nil)
	ref2, st, err := f.repo.Backup(ctx, snap2, BackupOptions{Parent: &ref1, ParentDir: snap1})
	must(t, err)
	t.Logf("read %d files, %d bytes; %d bytes taken unread", st.FilesRead, st.BytesRead, st.BytesShared)
	if st.FilesRead != len(files) {
		t.Errorf("read %d files, want the %d changed ones", st.FilesRead, len(files))
	}
	// Whole: "rewritten" and "sparse" (its layout changed); the others only
	// around their changes, a few chunks each.
	if maxRead := int64(2*size + 6*4*chunker.MaxSize); st.BytesRead > maxRead {
		t.Errorf("read %d bytes, want at most %d", st.BytesRead, maxRead)
	}
	if st.BytesShared < 5*size-5*4*chunker.MaxSize {
		t.Errorf("took %d bytes unread from the parent, want nearly all of 5 files of %d", st.BytesShared, size)
	}
	want := referenceChunks(t, snap2, f.repo.keys)
	m := loadManifest(t, f, ref2)
	for _, n := range m.Nodes {
		if n.Type == manifest.File && !slices.Equal(n.Chunks, want[n.Path]) {
			t.Errorf("%s: chunks differ from a full read's (%d against %d)", n.Path, len(n.Chunks), len(want[n.Path]))
		}
	}
	f.restoreEqual(t, ref2, snap2)

	// A parent directory that is no longer the parent's tree is not relied
	// on: the live tree, whose changed files differ from the parent
	// manifest (times), although they share most extents with snap2.
	_, st, err = f.repo.Backup(ctx, snap2, BackupOptions{Parent: &ref1, ParentDir: live})
	must(t, err)
	if st.BytesShared != 0 {
		t.Errorf("against the live tree as parent directory: %d bytes taken unread", st.BytesShared)
	}
}

func TestStreamRanges(t *testing.T) {
	r := func(off, n uint64) fiemap.Range { return fiemap.Range{Offset: off, Length: n} }
	x := func(off, n uint64) manifest.Extent { return manifest.Extent{Offset: off, Length: n} }
	// File ranges to stream offsets, holes left out.
	ext := []manifest.Extent{x(0, 100), x(200, 100), x(400, 50)}
	if got, want := toStream([]fiemap.Range{r(50, 100), r(250, 200)}, ext), []fiemap.Range{r(50, 50), r(150, 100)}; !slices.Equal(got, want) {
		t.Fatalf("toStream = %v, want %v", got, want)
	}
	if !sameLayout(ext, []manifest.Extent{x(0, 100), x(200, 100), x(400, 70)}) {
		t.Error("a longer last extent is the same layout")
	}
	if sameLayout(ext, []manifest.Extent{x(0, 100), x(200, 90), x(400, 50)}) || sameLayout(ext, ext[:2]) {
		t.Error("other holes are not the same layout")
	}
}

func loadManifest(t *testing.T, f *fixture, ref ManifestRef) *manifest.Manifest {
	t.Helper()
	plain, err := f.repo.loadManifest(context.Background(), ref)
	must(t, err)
	m, err := manifest.Decode(plain)
	must(t, err)
	return m
}

// cutOnPage returns data like base, with a few bytes before it, whose
// chunks under key have a cut (not one forced at MaxSize) on a 4 KiB
// boundary, and that cut. Cuts after the first few follow the content, so
// the bytes put before base move them onto the boundary.
func cutOnPage(t *testing.T, base, key []byte) ([]byte, uint64) {
	t.Helper()
	baseCuts := cutsOf(t, base, key)
	for k := 3; k < len(baseCuts)-3; k++ {
		pad := (4096 - baseCuts[k]%4096) % 4096
		data := append(randomBytes(int(pad), 30), base...)
		cuts := cutsOf(t, data, key)
		for i := 1; i < len(cuts); i++ {
			if cuts[i] == baseCuts[k]+pad && cuts[i]-cuts[i-1] < chunker.MaxSize {
				return data, cuts[i]
			}
		}
	}
	t.Fatal("no cut could be moved onto a page boundary")
	return nil, 0
}

// cutsOf returns the offsets at which data's chunks under key end.
func cutsOf(t *testing.T, data, key []byte) []uint64 {
	t.Helper()
	c, err := chunker.New(bytes.NewReader(data), key)
	must(t, err)
	var cuts []uint64
	var off uint64
	for {
		chunk, err := c.Next()
		if err == io.EOF {
			return cuts
		}
		must(t, err)
		off += uint64(len(chunk))
		cuts = append(cuts, off)
	}
}
