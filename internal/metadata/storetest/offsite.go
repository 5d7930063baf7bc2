package storetest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// testCheckpointOffsite: a new checkpoint has no off-site manifest unless
// given one; SetCheckpointOffsite sets and clears it on that checkpoint
// alone; it persists; an unknown checkpoint is ErrNotFound.
func testCheckpointOffsite(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	ck := createCk(t, s, newCheckpoint("c000000000000001", sb))
	other := createCk(t, s, newCheckpoint("c000000000000002", sb))
	if ck.OffsiteManifest != "" {
		t.Errorf("new checkpoint has off-site manifest %q", ck.OffsiteManifest)
	}
	given := newCheckpoint("c000000000000003", sb)
	given.OffsiteManifest = strings.Repeat("ab", 32)
	if got := createCk(t, s, given); got.OffsiteManifest != given.OffsiteManifest {
		t.Errorf("created with manifest %q, read back %q", given.OffsiteManifest, got.OffsiteManifest)
	}

	m := strings.Repeat("0f", 32)
	if err := s.SetCheckpointOffsite(ctx, ck.ID, m); err != nil {
		t.Fatal(err)
	}
	want := ck
	want.OffsiteManifest = m
	sameCheckpoint(t, "after SetCheckpointOffsite", ckByID(t, s, ck.ID), want)
	sameCheckpoint(t, "the other checkpoint", ckByID(t, s, other.ID), other)
	found := false
	all, err := s.AllCheckpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.ID == ck.ID {
			found = c.OffsiteManifest == m
		}
	}
	if !found {
		t.Errorf("AllCheckpoints does not carry the off-site manifest")
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	sameCheckpoint(t, "after reopen", ckByID(t, s, ck.ID), want)

	if err := s.SetCheckpointOffsite(ctx, ck.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got := ckByID(t, s, ck.ID); got.OffsiteManifest != "" {
		t.Errorf("after clearing: manifest %q", got.OffsiteManifest)
	}
	err = s.SetCheckpointOffsite(ctx, "cfffffffffffffff", m)
	wantErr(t, "SetCheckpointOffsite(unknown)", err, metadata.ErrNotFound)

	// Unstorable: the reason is kept, across a reopen, until cleared.
	const why = "root/fifo: file type 10000: the repository cannot store this tree"
	if err := s.SetCheckpointUnstorable(ctx, ck.ID, why); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	if got := ckByID(t, s, ck.ID); got.OffsiteUnstorable != why {
		t.Errorf("unstorable after reopen: %q, want %q", got.OffsiteUnstorable, why)
	}
	if err := s.SetCheckpointUnstorable(ctx, ck.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got := ckByID(t, s, ck.ID); got.OffsiteUnstorable != "" {
		t.Errorf("unstorable after clearing: %q", got.OffsiteUnstorable)
	}
	wantErr(t, "SetCheckpointUnstorable(unknown)", s.SetCheckpointUnstorable(ctx, "cfffffffffffffff", why), metadata.ErrNotFound)
}

// testOffsiteDeletes: a manifest goes on its account's OffsiteDeletes when
// its checkpoint is deleted or given another manifest, and only then; the
// list persists, is per account, and ForgetOffsiteDeletes takes manifests
// off it.
func testOffsiteDeletes(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	sbA := newSandbox("0000000000000001", a.ID, "web")
	sbB := newSandbox("0000000000000002", b.ID, "web")
	create(t, s, sbA)
	create(t, s, sbB)
	m := func(c string) string { return strings.Repeat(c, 64) }
	withManifest := func(id string, sb metadata.Sandbox, manifest string) metadata.Checkpoint {
		ck := newCheckpoint(id, sb)
		ck.OffsiteManifest = manifest
		return createCk(t, s, ck)
	}
	ck1 := withManifest("c000000000000001", sbA, m("1"))
	ck2 := withManifest("c000000000000002", sbA, m("2"))
	ck3 := withManifest("c000000000000003", sbA, "")
	ckB := withManifest("c000000000000004", sbB, m("b"))
	deletes := func(what string, acct int64, want ...string) {
		t.Helper()
		got, err := s.OffsiteDeletes(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: OffsiteDeletes %v, want %v", what, got, want)
		}
	}
	deletes("new store", a.ID)

	if err := s.SetCheckpointOffsite(ctx, ck1.ID, m("3")); err != nil {
		t.Fatal(err)
	}
	deletes("after a checkpoint got another manifest", a.ID, m("1"))
	if err := s.SetCheckpointOffsite(ctx, ck1.ID, m("3")); err != nil {
		t.Fatal(err)
	}
	deletes("after it got the same manifest again", a.ID, m("1"))
	if err := s.SetCheckpointOffsite(ctx, ck3.ID, m("4")); err != nil {
		t.Fatal(err)
	}
	deletes("after a checkpoint got its first manifest", a.ID, m("1"))
	err := s.SetCheckpointOffsite(ctx, "cfffffffffffffff", m("5"))
	wantErr(t, "SetCheckpointOffsite(unknown)", err, metadata.ErrNotFound)

	if err := s.DeleteCheckpoint(ctx, ck2.ID); err != nil {
		t.Fatal(err)
	}
	deletes("after deleting a checkpoint", a.ID, m("1"), m("2"))
	if err := s.DeleteCheckpoint(ctx, ckB.ID); err != nil {
		t.Fatal(err)
	}
	deletes("the other account's", b.ID, m("b"))
	deletes("after the other account deleted one", a.ID, m("1"), m("2"))
	if err := s.SetCheckpointOffsite(ctx, ck3.ID, ""); err != nil {
		t.Fatal(err)
	}
	deletes("after a checkpoint's manifest was cleared", a.ID, m("1"), m("2"), m("4"))

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	deletes("after reopen", a.ID, m("1"), m("2"), m("4"))

	if err := s.ForgetOffsiteDeletes(ctx, a.ID, []string{m("1"), m("4"), m("9"), m("b")}); err != nil {
		t.Fatal(err)
	}
	deletes("after forgetting two (and two it did not have)", a.ID, m("2"))
	deletes("the other account's after that", b.ID, m("b"))
	if err := s.DeleteCheckpoint(ctx, ck3.ID); err != nil {
		t.Fatal(err)
	}
	deletes("after deleting a checkpoint without a manifest", a.ID, m("2"))
}
