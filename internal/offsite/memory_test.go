package offsite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/repo"
)

// memoryCheckpoint stores a memory checkpoint row whose disk holds files
// and whose memory image is a directory of runsc's files; memory nil lends
// no image (a missing or damaged one).
func (f *fixture) memoryCheckpoint(id string, files map[string][]byte, memory map[string][]byte) metadata.Checkpoint {
	f.t.Helper()
	ck := f.checkpoint(id, files)
	if err := f.store.DeleteCheckpoint(context.Background(), id); err != nil {
		f.t.Fatal(err)
	}
	if memory != nil {
		d := filepath.Join(f.dir, "memory", id)
		writeFiles(f.t, d, memory)
		f.disks.mu.Lock()
		f.disks.memory[id] = d
		f.disks.mu.Unlock()
	}
	ck.HasMemory, ck.MemoryPath, ck.Seq = true, "memory/"+id, ""
	ck, err := f.store.CreateCheckpoint(context.Background(), ck)
	if err != nil {
		f.t.Fatal(err)
	}
	return ck
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func runscImage(t *testing.T) map[string][]byte {
	return map[string][]byte{"checkpoint.img": randomBytes(t, 50<<10), "pages_meta.img": randomBytes(t, 2<<10), "pages.img": randomBytes(t, 4<<20)}
}

func sameFiles(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("%s holds %d entries, want %d", dir, len(entries), len(want))
	}
	for name, data := range want {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: restored differs (%v)", name, err)
		}
	}
}

// A memory checkpoint's upload carries its memory image: uploaded ×2 then
// means both locations hold disk and memory, and both come back byte for
// byte, each on its own.
func TestMemoryCheckpointGoesOffsite(t *testing.T) {
	f := newFixture(t)
	disk := map[string][]byte{"etc/hostname": []byte("web\n"), "data": randomBytes(t, 1<<20)}
	image := runscImage(t)
	ck := f.memoryCheckpoint("m1", disk, image)
	f.drain()
	if st, _ := f.state(ck.ID); st != "uploaded ×2" || !f.svc.Complete(f.row(ck.ID)) {
		t.Fatalf("after the upload: %s, complete %v", st, f.svc.Complete(f.row(ck.ID)))
	}
	out := filepath.Join(t.TempDir(), "disk")
	if err := f.svc.Restore(context.Background(), f.row(ck.ID), out, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "pages.img")); err == nil {
		t.Error("the memory image's files are in the restored disk")
	}
	var seen api.TransferProgress
	mem := filepath.Join(t.TempDir(), "memory")
	if err := f.svc.RestoreMemory(context.Background(), f.row(ck.ID), mem, func(p api.TransferProgress) { seen = p }); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, mem, image)
	var imageBytes int64
	for _, b := range image {
		imageBytes += int64(len(b))
	}
	if seen.BytesTotal != imageBytes || seen.BytesDone != imageBytes {
		t.Errorf("memory restore progress %+v, want %d bytes", seen, imageBytes)
	}

	// A second host with the key and the locations imports it as a memory
	// checkpoint.
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "other.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, err := store.EnsureAccount(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	other := New(f.cfg, store, acct, &dirDisks{dirs: map[string]string{}}, time.Now)
	imported, skipped, _, err := other.Import(context.Background(), api.ImportRequest{All: true})
	if err != nil || len(imported) != 1 || len(skipped) != 0 {
		t.Fatalf("import: %v, %d imported, skipped %v", err, len(imported), skipped)
	}
	if !imported[0].HasMemory || imported[0].MemoryPath != "" {
		t.Fatalf("imported: memory %v at %q, want a memory checkpoint without a local image", imported[0].HasMemory, imported[0].MemoryPath)
	}
	mem2 := filepath.Join(t.TempDir(), "memory2")
	if err := other.RestoreMemory(context.Background(), imported[0], mem2, nil); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, mem2, image)
}

// A memory checkpoint uploaded before memory images went off-site (its
// manifest holds the disk only) is not off-site: it is uploaded again with
// its image, and the old manifest is deleted.
func TestMemoryCheckpointUploadedBeforeIsUploadedAgain(t *testing.T) {
	f := newFixture(t)
	disk := map[string][]byte{"data": randomBytes(t, 1<<20)}
	image := runscImage(t)
	ck := f.memoryCheckpoint("m1", disk, image)
	// The old upload: the disk alone.
	r := f.svc.ensureRepo(context.Background())
	if r == nil {
		t.Fatal("repository not open")
	}
	old, _, err := r.Backup(context.Background(), f.disks.dirs["m1"], repo.BackupOptions{Meta: metaOf(ck, accessorder.Order{})})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.SetCheckpointOffsite(context.Background(), ck.ID, old.ID); err != nil {
		t.Fatal(err)
	}
	f.restart() // a daemon of this version meets it
	f.svc.ensureRepo(context.Background())
	cks, _ := f.store.ListCheckpoints(context.Background(), f.acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
	f.svc.learnMemory(context.Background(), f.svc.repo, cks)
	st, d := f.state(ck.ID)
	if st != api.OffsitePending || !strings.Contains(d.Error, "memory image not yet") || f.svc.Complete(f.row(ck.ID)) {
		t.Fatalf("a memory checkpoint whose manifest lacks its image: %s (%s), complete %v", st, d.Error, f.svc.Complete(f.row(ck.ID)))
	}
	f.drain()
	now := f.row(ck.ID)
	if st, _ := f.state(ck.ID); st != "uploaded ×2" || now.OffsiteManifest == old.ID {
		t.Fatalf("after the queue ran: %s, manifest %s (old %s)", st, now.OffsiteManifest, old.ID)
	}
	for _, ref := range f.svc.repo.List() {
		if ref.ID == old.ID {
			t.Error("the old manifest is still in the repository")
		}
	}
	mem := filepath.Join(t.TempDir(), "memory")
	if err := f.svc.RestoreMemory(context.Background(), now, mem, nil); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, mem, image)
}

// A memory checkpoint whose image is missing here goes off-site with its
// disk alone (all there is to restore), and is not tried again; asking for
// its memory from off-site is K04.
func TestMemoryCheckpointWithoutItsImageUploadsTheDisk(t *testing.T) {
	f := newFixture(t)
	ck := f.memoryCheckpoint("m1", map[string][]byte{"data": []byte("x")}, nil)
	f.drain()
	if st, _ := f.state(ck.ID); st != "uploaded ×2" {
		t.Fatalf("after the upload: %s", st)
	}
	err := f.svc.RestoreMemory(context.Background(), f.row(ck.ID), filepath.Join(t.TempDir(), "m"), nil)
	if errdefs.CodeOf(err) != api.CodeMemoryImageBad {
		t.Fatalf("memory restore of a disk-only upload: %v, want K04", err)
	}
}
