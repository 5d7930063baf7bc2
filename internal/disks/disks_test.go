package disks

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// fixture is a Disks over a real btrfs loop pool and a SQLite store, with
// one stopped sandbox whose root holds a file.
type fixture struct {
	t      *testing.T
	pool   *volume.Pool
	store  metadata.Store
	leases *lease.Manager
	d      *Disks
	sb     metadata.Sandbox
	view   *memView
}

// memView records what was published.
type memView struct{ published map[string][]ViewEntry }

func (v *memView) Publish(id string, e []ViewEntry) error { v.published[id] = e; return nil }
func (v *memView) Unpublish(id string) error              { delete(v.published, id); return nil }

const hostPrefix = "host/test/"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	dir := t.TempDir()
	ctx := context.Background()
	pool, err := volume.OpenLoop(ctx, dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	store, err := sqlite.Open(filepath.Join(dir, "cairn.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	acct, err := store.EnsureAccount(ctx, metadata.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, pool: pool, store: store, view: &memView{published: map[string][]ViewEntry{}}}
	f.sb = metadata.Sandbox{ID: "00000000000000a1", AccountID: acct.ID, Name: "web", Image: "busybox", State: metadata.SandboxStopped}
	if err := store.CreateSandbox(ctx, f.sb); err != nil {
		t.Fatal(err)
	}
	if err := pool.Create(ctx, pool.SandboxPath(f.sb.ID)); err != nil {
		t.Fatal(err)
	}
	f.write("state", "one")
	f.restart()
	return f
}

// restart makes a new lease manager and Disks over the same pool and
// store, as a restarted cairnd does, and sweeps.
func (f *fixture) restart() {
	f.t.Helper()
	f.leases = lease.New(f.store, lease.NewOwner("test"), time.Now)
	f.d = New(Config{Pool: f.pool, Store: f.store, Leases: f.leases, View: f.view})
	if err := f.d.Sweep(context.Background(), hostPrefix); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) write(name, data string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.pool.SandboxPath(f.sb.ID), name), []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) take(trigger string) metadata.Checkpoint {
	f.t.Helper()
	ck, _, err := f.d.Take(context.Background(), TakeRequest{Sandbox: f.sb, Trigger: trigger})
	if err != nil {
		f.t.Fatal(err)
	}
	return ck
}

func (f *fixture) exists(rel string) bool {
	ok, err := volume.IsSubvolume(filepath.Join(f.pool.Root(), rel))
	if err != nil {
		f.t.Fatal(err)
	}
	return ok
}

func TestTakeRecordsWhereItsDiskLives(t *testing.T) {
	f := newFixture(t)
	ck := f.take(api.TriggerManual)
	if ck.DiskPath != "checkpoints/"+ck.ID || ck.MemoryPath != "" {
		t.Fatalf("row says disk %q, memory %q", ck.DiskPath, ck.MemoryPath)
	}
	f.write("state", "two")
	h, err := f.d.Open(context.Background(), ck, PurposeRestore)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if b, err := os.ReadFile(filepath.Join(h.Disk, "state")); err != nil || string(b) != "one" {
		t.Fatalf("the checkpoint holds %q, %v; want the state before the change", b, err)
	}
	dst := f.pool.SandboxPath("00000000000000b2")
	if err := h.Materialize(context.Background(), f.pool, dst); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "new"), nil, 0o644); err != nil {
		t.Fatalf("a materialized root is not writable: %v", err)
	}
}

func TestDeleteWaitsForAReaderAndCancelsAnUpload(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ck := f.take(api.TriggerManual)
	upload, err := f.d.Open(ctx, ck, PurposeUpload)
	if err != nil {
		t.Fatal(err)
	}
	restore, err := f.d.Open(ctx, ck, PurposeRestore)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.d.Delete(ctx, ck) }()
	// A restore (or fork) reading it may make it a sandbox's current
	// checkpoint: the delete waits for it before it decides.
	select {
	case err := <-done:
		t.Fatalf("the delete returned (%v) while a restore still read the disk", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := f.store.CheckpointByID(ctx, ck.ID); err != nil {
		t.Fatalf("the row went while a restore read the checkpoint: %v", err)
	}
	if upload.Context().Err() != nil {
		t.Fatal("the upload was cancelled before the delete went ahead")
	}
	restore.Release()
	select {
	case <-upload.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the delete did not cancel the upload's lease")
	}
	if _, err := f.store.CheckpointByID(ctx, ck.ID); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("the row is still there: %v", err)
	}
	if !f.exists(ck.DiskPath) {
		t.Fatal("the disk went while the upload still held it")
	}
	upload.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.exists(ck.DiskPath) {
		t.Fatal("the disk is still there once its last reader let go")
	}
	if q, _ := f.store.DiskDeletes(ctx); len(q) != 0 {
		t.Fatalf("the delete queue still holds %v", q)
	}
}

