package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// testDiskPaths runs the tests of where checkpoint disks live and of the
// disk deletes, each with its own database.
func testDiskPaths(t *testing.T, open OpenFunc) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, OpenFunc)
	}{
		{"RoundTrip", testDiskPathsRoundTrip},
		{"InvalidInput", testDiskPathsInvalidInput},
		{"Unique", testDiskPathsUnique},
		{"SetCheckpointDisk", testSetCheckpointDisk},
		{"DropLocalCopy", testDropLocalCopy},
		{"DeleteQueuesPaths", testDiskDeletesOnDelete},
		{"QueuedPathsAreNotClaimed", testDiskDeletesNotClaimed},
		{"ConcurrentSetAndDelete", testDiskDeletesConcurrent},
		{"Persistence", testDiskPathsPersistence},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// withPaths returns ck with the paths cairnd gives a checkpoint: its disk
// under checkpoints/, its memory image (if it has memory) under memory/.
func withPaths(ck metadata.Checkpoint) metadata.Checkpoint {
	ck.DiskPath = "checkpoints/" + ck.ID
	if ck.HasMemory {
		ck.MemoryPath = "memory/" + ck.ID
	}
	return ck
}

func diskDeletes(t *testing.T, s metadata.Store) []metadata.DiskDelete {
	t.Helper()
	ds, err := s.DiskDeletes(context.Background())
	if err != nil {
		t.Fatalf("DiskDeletes: %v", err)
	}
	return ds
}

// sameDeletes fails unless got is want, in that order, QueuedAt compared
// as an instant and required in UTC.
func sameDeletes(t *testing.T, what string, got []metadata.DiskDelete, want ...metadata.DiskDelete) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		checkUTC(t, what, got[i].QueuedAt)
		ok = got[i].Path == want[i].Path && got[i].CheckpointID == want[i].CheckpointID && got[i].QueuedAt.Equal(want[i].QueuedAt)
	}
	if !ok {
		t.Errorf("%s: DiskDeletes\n got  %+v\n want %+v", what, got, want)
	}
}

func forget(t *testing.T, s metadata.Store, path string) {
	t.Helper()
	if err := s.ForgetDiskDelete(context.Background(), path); err != nil {
		t.Fatalf("ForgetDiskDelete(%q): %v", path, err)
	}
}

// testDiskPathsRoundTrip: the paths given to CreateCheckpoint come back
// from every read; a checkpoint without them has "".
func testDiskPathsRoundTrip(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)

	named := withPaths(newCheckpoint("c000000000000001", sb))
	named.Name = "snap"
	named = createCk(t, s, named)
	if named.DiskPath != "checkpoints/c000000000000001" || named.MemoryPath != "" {
		t.Errorf("CreateCheckpoint returned paths %q, %q", named.DiskPath, named.MemoryPath)
	}
	mem := withPaths(newMemory("c000000000000002", sb, "auto-1"))
	mem.DiskPath = "elsewhere/deep/disk-2" // any clean relative path
	mem = createCk(t, s, mem)
	if mem.DiskPath != "elsewhere/deep/disk-2" || mem.MemoryPath != "memory/c000000000000002" {
		t.Errorf("CreateCheckpoint returned paths %q, %q", mem.DiskPath, mem.MemoryPath)
	}
	offsiteOnly := newMemory("c000000000000003", sb, "auto-2") // memory, but neither copy here
	offsiteOnly = createCk(t, s, offsiteOnly)

	for _, want := range []metadata.Checkpoint{named, mem, offsiteOnly} {
		sameCheckpoint(t, "CheckpointByID "+want.ID, ckByID(t, s, want.ID), want)
		got, err := s.CheckpointBySeq(ctx, sb.ID, want.Seq)
		if err != nil {
			t.Fatal(err)
		}
		sameCheckpoint(t, "CheckpointBySeq "+want.Seq, got, want)
	}
	got, err := s.CheckpointByName(ctx, a.ID, "snap")
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, "CheckpointByName", got, named)
	latest, err := s.LatestCheckpoint(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, "LatestCheckpoint", latest, offsiteOnly)
	all, err := s.AllCheckpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, cks := range map[string][]metadata.Checkpoint{
		"ListCheckpoints": listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true}),
		"AllCheckpoints":  all,
	} {
		if len(cks) != 3 {
			t.Fatalf("%s has %d checkpoints, want 3", name, len(cks))
		}
		for i, want := range []metadata.Checkpoint{named, mem, offsiteOnly} {
			sameCheckpoint(t, name, cks[i], want)
		}
	}
	sameDeletes(t, "a new store", diskDeletes(t, s))
}

