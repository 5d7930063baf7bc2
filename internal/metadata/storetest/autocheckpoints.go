package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

func testListAccounts(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)

	empty, err := s.ListAccounts(ctx)
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("ListAccounts on an empty store = %#v, %v; want empty, non-nil", empty, err)
	}

	var want []metadata.Account
	for _, name := range []string{"carol", "alice", "bob"} { // not in name order
		want = append(want, ensureAccount(t, s, name))
		clock.Advance(time.Minute)
	}
	ensureAccount(t, s, "alice") // again: no new account
	slices.SortFunc(want, func(x, y metadata.Account) int {
		switch {
		case x.ID < y.ID:
			return -1
		case x.ID > y.ID:
			return 1
		}
		return 0
	})

	got, err := s.ListAccounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListAccounts = %+v, want %+v", got, want)
	}
	for i := range want {
		checkUTC(t, "ListAccounts", got[i].CreatedAt)
		if got[i].ID != want[i].ID || got[i].Name != want[i].Name || !got[i].CreatedAt.Equal(want[i].CreatedAt) {
			t.Errorf("ListAccounts[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func testAutoCheckpointDefault(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	if metadata.DefaultAutoCheckpoint != 5*time.Minute {
		t.Errorf("DefaultAutoCheckpoint = %v, want 5m", metadata.DefaultAutoCheckpoint)
	}

	// No interval given: the default, wherever the sandbox is read.
	sb := newSandbox("0000000000000001", a.ID, "web")
	sb.AutoCheckpoint = 0
	create(t, s, sb)
	want := sb
	want.AutoCheckpoint = 5 * time.Minute
	want.CreatedAt, want.UpdatedAt = stored(clock.Now()), stored(clock.Now())
	sameSandbox(t, "SandboxByID", byID(t, s, sb.ID), want)
	got, err := s.SandboxByName(ctx, a.ID, sb.Name)
	if err != nil {
		t.Fatal(err)
	}
	sameSandbox(t, "SandboxByName", got, want)
	list, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.AllSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, sbs := range map[string][]metadata.Sandbox{"ListSandboxes": list, "AllSandboxes": all} {
		sameIDs(t, what, sbs, sb.ID)
		if len(sbs) == 1 {
			sameSandbox(t, what, sbs[0], want)
		}
	}

	// Any positive whole number of seconds round-trips: the range
	// (60 s to 24 h in cairnd) is the caller's to check, not the store's.
	for i, every := range []time.Duration{
		90 * time.Second, 24 * time.Hour, 5 * time.Minute, time.Second, 7 * 24 * time.Hour, 3601 * time.Second,
	} {
		x := newSandbox(fmt.Sprintf("a%015x", i), a.ID, fmt.Sprintf("every-%d", i))
		x.AutoCheckpoint = every
		create(t, s, x)
		if got := byID(t, s, x.ID); got.AutoCheckpoint != every {
			t.Errorf("interval %v read back as %v", every, got.AutoCheckpoint)
		}
	}
}

func testSetAutoCheckpoint(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	create(t, s, newSandbox("0000000000000001", a.ID, "web"))
	create(t, s, newSandbox("0000000000000002", a.ID, "db"))
	want := byID(t, s, "0000000000000001")
	other := byID(t, s, "0000000000000002")

	// It moves the interval and UpdatedAt only.
	clock.Advance(42 * time.Second)
	if err := s.SetAutoCheckpoint(ctx, want.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	want.AutoCheckpoint, want.UpdatedAt = time.Hour, stored(clock.Now())
	sameSandbox(t, "after SetAutoCheckpoint(1h)", byID(t, s, want.ID), want)
	sameSandbox(t, "the other sandbox", byID(t, s, other.ID), other)

	// The same interval again still bumps UpdatedAt.
	clock.Advance(time.Minute)
	if err := s.SetAutoCheckpoint(ctx, want.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	want.UpdatedAt = stored(clock.Now())
	sameSandbox(t, "after SetAutoCheckpoint(1h) again", byID(t, s, want.ID), want)

	// 0 sets the default.
	clock.Advance(time.Minute)
	if err := s.SetAutoCheckpoint(ctx, want.ID, 0); err != nil {
		t.Fatal(err)
	}
	want.AutoCheckpoint, want.UpdatedAt = metadata.DefaultAutoCheckpoint, stored(clock.Now())
	sameSandbox(t, "after SetAutoCheckpoint(0)", byID(t, s, want.ID), want)

	// No range check in the store.
	for _, every := range []time.Duration{time.Second, 48 * time.Hour} {
		clock.Advance(time.Minute)
		if err := s.SetAutoCheckpoint(ctx, want.ID, every); err != nil {
			t.Fatalf("SetAutoCheckpoint(%v): %v", every, err)
		}
		want.AutoCheckpoint, want.UpdatedAt = every, stored(clock.Now())
		sameSandbox(t, fmt.Sprintf("after SetAutoCheckpoint(%v)", every), byID(t, s, want.ID), want)
	}

	// Negative or sub-second: a plain error, nothing changes.
	clock.Advance(time.Minute)
	for _, every := range []time.Duration{-time.Minute, -1, time.Millisecond, 90*time.Second + 500*time.Millisecond} {
		err := s.SetAutoCheckpoint(ctx, want.ID, every)
		if err == nil || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrConflict) {
			t.Errorf("SetAutoCheckpoint(%v): err = %v, want a plain error", every, err)
		}
	}
	sameSandbox(t, "after invalid intervals", byID(t, s, want.ID), want)

	// Unknown or deleted sandbox: ErrNotFound.
	err := s.SetAutoCheckpoint(ctx, "ffffffffffffffff", time.Hour)
	wantErr(t, "SetAutoCheckpoint(unknown)", err, metadata.ErrNotFound)
	if err := s.DeleteSandbox(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	err = s.SetAutoCheckpoint(ctx, other.ID, time.Hour)
	wantErr(t, "SetAutoCheckpoint(deleted)", err, metadata.ErrNotFound)
	sameSandbox(t, "after failed SetAutoCheckpoint", byID(t, s, want.ID), want)
}

func testCheckpointRootGeneration(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)

	// Zero, past 32 bits, the largest a store keeps; manual and automatic.
	gens := []uint64{0, 1 << 40, math.MaxInt64}
	var made []metadata.Checkpoint
	for i, gen := range gens {
		ck := newCheckpoint(fmt.Sprintf("c%015x", i), sb)
		if i%2 == 1 {
			ck = newAuto(ck.ID, sb, fmt.Sprintf("auto-%d", i), metadata.TriggerInterval)
		}
		ck.RootGeneration = gen
		got := createCk(t, s, ck)
		if got.RootGeneration != gen {
			t.Errorf("CreateCheckpoint result has generation %d, want %d", got.RootGeneration, gen)
		}
		made = append(made, got)
		clock.Advance(time.Second)
	}
	for i, gen := range gens {
		if got := ckByID(t, s, made[i].ID); got.RootGeneration != gen {
			t.Errorf("CheckpointByID: generation %d, want %d", got.RootGeneration, gen)
		}
		got, err := s.CheckpointBySeq(ctx, sb.ID, made[i].Seq)
		if err != nil || got.RootGeneration != gen {
			t.Errorf("CheckpointBySeq(%s): generation %d, %v; want %d", made[i].Seq, got.RootGeneration, err, gen)
		}
	}
	list := listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true})
	all, err := s.AllCheckpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, cks := range map[string][]metadata.Checkpoint{"ListCheckpoints": list, "AllCheckpoints": all} {
		sameList(t, what, ckIDs(cks), ckIDs(made)...)
		for i := range min(len(cks), len(made)) {
			sameCheckpoint(t, what, cks[i], made[i])
		}
	}
	latest, err := s.LatestCheckpoint(ctx, sb.ID)
	if err != nil || latest.RootGeneration != math.MaxInt64 {
		t.Errorf("LatestCheckpoint: generation %d, %v; want %d", latest.RootGeneration, err, int64(math.MaxInt64))
	}

	// Past int64: a plain error, nothing stored, no number taken.
	for i, gen := range []uint64{math.MaxInt64 + 1, math.MaxUint64} {
		ck := newCheckpoint(fmt.Sprintf("d%015x", i), sb)
		ck.RootGeneration = gen
		_, err := s.CreateCheckpoint(ctx, ck)
		if err == nil || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrConflict) {
			t.Errorf("CreateCheckpoint with generation %d: err = %v, want a plain error", gen, err)
		}
		_, err = s.CheckpointByID(ctx, ck.ID)
		wantErr(t, fmt.Sprintf("checkpoint with generation %d stored", gen), err, metadata.ErrNotFound)
	}
	if got := createCk(t, s, newCheckpoint("e000000000000001", sb)); got.Seq != "v2" {
		t.Errorf("after invalid generations the next id is %s, want v2", got.Seq)
	}
}