func TestALeaseOfADeadDaemonIsReclaimedAtStart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ck := f.take(api.TriggerManual)
	// A predecessor on this host held it for an upload when it was killed.
	if _, err := f.store.AcquireLease(ctx, metadata.Lease{ID: "dead", Resource: resourceOf(ck.ID), Owner: hostPrefix + "old",
		Purpose: PurposeUpload, Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Delete(ctx, ck); err != nil {
		t.Fatal(err)
	}
	if !f.exists(ck.DiskPath) {
		t.Fatal("a disk another holder leased was freed before the lease ended")
	}
	f.restart()
	if f.exists(ck.DiskPath) {
		t.Fatal("after the restart the dead holder's lease still keeps the disk")
	}
	if l, _ := f.store.Leases(ctx, ""); len(l) != 0 {
		t.Fatalf("leases left: %v", l)
	}
}

func TestAnExpiredLeaseOfAnotherHolderNoLongerKeepsADisk(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ck := f.take(api.TriggerManual)
	// Another host's reader that stopped renewing: its lease runs out.
	if _, err := f.store.AcquireLease(ctx, metadata.Lease{ID: "gone", Resource: resourceOf(ck.ID), Owner: "host/other/1",
		Purpose: PurposeUploadParent, Expires: time.Now().Add(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Delete(ctx, ck); err != nil {
		t.Fatal(err)
	}
	if !f.exists(ck.DiskPath) {
		t.Fatal("the disk was freed while another host's lease was live")
	}
	time.Sleep(400 * time.Millisecond)
	// What the scheduler's tick does: not this host's lease, so only its
	// expiry frees the disk, without a restart.
	if err := f.d.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if f.exists(ck.DiskPath) {
		t.Fatal("an expired lease still keeps the disk")
	}
}

func TestSweepRemovesOnlyDisksNoRowNames(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ck := f.take(api.TriggerManual)
	// A crash between the snapshot and its row.
	orphan := filepath.Join(f.pool.Root(), "checkpoints", "00000000000000ff")
	if err := f.pool.Snapshot(ctx, f.pool.SandboxPath(f.sb.ID), orphan, true); err != nil {
		t.Fatal(err)
	}
	f.restart()
	if f.exists("checkpoints/00000000000000ff") {
		t.Fatal("an orphan disk survived the sweep")
	}
	if !f.exists(ck.DiskPath) {
		t.Fatal("the sweep deleted a recorded checkpoint's disk")
	}
}

func TestAWipedLocalCopyIsRecordedAsGone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ck := f.take(api.TriggerManual)
	if err := f.pool.Delete(ctx, filepath.Join(f.pool.Root(), ck.DiskPath)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.d.Open(ctx, ck, PurposeRestore); !errors.Is(err, ErrLocalGone) {
		t.Fatalf("open of a wiped disk: %v, want ErrLocalGone", err)
	}
	cur, _ := f.store.CheckpointByID(ctx, ck.ID)
	if cur.DiskPath != "" {
		t.Fatalf("the row still names %q", cur.DiskPath)
	}
	if _, err := f.d.SourceFor(ctx, cur, false, nil, func() string { return "off" }); errdefs.CodeOf(err) != api.CodeNotOffsite {
		t.Fatalf("source of a checkpoint with no copy anywhere: %v", err)
	}
}

func TestTheViewShowsTheFiveNewest(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var seqs []string
	for i := 0; i < 7; i++ {
		seqs = append(seqs, f.take(api.TriggerManual).Seq)
		time.Sleep(2 * time.Millisecond)
	}
	if err := f.d.Publish(ctx, f.sb); err != nil {
		t.Fatal(err)
	}
	got := f.view.published[f.sb.ID]
	if len(got) != BrowseCount || got[0].Name != seqs[6] || got[4].Name != seqs[2] {
		t.Fatalf("published %v, want the five newest of %v, newest first", got, seqs)
	}
}

func TestTheOldBrowseLayoutIsAdopted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ck := f.take(api.TriggerManual)
	// An older cairn kept the five newest in browse/<sandbox>/<seq>.
	old := filepath.Join(f.pool.Root(), "browse", f.sb.ID, ck.Seq)
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(f.pool.Root(), ck.DiskPath)
	if err := f.pool.Snapshot(ctx, disk, old, true); err != nil {
		t.Fatal(err)
	}
	if err := f.pool.Delete(ctx, disk); err != nil {
		t.Fatal(err)
	}
	f.restart()
	if !f.exists(ck.DiskPath) {
		t.Fatal("the disk was not moved back to where its row says")
	}
	if _, err := os.Stat(filepath.Join(f.pool.Root(), "browse")); !os.IsNotExist(err) {
		t.Fatalf("the old browse directory is still there: %v", err)
	}
}

func TestAStartRecordsLocalCopiesThatAreGone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gone, kept := f.take(api.TriggerManual), f.take(api.TriggerManual)
	if err := f.pool.Delete(ctx, filepath.Join(f.pool.Root(), gone.DiskPath)); err != nil {
		t.Fatal(err)
	}
	f.restart()
	if cur, _ := f.store.CheckpointByID(ctx, gone.ID); cur.DiskPath != "" {
		t.Fatalf("after the start the row still names %q", cur.DiskPath)
	}
	if cur, _ := f.store.CheckpointByID(ctx, kept.ID); cur.DiskPath != kept.DiskPath {
		t.Fatalf("the start changed a checkpoint whose disk is there: %q", cur.DiskPath)
	}
	if err := f.d.Publish(ctx, f.sb); err != nil {
		t.Fatal(err)
	}
	if got := f.view.published[f.sb.ID]; len(got) != 1 || got[0].Name != kept.Seq {
		t.Fatalf("the view shows %v, want only %s", got, kept.Seq)
	}
}
