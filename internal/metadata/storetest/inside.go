package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// The tests of what processes inside a sandbox may create (Sandbox.Inside,
// SetInsidePolicy) and of the mark of the checkpoints they made
// (Checkpoint.FromInside), schema version 8.

func testInsidePolicyCreate(t *testing.T, open OpenFunc) {
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	if want := (metadata.InsidePolicy{PerMinute: 10, Keep: 20}); metadata.DefaultInsidePolicy != want {
		t.Errorf("DefaultInsidePolicy = %+v, want %+v", metadata.DefaultInsidePolicy, want)
	}
	// Every policy is kept as given, the zero one (nothing allowed from
	// inside) included: the store fills in no default.
	for i, p := range []metadata.InsidePolicy{
		{},
		{Memory: true},
		{Names: true, PerMinute: 1},
		{Memory: true, Names: true, PerMinute: 60, Keep: 1000},
		{Keep: 3},
	} {
		sb := newSandbox(string(rune('a'+i))+"000000000000001", a.ID, "sb-"+string(rune('a'+i)))
		sb.Inside = p
		create(t, s, sb)
		want := sb
		want.CreatedAt, want.UpdatedAt = stored(clock.Now()), stored(clock.Now())
		sameSandboxEverywhere(t, s, "policy "+sb.Name, want)
	}
	// Negative counts are refused, and nothing is stored.
	for _, p := range []metadata.InsidePolicy{{PerMinute: -1}, {Keep: -1}} {
		sb := newSandbox("f000000000000001", a.ID, "negative")
		sb.Inside = p
		if err := s.CreateSandbox(context.Background(), sb); err == nil || errors.Is(err, metadata.ErrConflict) || errors.Is(err, metadata.ErrNotFound) {
			t.Errorf("CreateSandbox with policy %+v = %v, want a plain error", p, err)
		}
		if _, err := s.SandboxByID(context.Background(), sb.ID); !errors.Is(err, metadata.ErrNotFound) {
			t.Errorf("after the refused create: SandboxByID = %v, want ErrNotFound", err)
		}
	}
}

func testSetInsidePolicy(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	create(t, s, newSandbox("0000000000000001", a.ID, "web"))
	create(t, s, newSandbox("0000000000000002", a.ID, "db"))
	want, other := byID(t, s, "0000000000000001"), byID(t, s, "0000000000000002")

	// It moves the policy and UpdatedAt only, of that sandbox only.
	for _, p := range []metadata.InsidePolicy{
		{Memory: true, Names: true, PerMinute: 2, Keep: 5},
		{},
		{Names: true, Keep: 0, PerMinute: 30},
		{Names: true, Keep: 0, PerMinute: 30}, // the same again still bumps UpdatedAt
	} {
		clock.Advance(7 * time.Second)
		if err := s.SetInsidePolicy(ctx, want.ID, p); err != nil {
			t.Fatalf("SetInsidePolicy(%+v): %v", p, err)
		}
		want.Inside, want.UpdatedAt = p, stored(clock.Now())
		sameSandboxEverywhere(t, s, "after SetInsidePolicy", want)
		sameSandbox(t, "the other sandbox", byID(t, s, other.ID), other)
	}

	// No such sandbox; a negative count: nothing changes.
	if err := s.SetInsidePolicy(ctx, "00000000000000ff", metadata.InsidePolicy{}); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("SetInsidePolicy of no sandbox = %v, want ErrNotFound", err)
	}
	for _, p := range []metadata.InsidePolicy{{PerMinute: -5}, {Keep: -1, Memory: true}} {
		clock.Advance(time.Second)
		if err := s.SetInsidePolicy(ctx, want.ID, p); err == nil || errors.Is(err, metadata.ErrNotFound) {
			t.Errorf("SetInsidePolicy(%+v) = %v, want a plain error", p, err)
		}
	}
	sameSandbox(t, "after refused SetInsidePolicy", byID(t, s, want.ID), want)

	// It survives closing the store.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	sameSandboxEverywhere(t, s2, "after reopen", want)
}

