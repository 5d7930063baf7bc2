package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// memoryImage writes a directory laid out as runsc's checkpoint files:
// a small state file, a page metadata file and the pages.
func memoryImage(t *testing.T, dir string, pages []byte) {
	t.Helper()
	write(t, filepath.Join(dir, "checkpoint.img"), randomBytes(40<<10, 11))
	write(t, filepath.Join(dir, "pages_meta.img"), randomBytes(4<<10, 12))
	write(t, filepath.Join(dir, "pages.img"), pages)
	must(t, os.Chmod(filepath.Join(dir, "pages.img"), 0o600))
}

func (f *fixture) backupMemory(t *testing.T, src, mem string, parent *ManifestRef) (ManifestRef, Stats) {
	t.Helper()
	ref, st, err := f.repo.Backup(context.Background(), src, BackupOptions{Parent: parent, MemoryDir: mem})
	if err != nil {
		t.Fatal(err)
	}
	if st.Failed != nil {
		t.Fatalf("backup failed in %v", st.Failed)
	}
	return ref, st
}

// restoreMemoryEqual restores ref's memory image and compares it with want.
func (f *fixture) restoreMemoryEqual(t *testing.T, ref ManifestRef, want string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "memory")
	if err := f.repo.Restore(context.Background(), ref, dst, RestoreOptions{Memory: true}); err != nil {
		t.Fatal(err)
	}
	compareTrees(t, want, dst)
}

// A checkpoint's memory image is stored beside its disk and comes back
// byte for byte, apart from the disk; a checkpoint without one says so.
func TestMemoryImageRoundTrip(t *testing.T) {
	f := newFixture(t)
	src, mem := filepath.Join(t.TempDir(), "disk"), filepath.Join(t.TempDir(), "memory")
	write(t, filepath.Join(src, "etc", "hostname"), []byte("box\n"))
	write(t, filepath.Join(src, "data"), randomBytes(2<<20, 1))
	memoryImage(t, mem, randomBytes(6<<20, 2))
	ref, st := f.backupMemory(t, src, mem, nil)
	if st.Files != 5 {
		t.Errorf("backup counted %d files, want the disk's 2 and the image's 3", st.Files)
	}
	info, err := f.repo.Info(context.Background(), ref)
	must(t, err)
	if !info.Memory || info.MemoryBytes != 6<<20+44<<10 || info.DiskBytes != 2<<20+4 {
		t.Errorf("Info = memory %v, %d memory bytes, %d disk bytes", info.Memory, info.MemoryBytes, info.DiskBytes)
	}
	f.restoreEqual(t, ref, src) // the disk alone: no image files in it
	var last RestoreStats
	dst := filepath.Join(t.TempDir(), "restored-memory")
	must(t, f.repo.Restore(context.Background(), ref, dst, RestoreOptions{Memory: true, Progress: func(s RestoreStats) { last = s }}))
	compareTrees(t, mem, dst)
	if last.BytesTotal != info.MemoryBytes || last.BytesWritten != last.BytesTotal || last.FilesTotal != 3 {
		t.Errorf("memory restore progress = %+v, want %d bytes of 3 files", last, info.MemoryBytes)
	}
	f.verifyClean(t)

	plain, _ := f.backup(t, src, nil)
	if info, _ := f.repo.Info(context.Background(), plain); info.Memory {
		t.Error("a backup without a memory image says it holds one")
	}
	err = f.repo.Restore(context.Background(), plain, filepath.Join(t.TempDir(), "none"), RestoreOptions{Memory: true})
	if !errors.Is(err, ErrNoMemory) {
		t.Errorf("memory restore of a disk-only checkpoint = %v, want ErrNoMemory", err)
	}
}

// Successive images of one sandbox share most of their pages: the second
// uploads little more than what changed, though its files are new ones.
func TestSuccessiveMemoryImagesShareChunks(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "disk")
	write(t, filepath.Join(src, "file"), []byte("x"))
	pages := randomBytes(32<<20, 3)
	first := filepath.Join(t.TempDir(), "m1")
	memoryImage(t, first, pages)
	ref1, st1 := f.backupMemory(t, src, first, nil)

	// A few pages changed and a few more mapped in the middle.
	next := append([]byte{}, pages[:10<<20]...)
	next = append(next, randomBytes(64<<10, 4)...)
	next = append(next, pages[10<<20:]...)
	copy(next[25<<20:], randomBytes(8<<10, 5))
	second := filepath.Join(t.TempDir(), "m2")
	memoryImage(t, second, next)
	ref2, st2 := f.backupMemory(t, src, second, &ref1)
	if st2.FilesRead != 3 {
		t.Errorf("second image: %d files read, want all 3 of its image", st2.FilesRead)
	}
	share := float64(st2.BytesUploaded) / float64(st1.BytesUploaded)
	t.Logf("second image: %d of %d chunks new, %d bytes sent against %d (%.1f%%)",
		st2.ChunksNew, st2.ChunksNew+st2.ChunksReused, st2.BytesUploaded, st1.BytesUploaded, 100*share)
	if share > 0.15 {
		t.Errorf("the second image sent %.0f%% of the first's bytes, want a small share", 100*share)
	}
	f.restoreMemoryEqual(t, ref2, second)
	f.restoreMemoryEqual(t, ref1, first)
}

// Garbage collection keeps the chunks only a memory image needs; verify
// finds a location missing them and repair brings them back.
func TestMemoryChunksAreLive(t *testing.T) {
	f := newFixture(t)
	empty, other := filepath.Join(t.TempDir(), "empty"), filepath.Join(t.TempDir(), "other")
	must(t, os.MkdirAll(empty, 0o755))
	write(t, filepath.Join(other, "data"), randomBytes(3<<20, 6))
	mem := filepath.Join(t.TempDir(), "memory")
	memoryImage(t, mem, randomBytes(5<<20, 7))
	// The disk has no data: every chunk of this checkpoint is its image's.
	ref, _ := f.backupMemory(t, empty, mem, nil)
	otherRef, _ := f.backup(t, other, nil)
	must(t, f.repo.Delete(context.Background(), otherRef))
	must(t, f.repo.GC(context.Background()))
	f.verifyClean(t)
	f.reopen(t)
	f.restoreMemoryEqual(t, ref, mem)

	packs, err := f.faulty[0].List(context.Background(), packsDir)
	must(t, err)
	if len(packs) == 0 {
		t.Fatal("no pack holds the memory image")
	}
	for _, p := range packs {
		must(t, os.Remove(filepath.Join(f.dirs[0], p.Name)))
	}
	rep, err := f.repo.Verify(context.Background(), "primary")
	must(t, err)
	if rep.OK() {
		t.Fatal("verify found nothing missing in a location without the memory image's packs")
	}
	if _, err := f.repo.Repair(context.Background(), "primary"); err != nil {
		t.Fatal(err)
	}
	f.verifyClean(t)
	must(t, os.RemoveAll(f.dirs[1]))
	must(t, os.MkdirAll(f.dirs[1], 0o700))
	f.restoreMemoryEqual(t, ref, mem)
}