// testDiskPathsInvalidInput: paths that are absolute, unclean, the pool's
// root or lead out of it are refused, by CreateCheckpoint and by
// SetCheckpointDisk, and so are a memory path without memory and one path
// for both.
func testDiskPathsInvalidInput(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	badPaths := []string{"/checkpoints/c1", "/", "..", "../c1", "../../etc", "checkpoints/../../etc", "checkpoints/../c1",
		"./checkpoints/c1", "checkpoints//c1", "checkpoints/c1/", "checkpoints/.", ".", "c1\x00", "checkpoints/c1/.."}
	for _, p := range badPaths {
		for _, field := range []string{"disk", "memory"} {
			ck := newMemory("c000000000000001", sb, "auto-1")
			if field == "disk" {
				ck.DiskPath = p
			} else {
				ck.MemoryPath = p
			}
			_, err := s.CreateCheckpoint(ctx, ck)
			wantPlainErr(t, fmt.Sprintf("CreateCheckpoint with %s path %q", field, p), err)
		}
	}
	noMemory := withPaths(newCheckpoint("c000000000000001", sb))
	noMemory.MemoryPath = "memory/c000000000000001"
	_, err := s.CreateCheckpoint(ctx, noMemory)
	wantPlainErr(t, "CreateCheckpoint with a memory path and no memory", err)
	both := withPaths(newMemory("c000000000000001", sb, "auto-1"))
	both.MemoryPath = both.DiskPath
	_, err = s.CreateCheckpoint(ctx, both)
	wantPlainErr(t, "CreateCheckpoint with one path for disk and memory", err)
	sameList(t, "after invalid creations", ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true})))

	ck := createCk(t, s, withPaths(newMemory("c000000000000001", sb, "auto-1")))
	for _, p := range badPaths {
		wantPlainErr(t, fmt.Sprintf("SetCheckpointDisk(%q)", p), s.SetCheckpointDisk(ctx, ck.ID, p))
	}
	wantPlainErr(t, "SetCheckpointDisk to its own memory path", s.SetCheckpointDisk(ctx, ck.ID, ck.MemoryPath))
	sameCheckpoint(t, "after invalid SetCheckpointDisk", ckByID(t, s, ck.ID), ck)
	sameDeletes(t, "after invalid SetCheckpointDisk", diskDeletes(t, s))

	// The checks are ValidatePoolPath's, usable by the callers too.
	for _, p := range badPaths {
		if metadata.ValidatePoolPath(p) == nil {
			t.Errorf("ValidatePoolPath(%q) = nil", p)
		}
	}
	for _, p := range []string{"checkpoints/c1", "c1", "a/b/c", "..c1", "checkpoints/..c1", "memory/c1.img"} {
		if err := metadata.ValidatePoolPath(p); err != nil {
			t.Errorf("ValidatePoolPath(%q) = %v", p, err)
		}
	}
	if metadata.ValidatePoolPath("") == nil {
		t.Errorf(`ValidatePoolPath("") = nil`)
	}
}

