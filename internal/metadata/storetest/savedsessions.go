package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// newMemory returns a valid checkpoint of sb that holds memory, as
// cairn stop --snapshot takes it: automatic, with the given seq.
func newMemory(id string, sb metadata.Sandbox, seq string) metadata.Checkpoint {
	ck := newAuto(id, sb, seq, metadata.TriggerStop)
	ck.Consistency, ck.HasMemory = metadata.ConsistencyFrozen, true
	return ck
}

// sameSandboxEverywhere fails unless every read of the account's sandboxes
// (by id, by name, listed, all) returns want for want.ID.
func sameSandboxEverywhere(t *testing.T, s metadata.Store, what string, want metadata.Sandbox) {
	t.Helper()
	ctx := context.Background()
	sameSandbox(t, what+": SandboxByID", byID(t, s, want.ID), want)
	got, err := s.SandboxByName(ctx, want.AccountID, want.Name)
	if err != nil {
		t.Fatalf("%s: SandboxByName(%q): %v", what, want.Name, err)
	}
	sameSandbox(t, what+": SandboxByName", got, want)
	list, err := s.ListSandboxes(ctx, want.AccountID, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.AllSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, sbs := range map[string][]metadata.Sandbox{"ListSandboxes": list, "AllSandboxes": all} {
		found := false
		for _, sb := range sbs {
			if sb.ID == want.ID {
				sameSandbox(t, what+": "+name, sb, want)
				found = true
			}
		}
		if !found {
			t.Errorf("%s: %s lacks sandbox %s", what, name, want.ID)
		}
	}
}

func testResumeCheckpointCreate(t *testing.T, open OpenFunc) {
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	src := newSandbox("0000000000000001", a.ID, "src")
	create(t, s, src)
	mem := createCk(t, s, newMemory("c000000000000001", src, "auto-20310517T083000Z"))

	// Without one: none, wherever the sandbox is read.
	want := src
	want.CreatedAt, want.UpdatedAt = stored(clock.Now()), stored(clock.Now())
	sameSandboxEverywhere(t, s, "no resume checkpoint", want)

	// Given at create, it is stored as given and read back everywhere: a
	// fork resuming from its parent's memory checkpoint…
	fork := newSandbox("0000000000000002", a.ID, "fork")
	fork.ParentID, fork.SourceCheckpoint, fork.ResumeCheckpoint = src.ID, mem.ID, mem.ID
	create(t, s, fork)
	want = fork
	want.CreatedAt, want.UpdatedAt = stored(clock.Now()), stored(clock.Now())
	sameSandboxEverywhere(t, s, "fork created with a resume checkpoint", want)

	// …and, unchecked like the other references, one naming no checkpoint.
	free := newSandbox("0000000000000003", a.ID, "free")
	free.ResumeCheckpoint = "cfffffffffffffff"
	create(t, s, free)
	want = free
	want.CreatedAt, want.UpdatedAt = stored(clock.Now()), stored(clock.Now())
	sameSandboxEverywhere(t, s, "created with an unknown resume checkpoint", want)
}

func testSetResumeCheckpoint(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	create(t, s, newSandbox("0000000000000001", a.ID, "web"))
	create(t, s, newSandbox("0000000000000002", a.ID, "db"))
	web, other := byID(t, s, "0000000000000001"), byID(t, s, "0000000000000002")
	mem := createCk(t, s, newMemory("c000000000000001", web, "auto-20310517T083000Z"))
	manual := newCheckpoint("c000000000000002", web)
	manual.HasMemory = true
	manual = createCk(t, s, manual)
	disk := createCk(t, s, newCheckpoint("c000000000000003", web)) // no memory
	if err := s.SetCurrentCheckpoint(ctx, web.ID, disk.ID); err != nil {
		t.Fatal(err)
	}
	want := byID(t, s, web.ID)

	// It moves the resume checkpoint and UpdatedAt only, and every read
	// carries it.
	clock.Advance(42 * time.Second)
	if err := s.SetResumeCheckpoint(ctx, web.ID, mem.ID); err != nil {
		t.Fatalf("SetResumeCheckpoint: %v", err)
	}
	want.ResumeCheckpoint, want.UpdatedAt = mem.ID, stored(clock.Now())
	sameSandboxEverywhere(t, s, "after SetResumeCheckpoint", want)
	sameSandbox(t, "the other sandbox", byID(t, s, other.ID), other)
	sameCheckpoint(t, "the resume checkpoint", ckByID(t, s, mem.ID), mem)

	// The same one again still bumps UpdatedAt.
	clock.Advance(time.Minute)
	if err := s.SetResumeCheckpoint(ctx, web.ID, mem.ID); err != nil {
		t.Fatal(err)
	}
	want.UpdatedAt = stored(clock.Now())
	sameSandbox(t, "after SetResumeCheckpoint again", byID(t, s, web.ID), want)

	// Any checkpoint of the sandbox: manual, or without memory (whether
	// it holds memory is the caller's to check).
	for _, ck := range []metadata.Checkpoint{manual, disk} {
		clock.Advance(time.Minute)
		if err := s.SetResumeCheckpoint(ctx, web.ID, ck.ID); err != nil {
			t.Fatalf("SetResumeCheckpoint(%s): %v", ck.Seq, err)
		}
		want.ResumeCheckpoint, want.UpdatedAt = ck.ID, stored(clock.Now())
		sameSandbox(t, "after SetResumeCheckpoint("+ck.Seq+")", byID(t, s, web.ID), want)
	}

	// The current checkpoint and the resume checkpoint are independent.
	clock.Advance(time.Minute)
	if err := s.SetCurrentCheckpoint(ctx, web.ID, mem.ID); err != nil {
		t.Fatal(err)
	}
	want.CurrentCheckpoint, want.UpdatedAt = mem.ID, stored(clock.Now())
	sameSandbox(t, "after SetCurrentCheckpoint", byID(t, s, web.ID), want)

	// "" clears it, and bumps UpdatedAt even when there is none.
	for range 2 {
		clock.Advance(time.Minute)
		if err := s.SetResumeCheckpoint(ctx, web.ID, ""); err != nil {
			t.Fatalf("SetResumeCheckpoint(\"\"): %v", err)
		}
		want.ResumeCheckpoint, want.UpdatedAt = "", stored(clock.Now())
		sameSandboxEverywhere(t, s, "after clearing the resume checkpoint", want)
	}
	sameSandbox(t, "the other sandbox at the end", byID(t, s, other.ID), other)
}

func testResumeCheckpointNotFound(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	web := newSandbox("0000000000000001", a.ID, "web")
	db := newSandbox("0000000000000002", a.ID, "db")
	bobs := newSandbox("b000000000000001", b.ID, "bobs")
	for _, sb := range []metadata.Sandbox{web, db, bobs} {
		create(t, s, sb)
	}
	mem := createCk(t, s, newMemory("c000000000000001", web, "auto-1"))
	gone := createCk(t, s, newMemory("c000000000000002", web, "auto-2"))
	dbs := createCk(t, s, newMemory("c000000000000003", db, "auto-1"))
	bobsCk := createCk(t, s, newMemory("c000000000000004", bobs, "auto-1"))
	// An automatic checkpoint needs no sandbox row: one of bob's can carry
	// web's id. It is still no checkpoint of web.
	impostor := newMemory("c000000000000005", web, "auto-impostor")
	impostor.AccountID = b.ID
	impostor = createCk(t, s, impostor)
	if err := s.DeleteCheckpoint(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetResumeCheckpoint(ctx, web.ID, mem.ID); err != nil {
		t.Fatal(err)
	}
	want := byID(t, s, web.ID)

	clock.Advance(time.Minute)
	for what, id := range map[string]string{
		"unknown checkpoint":                          "cfffffffffffffff",
		"deleted checkpoint of the sandbox":           gone.ID,
		"another sandbox's checkpoint, same account":  dbs.ID,
		"another account's checkpoint":                bobsCk.ID,
		"another account's checkpoint with its id":    impostor.ID,
		"a checkpoint's seq instead of its id":        mem.Seq,
		"the sandbox id instead of a checkpoint's id": web.ID,
	} {
		err := s.SetResumeCheckpoint(ctx, web.ID, id)
		wantErr(t, "SetResumeCheckpoint("+what+")", err, metadata.ErrNotFound)
	}
	sameSandbox(t, "after failed SetResumeCheckpoint", byID(t, s, web.ID), want)

	// Unknown sandbox, with or without a checkpoint id.
	for _, id := range []string{"", mem.ID} {
		err := s.SetResumeCheckpoint(ctx, "ffffffffffffffff", id)
		wantErr(t, fmt.Sprintf("SetResumeCheckpoint(unknown sandbox, %q)", id), err, metadata.ErrNotFound)
	}
	// A deleted sandbox, though its checkpoints remain.
	if err := s.DeleteSandbox(ctx, db.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", dbs.ID} {
		err := s.SetResumeCheckpoint(ctx, db.ID, id)
		wantErr(t, fmt.Sprintf("SetResumeCheckpoint(deleted sandbox, %q)", id), err, metadata.ErrNotFound)
	}

	// A cancelled context: an error, nothing changes.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.SetResumeCheckpoint(cancelled, web.ID, ""); err == nil {
		t.Errorf("SetResumeCheckpoint with a cancelled context succeeded")
	}
	sameSandbox(t, "after a cancelled SetResumeCheckpoint", byID(t, s, web.ID), want)
}

func testDeleteCheckpointClearsResume(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	create(t, s, newSandbox("0000000000000001", a.ID, "web"))
	create(t, s, newSandbox("0000000000000002", a.ID, "db"))
	create(t, s, newSandbox("0000000000000003", a.ID, "plain"))
	create(t, s, newSandbox("b000000000000001", b.ID, "bobs"))
	web := byID(t, s, "0000000000000001")
	mem := createCk(t, s, newMemory("c000000000000001", web, "auto-1"))
	cur := createCk(t, s, newCheckpoint("c000000000000002", web))
	dbs := createCk(t, s, newMemory("c000000000000003", byID(t, s, "0000000000000002"), "auto-1"))
	bobsCk := createCk(t, s, newMemory("c000000000000004", byID(t, s, "b000000000000001"), "auto-1"))
	if err := s.SetResumeCheckpoint(ctx, web.ID, mem.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCurrentCheckpoint(ctx, web.ID, cur.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetResumeCheckpoint(ctx, "0000000000000002", dbs.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetResumeCheckpoint(ctx, "b000000000000001", bobsCk.ID); err != nil {
		t.Fatal(err)
	}
	// A fork created resuming from web's memory checkpoint.
	fork := newSandbox("0000000000000004", a.ID, "fork")
	fork.ParentID, fork.ResumeCheckpoint = web.ID, mem.ID
	create(t, s, fork)

	snapshot := func() map[string]metadata.Sandbox {
		t.Helper()
		all, err := s.AllSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]metadata.Sandbox{}
		for _, sb := range all {
			out[sb.ID] = sb
		}
		return out
	}
	same := func(what string, got, want map[string]metadata.Sandbox) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %d sandboxes, want %d", what, len(got), len(want))
		}
		for id, w := range want {
			sameSandbox(t, what+": "+id, got[id], w)
		}
	}
	want := snapshot()

	// Deleting a checkpoint no sandbox resumes from touches no sandbox,
	// not even the one that has it as its current checkpoint (that one
	// is the caller's to look after).
	clock.Advance(time.Minute)
	if err := s.DeleteCheckpoint(ctx, cur.ID); err != nil {
		t.Fatal(err)
	}
	same("after deleting a checkpoint no sandbox resumes from", snapshot(), want)

	// Deleting the resume checkpoint clears it, with UpdatedAt, on every
	// sandbox that had it, and on no other.
	clock.Advance(time.Minute)
	if err := s.DeleteCheckpoint(ctx, mem.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{web.ID, fork.ID} {
		sb := want[id]
		sb.ResumeCheckpoint, sb.UpdatedAt = "", stored(clock.Now())
		want[id] = sb
	}
	same("after deleting the resume checkpoint", snapshot(), want)
	_, err := s.CheckpointByID(ctx, mem.ID)
	wantErr(t, "CheckpointByID(deleted resume checkpoint)", err, metadata.ErrNotFound)
	err = s.SetResumeCheckpoint(ctx, web.ID, mem.ID)
	wantErr(t, "SetResumeCheckpoint(deleted checkpoint)", err, metadata.ErrNotFound)

	// A second delete: ErrNotFound, no sandbox touched.
	clock.Advance(time.Minute)
	err = s.DeleteCheckpoint(ctx, mem.ID)
	wantErr(t, "second DeleteCheckpoint", err, metadata.ErrNotFound)
	err = s.DeleteCheckpoint(ctx, "cfffffffffffffff")
	wantErr(t, "DeleteCheckpoint(unknown)", err, metadata.ErrNotFound)
	same("after failed deletes", snapshot(), want)

	// A cancelled delete keeps both the checkpoint and the reference.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.DeleteCheckpoint(cancelled, dbs.ID); err == nil {
		t.Errorf("DeleteCheckpoint with a cancelled context succeeded")
	}
	sameCheckpoint(t, "after a cancelled delete", ckByID(t, s, dbs.ID), dbs)
	same("after a cancelled delete", snapshot(), want)

	// A checkpoint made again with the freed id is not resumed from: the
	// reference went with the old one.
	clock.Advance(time.Minute)
	createCk(t, s, newMemory(mem.ID, web, "auto-2"))
	same("after reusing the deleted checkpoint's id", snapshot(), want)

	// The checkpoint of a deleted sandbox: deleted as usual.
	if err := s.DeleteSandbox(ctx, "0000000000000002"); err != nil {
		t.Fatal(err)
	}
	delete(want, "0000000000000002")
	if err := s.DeleteCheckpoint(ctx, dbs.ID); err != nil {
		t.Fatal(err)
	}
	same("after deleting a deleted sandbox's checkpoint", snapshot(), want)
}

// testResumeCheckpointConcurrentDelete races SetResumeCheckpoint against
// DeleteCheckpoint of the same checkpoint: whichever wins, no sandbox is
// left resuming from a checkpoint that is gone.
func testResumeCheckpointConcurrentDelete(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	const sandboxes, rounds = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, sandboxes*rounds*2)
	for i := range sandboxes {
		sb := newSandbox(fmt.Sprintf("%016x", i+1), a.ID, fmt.Sprintf("sb-%d", i))
		create(t, s, sb)
		wg.Go(func() {
			for r := range rounds {
				ck := newMemory(fmt.Sprintf("c%07x%08x", i, r), sb, fmt.Sprintf("auto-%d", r))
				if _, err := s.CreateCheckpoint(ctx, ck); err != nil {
					errs <- err
					return
				}
				var race sync.WaitGroup
				race.Go(func() {
					if err := s.SetResumeCheckpoint(ctx, sb.ID, ck.ID); err != nil && !errors.Is(err, metadata.ErrNotFound) {
						errs <- err
					}
				})
				race.Go(func() {
					if err := s.DeleteCheckpoint(ctx, ck.ID); err != nil {
						errs <- err
					}
				})
				race.Wait()
				got, err := s.SandboxByID(ctx, sb.ID)
				if err != nil {
					errs <- err
					return
				}
				if got.ResumeCheckpoint != "" {
					errs <- fmt.Errorf("sandbox %s resumes from %s, which is deleted", sb.ID, got.ResumeCheckpoint)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testResumeCheckpointPersistence(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	web := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, web)
	mem := createCk(t, s, newMemory("c000000000000001", web, "auto-1"))
	old := createCk(t, s, newMemory("c000000000000002", web, "auto-2"))
	fork := newSandbox("0000000000000002", a.ID, "fork")
	fork.ResumeCheckpoint = old.ID
	create(t, s, fork)
	clock.Advance(time.Second)
	if err := s.SetResumeCheckpoint(ctx, web.ID, mem.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCheckpoint(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	wantWeb, wantFork := byID(t, s, web.ID), byID(t, s, fork.ID)
	if wantWeb.ResumeCheckpoint != mem.ID || wantFork.ResumeCheckpoint != "" {
		t.Fatalf("before reopen: web resumes from %q, fork from %q; want %s and none",
			wantWeb.ResumeCheckpoint, wantFork.ResumeCheckpoint, mem.ID)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	clock.Advance(time.Hour)
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	sameSandboxEverywhere(t, s2, "web after reopen", wantWeb)
	sameSandboxEverywhere(t, s2, "fork after reopen", wantFork)

	// The reopened store keeps the rule.
	if err := s2.DeleteCheckpoint(ctx, mem.ID); err != nil {
		t.Fatal(err)
	}
	wantWeb.ResumeCheckpoint, wantWeb.UpdatedAt = "", stored(clock.Now())
	sameSandbox(t, "web after deleting its resume checkpoint after reopen", byID(t, s2, web.ID), wantWeb)
}
