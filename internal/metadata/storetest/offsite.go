package storetest

import (
	"context"
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
}