// testDiskPathsUnique: no two checkpoints name the same path, as disk or
// as memory image, whichever way round.
func testDiskPathsUnique(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	sb := newSandbox("0000000000000001", a.ID, "web")
	bobs := newSandbox("b000000000000001", b.ID, "web")
	create(t, s, sb)
	create(t, s, bobs)
	first := createCk(t, s, withPaths(newMemory("c000000000000001", sb, "auto-1")))

	for what, mutate := range map[string]func(*metadata.Checkpoint){
		"its disk path as disk":     func(ck *metadata.Checkpoint) { ck.DiskPath = first.DiskPath },
		"its memory path as memory": func(ck *metadata.Checkpoint) { ck.MemoryPath = first.MemoryPath },
		"its disk path as memory":   func(ck *metadata.Checkpoint) { ck.MemoryPath = first.DiskPath },
		"its memory path as disk":   func(ck *metadata.Checkpoint) { ck.DiskPath = first.MemoryPath },
	} {
		for _, owner := range []metadata.Sandbox{sb, bobs} { // the pool is shared by every account
			ck := withPaths(newMemory("c000000000000002", owner, "auto-2"))
			mutate(&ck)
			_, err := s.CreateCheckpoint(ctx, ck)
			wantErr(t, "CreateCheckpoint with another checkpoint's "+what+" in account "+owner.Name, err, metadata.ErrConflict)
		}
	}
	sameList(t, "after the conflicts", ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true})), first.ID)
	sameList(t, "bob's after the conflicts", ckIDs(listCks(t, s, b.ID, metadata.CheckpointFilter{IncludeAuto: true})))

	second := createCk(t, s, withPaths(newMemory("c000000000000002", bobs, "auto-2")))
	for _, p := range []string{first.DiskPath, first.MemoryPath} {
		err := s.SetCheckpointDisk(ctx, second.ID, p)
		wantErr(t, fmt.Sprintf("SetCheckpointDisk to the other's %q", p), err, metadata.ErrConflict)
	}
	sameCheckpoint(t, "after the refused SetCheckpointDisk", ckByID(t, s, second.ID), second)
	sameCheckpoint(t, "the first", ckByID(t, s, first.ID), first)
	sameDeletes(t, "after the refused SetCheckpointDisk", diskDeletes(t, s))

	// Checkpoints without local copies do not collide on "".
	createCk(t, s, newMemory("c000000000000003", sb, "auto-3"))
	createCk(t, s, newMemory("c000000000000004", sb, "auto-4"))
}

// testSetCheckpointDisk: it changes the disk path alone; a path it
// replaces goes on DiskDeletes in the same call, "" never does.
func testSetCheckpointDisk(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	ck := createCk(t, s, withPaths(newMemory("c000000000000001", sb, "auto-1")))
	other := createCk(t, s, withPaths(newCheckpoint("c000000000000002", sb)))
	old := ck.DiskPath

	// Lost: "" and the old path queued.
	clock.Advance(time.Minute)
	if err := s.SetCheckpointDisk(ctx, ck.ID, ""); err != nil {
		t.Fatalf("SetCheckpointDisk(\"\"): %v", err)
	}
	want := ck
	want.DiskPath = ""
	sameCheckpoint(t, "after losing the local copy", ckByID(t, s, ck.ID), want)
	sameCheckpoint(t, "the other checkpoint", ckByID(t, s, other.ID), other)
	lost := metadata.DiskDelete{Path: old, CheckpointID: ck.ID, QueuedAt: stored(clock.Now())}
	sameDeletes(t, "after losing the local copy", diskDeletes(t, s), lost)
	// "" again changes nothing and queues nothing.
	clock.Advance(time.Minute)
	if err := s.SetCheckpointDisk(ctx, ck.ID, ""); err != nil {
		t.Fatal(err)
	}
	sameDeletes(t, "after setting \"\" again", diskDeletes(t, s), lost)

	// Put back elsewhere: nothing to queue.
	if err := s.SetCheckpointDisk(ctx, ck.ID, "checkpoints/c000000000000001.fetched"); err != nil {
		t.Fatalf("SetCheckpointDisk(put back): %v", err)
	}
	want.DiskPath = "checkpoints/c000000000000001.fetched"
	sameCheckpoint(t, "after putting it back", ckByID(t, s, ck.ID), want)
	sameDeletes(t, "after putting it back", diskDeletes(t, s), lost)
	// The same path again: nothing changes.
	if err := s.SetCheckpointDisk(ctx, ck.ID, want.DiskPath); err != nil {
		t.Errorf("SetCheckpointDisk(the path it has): %v", err)
	}
	sameDeletes(t, "after setting the same path", diskDeletes(t, s), lost)

	// Moved: the path it replaces is queued after the older one.
	clock.Advance(time.Minute)
	if err := s.SetCheckpointDisk(ctx, ck.ID, "checkpoints/c000000000000001.moved"); err != nil {
		t.Fatal(err)
	}
	moved := metadata.DiskDelete{Path: "checkpoints/c000000000000001.fetched", CheckpointID: ck.ID, QueuedAt: stored(clock.Now())}
	sameDeletes(t, "after moving it", diskDeletes(t, s), lost, moved)
	want.DiskPath = "checkpoints/c000000000000001.moved"
	sameCheckpoint(t, "after moving it", ckByID(t, s, ck.ID), want)

	// Unknown checkpoint.
	for _, p := range []string{"", "checkpoints/cfffffffffffffff"} {
		err := s.SetCheckpointDisk(ctx, "cfffffffffffffff", p)
		wantErr(t, fmt.Sprintf("SetCheckpointDisk(unknown, %q)", p), err, metadata.ErrNotFound)
	}
	sameDeletes(t, "at the end", diskDeletes(t, s), lost, moved)

	// A cancelled call changes nothing.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.SetCheckpointDisk(cancelled, ck.ID, ""); err == nil {
		t.Errorf("SetCheckpointDisk with a cancelled context succeeded")
	}
	sameCheckpoint(t, "after a cancelled SetCheckpointDisk", ckByID(t, s, ck.ID), want)
	sameDeletes(t, "after a cancelled SetCheckpointDisk", diskDeletes(t, s), lost, moved)
}