func testLatestCheckpoint(t *testing.T, open OpenFunc) {
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
	latest := func(sandboxID string) metadata.Checkpoint {
		t.Helper()
		ck, err := s.LatestCheckpoint(ctx, sandboxID)
		if err != nil {
			t.Fatalf("LatestCheckpoint(%s): %v", sandboxID, err)
		}
		return ck
	}

	// None yet, or no such sandbox: ErrNotFound.
	_, err := s.LatestCheckpoint(ctx, web.ID)
	wantErr(t, "LatestCheckpoint(no checkpoints)", err, metadata.ErrNotFound)
	_, err = s.LatestCheckpoint(ctx, "ffffffffffffffff")
	wantErr(t, "LatestCheckpoint(unknown sandbox)", err, metadata.ErrNotFound)

	// Eleven at the same instant, ids sorting backwards: the one stored
	// last wins, not the greatest id or seq ("v9" > "v10").
	var last metadata.Checkpoint
	for i := range 11 {
		last = createCk(t, s, newCheckpoint(fmt.Sprintf("c%015x", 100-i), web))
	}
	if last.Seq != "v10" {
		t.Fatalf("eleventh manual id is %s", last.Seq)
	}
	sameCheckpoint(t, "latest of eleven at one instant", latest(web.ID), last)

	// Any trigger: an automatic one at the same instant, stored after, wins.
	auto := createCk(t, s, newAuto("c000000000000001", web, "auto-20310517T083000Z", metadata.TriggerInterval))
	sameCheckpoint(t, "latest after an automatic one", latest(web.ID), auto)

	// A later one wins; one stored later with an earlier (caller-given)
	// time does not.
	clock.Advance(time.Second)
	later := createCk(t, s, newAuto("d000000000000001", web, "auto-20310517T083001Z", metadata.TriggerStop))
	early := newCheckpoint("d000000000000002", web)
	early.CreatedAt = start.Add(-time.Hour)
	createCk(t, s, early)
	sameCheckpoint(t, "latest after an earlier-dated one", latest(web.ID), later)

	// Other sandboxes' checkpoints, in this account or another, even newer
	// ones, do not count; each sandbox has its own latest.
	clock.Advance(time.Second)
	dbCk := createCk(t, s, newCheckpoint("d000000000000003", db))
	bobsCk := createCk(t, s, newCheckpoint("d000000000000004", bobs))
	sameCheckpoint(t, "web's latest after db's and bob's", latest(web.ID), later)
	sameCheckpoint(t, "db's latest", latest(db.ID), dbCk)
	sameCheckpoint(t, "bob's latest", latest(bobs.ID), bobsCk)

	// Deleting the latest makes the one before it the latest.
	if err := s.DeleteCheckpoint(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, "latest after deleting it", latest(web.ID), auto)

	// Checkpoints of a deleted sandbox are still found.
	final := createCk(t, s, newAuto("d000000000000005", web, "auto-20310517T083002Z", metadata.TriggerDelete))
	if err := s.DeleteSandbox(ctx, web.ID); err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, "latest of a deleted sandbox", latest(web.ID), final)
	// As are those of a sandbox id that never had a row.
	ghost := createCk(t, s, newAuto("d000000000000006", newSandbox("0000000000000099", a.ID, "ghost"),
		"auto-20310517T083002Z", metadata.TriggerDelete))
	sameCheckpoint(t, "latest of a sandbox without a row", latest(ghost.SandboxID), ghost)

	// Once every checkpoint is gone: ErrNotFound again.
	for _, ck := range listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: web.ID, IncludeAuto: true}) {
		if err := s.DeleteCheckpoint(ctx, ck.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.LatestCheckpoint(ctx, web.ID)
	wantErr(t, "LatestCheckpoint after deleting every checkpoint", err, metadata.ErrNotFound)
}