func testCheckpointFromInside(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	web := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, web)

	outside := newCheckpoint("c000000000000001", web)
	outside.FromInside = false
	inside := newCheckpoint("c000000000000002", web)
	inside.FromInside = true
	named := newCheckpoint("c000000000000003", web)
	named.FromInside, named.Name = true, "keep-me"
	var want []metadata.Checkpoint
	for _, ck := range []metadata.Checkpoint{outside, inside, named} {
		clock.Advance(time.Second)
		got := createCk(t, s, ck)
		if got.FromInside != ck.FromInside {
			t.Errorf("CreateCheckpoint(%s) returned FromInside %v, want %v", ck.ID, got.FromInside, ck.FromInside)
		}
		want = append(want, got)
	}
	check := func(s metadata.Store, what string) {
		t.Helper()
		for _, w := range want {
			sameCheckpoint(t, what+": CheckpointByID", ckByID(t, s, w.ID), w)
			got, err := s.CheckpointBySeq(ctx, web.ID, w.Seq)
			if err != nil {
				t.Fatal(err)
			}
			sameCheckpoint(t, what+": CheckpointBySeq", got, w)
		}
		list, err := s.ListCheckpoints(ctx, a.ID, metadata.CheckpointFilter{SandboxID: web.ID})
		if err != nil {
			t.Fatal(err)
		}
		all, err := s.AllCheckpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for name, got := range map[string][]metadata.Checkpoint{"ListCheckpoints": list, "AllCheckpoints": all} {
			if len(got) != len(want) {
				t.Fatalf("%s: %s = %d checkpoints, want %d", what, name, len(got), len(want))
			}
			for i := range want {
				sameCheckpoint(t, what+": "+name, got[i], want[i])
			}
		}
	}
	check(s, "FromInside")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	check(s2, "FromInside after reopen")
}

func testKeepCheckpoint(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	web := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, web)

	var inside []metadata.Checkpoint
	for _, id := range []string{"c000000000000001", "c000000000000002", "c000000000000003"} {
		clock.Advance(time.Second)
		ck := newCheckpoint(id, web)
		ck.FromInside = true
		inside = append(inside, createCk(t, s, ck))
	}
	clock.Advance(time.Second)
	outside := createCk(t, s, newCheckpoint("c000000000000004", web))

	// Keeping takes the mark off that checkpoint only, and changes nothing
	// else of it; again, it still succeeds.
	clock.Advance(time.Minute)
	for i := 0; i < 2; i++ {
		if err := s.KeepCheckpoint(ctx, inside[1].ID); err != nil {
			t.Fatalf("KeepCheckpoint(%s) #%d: %v", inside[1].ID, i+1, err)
		}
	}
	kept := inside[1]
	kept.FromInside = false
	want := []metadata.Checkpoint{inside[0], kept, inside[2], outside}

	// One not made from inside: nothing changes, no error.
	if err := s.KeepCheckpoint(ctx, outside.ID); err != nil {
		t.Errorf("KeepCheckpoint of a checkpoint not made from inside: %v", err)
	}
	// No such checkpoint: ErrNotFound.
	wantErr(t, "KeepCheckpoint of no checkpoint", s.KeepCheckpoint(ctx, "c0000000000000ff"), metadata.ErrNotFound)

	check := func(s metadata.Store, what string) {
		t.Helper()
		got := listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: web.ID})
		if len(got) != len(want) {
			t.Fatalf("%s: %d checkpoints, want %d", what, len(got), len(want))
		}
		for i := range want {
			sameCheckpoint(t, what, got[i], want[i])
			sameCheckpoint(t, what+": CheckpointByID", ckByID(t, s, want[i].ID), want[i])
		}
	}
	check(s, "after KeepCheckpoint")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	check(s2, "after KeepCheckpoint and reopen")
}