// testDiskDeletesOnDelete: DeleteCheckpoint queues the paths the
// checkpoint named, oldest first; ForgetDiskDelete takes them off.
func testDiskDeletesOnDelete(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	sb := newSandbox("0000000000000001", a.ID, "web")
	bobs := newSandbox("b000000000000001", b.ID, "web")
	create(t, s, sb)
	create(t, s, bobs)
	mem := createCk(t, s, withPaths(newMemory("c000000000000001", sb, "auto-1")))
	disk := createCk(t, s, withPaths(newCheckpoint("c000000000000002", sb)))
	bobsCk := createCk(t, s, withPaths(newCheckpoint("c000000000000003", bobs)))
	none := createCk(t, s, newMemory("c000000000000004", sb, "auto-2"))

	clock.Advance(time.Minute)
	if err := s.DeleteCheckpoint(ctx, disk.ID); err != nil {
		t.Fatal(err)
	}
	dDisk := metadata.DiskDelete{Path: disk.DiskPath, CheckpointID: disk.ID, QueuedAt: stored(clock.Now())}
	sameDeletes(t, "after deleting a disk checkpoint", diskDeletes(t, s), dDisk)

	clock.Advance(time.Minute)
	if err := s.DeleteCheckpoint(ctx, bobsCk.ID); err != nil {
		t.Fatal(err)
	}
	dBob := metadata.DiskDelete{Path: bobsCk.DiskPath, CheckpointID: bobsCk.ID, QueuedAt: stored(clock.Now())}
	// Created earlier, queued later: the queue is in queueing order.
	if err := s.DeleteCheckpoint(ctx, mem.ID); err != nil {
		t.Fatal(err)
	}
	dMemDisk := metadata.DiskDelete{Path: mem.DiskPath, CheckpointID: mem.ID, QueuedAt: stored(clock.Now())}
	dMem := metadata.DiskDelete{Path: mem.MemoryPath, CheckpointID: mem.ID, QueuedAt: stored(clock.Now())}
	// The disk and the memory image were queued in one call, at one instant: either order.
	got := diskDeletes(t, s)
	if len(got) == 4 && got[2].Path == mem.MemoryPath {
		got[2], got[3] = got[3], got[2]
	}
	sameDeletes(t, "after deleting a memory checkpoint (the pool's queue, every account's)", got, dDisk, dBob, dMemDisk, dMem)

	// Nothing to queue for a checkpoint without local copies, nor for a
	// delete that fails.
	if err := s.DeleteCheckpoint(ctx, none.ID); err != nil {
		t.Fatal(err)
	}
	err := s.DeleteCheckpoint(ctx, mem.ID)
	wantErr(t, "second DeleteCheckpoint", err, metadata.ErrNotFound)
	if n := len(diskDeletes(t, s)); n != 4 {
		t.Errorf("%d disk deletes after deleting a checkpoint without paths and a failed delete, want 4", n)
	}
	keep := createCk(t, s, withPaths(newCheckpoint("c000000000000005", sb)))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.DeleteCheckpoint(cancelled, keep.ID); err == nil {
		t.Errorf("DeleteCheckpoint with a cancelled context succeeded")
	}
	sameCheckpoint(t, "after a cancelled delete", ckByID(t, s, keep.ID), keep)
	if n := len(diskDeletes(t, s)); n != 4 {
		t.Errorf("%d disk deletes after a cancelled delete, want 4", n)
	}

	// Forgetting: one at a time, a missing one is no error.
	forget(t, s, dBob.Path)
	forget(t, s, dBob.Path)
	forget(t, s, "checkpoints/never-queued")
	forget(t, s, keep.DiskPath) // named by a checkpoint, not queued: nothing happens
	got = diskDeletes(t, s)
	if len(got) == 3 && got[1].Path == mem.MemoryPath {
		got[1], got[2] = got[2], got[1]
	}
	sameDeletes(t, "after forgetting", got, dDisk, dMemDisk, dMem)
	sameCheckpoint(t, "the checkpoint whose path was 'forgotten'", ckByID(t, s, keep.ID), keep)
	for _, d := range []metadata.DiskDelete{dDisk, dMemDisk, dMem} {
		forget(t, s, d.Path)
	}
	sameDeletes(t, "after forgetting all", diskDeletes(t, s))
}

// testDiskDeletesNotClaimed: a path on DiskDeletes may be being deleted:
// no checkpoint can name it until it is forgotten.
func testDiskDeletesNotClaimed(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	gone := createCk(t, s, withPaths(newMemory("c000000000000001", sb, "auto-1")))
	if err := s.DeleteCheckpoint(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	lost := createCk(t, s, withPaths(newCheckpoint("c000000000000002", sb)))
	if err := s.SetCheckpointDisk(ctx, lost.ID, ""); err != nil {
		t.Fatal(err)
	}
	queued := diskDeletes(t, s)

	// A new checkpoint with the deleted one's id (and so its paths).
	again := withPaths(newMemory(gone.ID, sb, "auto-2"))
	_, err := s.CreateCheckpoint(ctx, again)
	wantErr(t, "CreateCheckpoint with a queued disk path", err, metadata.ErrConflict)
	memOnly := newMemory(gone.ID, sb, "auto-2")
	memOnly.MemoryPath = gone.MemoryPath
	_, err = s.CreateCheckpoint(ctx, memOnly)
	wantErr(t, "CreateCheckpoint with a queued memory path", err, metadata.ErrConflict)
	// Putting a lost copy back where it was, while that is queued.
	err = s.SetCheckpointDisk(ctx, lost.ID, lost.DiskPath)
	wantErr(t, "SetCheckpointDisk back to its queued path", err, metadata.ErrConflict)
	err = s.SetCheckpointDisk(ctx, lost.ID, gone.DiskPath)
	wantErr(t, "SetCheckpointDisk to another's queued path", err, metadata.ErrConflict)
	sameDeletes(t, "after the refusals", diskDeletes(t, s), queued...)
	_, err = s.CheckpointByID(ctx, gone.ID)
	wantErr(t, "the refused checkpoint", err, metadata.ErrNotFound)

	// Once forgotten (deleted from the pool), the paths can be named again.
	for _, d := range queued {
		forget(t, s, d.Path)
	}
	createCk(t, s, again)
	if err := s.SetCheckpointDisk(ctx, lost.ID, lost.DiskPath); err != nil {
		t.Errorf("SetCheckpointDisk back once forgotten: %v", err)
	}
	sameDeletes(t, "at the end", diskDeletes(t, s))
}

// testDiskDeletesConcurrent races SetCheckpointDisk against
// DeleteCheckpoint of the same checkpoint: whichever wins, every path the
// checkpoint ever named ends on DiskDeletes, none is left that nothing
// names and nothing will delete.
func testDiskDeletesConcurrent(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)

	const rounds = 20
	var mu sync.Mutex
	named := map[string]bool{} // every path a checkpoint named
	for r := range rounds {
		ck := createCk(t, s, withPaths(newMemory(fmt.Sprintf("c%015x", r), sb, fmt.Sprintf("auto-%d", r))))
		named[ck.DiskPath], named[ck.MemoryPath] = true, true
		var race sync.WaitGroup
		race.Go(func() {
			moved := ck.DiskPath + ".moved"
			err := s.SetCheckpointDisk(ctx, ck.ID, moved)
			switch {
			case err == nil:
				mu.Lock()
				named[moved] = true
				mu.Unlock()
			case !errors.Is(err, metadata.ErrNotFound):
				t.Errorf("SetCheckpointDisk: %v", err)
			}
		})
		race.Go(func() {
			if err := s.DeleteCheckpoint(ctx, ck.ID); err != nil {
				t.Errorf("DeleteCheckpoint: %v", err)
			}
		})
		race.Wait()
	}
	var got []string
	for _, d := range diskDeletes(t, s) {
		got = append(got, d.Path)
	}
	var want []string
	for p := range named {
		want = append(want, p)
	}
	slices.Sort(got)
	slices.Sort(want)
	sameList(t, "DiskDeletes after the races", got, want...)
}

// testDiskPathsPersistence: paths and the queue survive a reopen.
func testDiskPathsPersistence(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	ck := createCk(t, s, withPaths(newMemory("c000000000000001", sb, "auto-1")))
	gone := createCk(t, s, withPaths(newCheckpoint("c000000000000002", sb)))
	clock.Advance(time.Second)
	if err := s.SetCheckpointDisk(ctx, ck.ID, "checkpoints/c000000000000001.b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCheckpoint(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	want, wantQueue := ckByID(t, s, ck.ID), diskDeletes(t, s)
	if len(wantQueue) != 2 {
		t.Fatalf("DiskDeletes before reopen = %+v, want 2", wantQueue)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(time.Hour)
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	sameCheckpoint(t, "after reopen", ckByID(t, s2, ck.ID), want)
	sameDeletes(t, "after reopen", diskDeletes(t, s2), wantQueue...)
	// The rules hold after the reopen.
	_, err := s2.CreateCheckpoint(ctx, withPaths(newCheckpoint(gone.ID, sb)))
	wantErr(t, "CreateCheckpoint with a queued path after reopen", err, metadata.ErrConflict)
}

// testDropLocalCopy: letting a memory checkpoint's local copy go queues its
// disk and its memory image and keeps that it holds memory.
func testDropLocalCopy(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	ck := createCk(t, s, withPaths(newMemory("c000000000000001", sb, "auto-1")))
	other := createCk(t, s, withPaths(newCheckpoint("c000000000000002", sb)))
	clock.Advance(time.Minute)
	if err := s.DropLocalCopy(ctx, ck.ID); err != nil {
		t.Fatalf("DropLocalCopy: %v", err)
	}
	want := ck
	want.DiskPath, want.MemoryPath = "", ""
	sameCheckpoint(t, "after dropping the local copy", ckByID(t, s, ck.ID), want)
	sameCheckpoint(t, "the other checkpoint", ckByID(t, s, other.ID), other)
	at := stored(clock.Now())
	dropped := []metadata.DiskDelete{{Path: ck.DiskPath, CheckpointID: ck.ID, QueuedAt: at}, {Path: ck.MemoryPath, CheckpointID: ck.ID, QueuedAt: at}}
	sameDeletes(t, "after dropping the local copy", diskDeletes(t, s), dropped...)
	// Again: nothing changes, nothing more is queued.
	clock.Advance(time.Minute)
	if err := s.DropLocalCopy(ctx, ck.ID); err != nil {
		t.Fatal(err)
	}
	sameDeletes(t, "after dropping it again", diskDeletes(t, s), dropped...)
	wantErr(t, "DropLocalCopy of a missing checkpoint", s.DropLocalCopy(ctx, "c00000000000dead"), metadata.ErrNotFound)
}
