package storetest

// The checkpoint store's refusals: conflicts, rows not found, invalid input.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

func testCheckpointConflicts(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	web := newSandbox("0000000000000001", a.ID, "web")
	db := newSandbox("0000000000000002", a.ID, "db")
	bobs := newSandbox("b000000000000001", b.ID, "web")
	for _, sb := range []metadata.Sandbox{web, db, bobs} {
		create(t, s, sb)
	}
	orig := createCk(t, s, newAuto("c000000000000001", web, "auto-1", metadata.TriggerInterval))

	_, err := s.CreateCheckpoint(ctx, newCheckpoint(orig.ID, web))
	wantErr(t, "same id, same sandbox", err, metadata.ErrConflict)
	_, err = s.CreateCheckpoint(ctx, newCheckpoint(orig.ID, bobs))
	wantErr(t, "same id, another account", err, metadata.ErrConflict)
	_, err = s.CreateCheckpoint(ctx, newAuto("c000000000000002", web, "auto-1", metadata.TriggerStop))
	wantErr(t, "same seq, same sandbox", err, metadata.ErrConflict)

	// The failures stored nothing and took no number.
	sameList(t, "web's checkpoints", ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true})), orig.ID)
	sameList(t, "bob's checkpoints", ckIDs(listCks(t, s, b.ID, metadata.CheckpointFilter{IncludeAuto: true})))
	sameCheckpoint(t, "the original", ckByID(t, s, orig.ID), orig)
	if got := createCk(t, s, newCheckpoint("c000000000000003", web)); got.Seq != "v0" {
		t.Errorf("after a failed manual creation the next id is %s, want v0", got.Seq)
	}

	// The same automatic id in another sandbox is fine.
	createCk(t, s, newAuto("c000000000000004", db, "auto-1", metadata.TriggerInterval))
}

func testCheckpointNotFound(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	createCk(t, s, newCheckpoint("c000000000000001", sb))

	_, err := s.CheckpointByID(ctx, "cfffffffffffffff")
	wantErr(t, "CheckpointByID(unknown)", err, metadata.ErrNotFound)
	_, err = s.CheckpointBySeq(ctx, sb.ID, "v1")
	wantErr(t, "CheckpointBySeq(unknown seq)", err, metadata.ErrNotFound)
	_, err = s.CheckpointBySeq(ctx, "ffffffffffffffff", "v0")
	wantErr(t, "CheckpointBySeq(unknown sandbox)", err, metadata.ErrNotFound)
	_, err = s.CheckpointByName(ctx, a.ID, "nope")
	wantErr(t, "CheckpointByName(unknown)", err, metadata.ErrNotFound)
	err = s.DeleteCheckpoint(ctx, "cfffffffffffffff")
	wantErr(t, "DeleteCheckpoint(unknown)", err, metadata.ErrNotFound)
	err = s.SetCheckpointSize(ctx, "cfffffffffffffff", 1, 2)
	wantErr(t, "SetCheckpointSize(unknown)", err, metadata.ErrNotFound)
	err = s.SetCheckpointName(ctx, "cfffffffffffffff", "x")
	wantErr(t, "SetCheckpointName(unknown)", err, metadata.ErrNotFound)
	err = s.SetCurrentCheckpoint(ctx, "ffffffffffffffff", "")
	wantErr(t, "SetCurrentCheckpoint(unknown sandbox)", err, metadata.ErrNotFound)

	// An automatic checkpoint in an unknown account.
	ghost := newSandbox("0000000000000002", a.ID+1000, "ghost")
	_, err = s.CreateCheckpoint(ctx, newAuto("c000000000000002", ghost, "auto-1", metadata.TriggerInterval))
	wantErr(t, "CreateCheckpoint in an unknown account", err, metadata.ErrNotFound)
	_, err = s.CreateCheckpoint(ctx, newCheckpoint("c000000000000003", ghost))
	wantErr(t, "manual CreateCheckpoint in an unknown account", err, metadata.ErrNotFound)

	sameList(t, "ListCheckpoints(unknown account)", ckIDs(listCks(t, s, a.ID+1000, metadata.CheckpointFilter{IncludeAuto: true})))
}

func testCheckpointInvalidInput(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)

	bad := map[string]func(*metadata.Checkpoint){
		"empty id":              func(ck *metadata.Checkpoint) { ck.ID = "" },
		"no account":            func(ck *metadata.Checkpoint) { ck.AccountID = 0 },
		"no sandbox id":         func(ck *metadata.Checkpoint) { ck.SandboxID = "" },
		"no sandbox name":       func(ck *metadata.Checkpoint) { ck.SandboxName = "" },
		"empty trigger":         func(ck *metadata.Checkpoint) { ck.Trigger = "" },
		"unknown trigger":       func(ck *metadata.Checkpoint) { ck.Trigger = "whim" },
		"empty consistency":     func(ck *metadata.Checkpoint) { ck.Consistency = "" },
		"unknown consistency":   func(ck *metadata.Checkpoint) { ck.Consistency = "perfect" },
		"negative exclusive":    func(ck *metadata.Checkpoint) { ck.SizeExclusive = -1 },
		"negative total":        func(ck *metadata.Checkpoint) { ck.SizeTotal = -1 },
		"given v-id":            func(ck *metadata.Checkpoint) { ck.Seq = "v7" },
		"given v0":              func(ck *metadata.Checkpoint) { ck.Seq = "v0" },
		"generation past int64": func(ck *metadata.Checkpoint) { ck.RootGeneration = math.MaxInt64 + 1 },
		"generation max uint64": func(ck *metadata.Checkpoint) { ck.RootGeneration = math.MaxUint64 },
	}
	for what, mutate := range bad {
		ck := newCheckpoint("c000000000000001", sb)
		mutate(&ck)
		_, err := s.CreateCheckpoint(ctx, ck)
		if err == nil || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrConflict) {
			t.Errorf("CreateCheckpoint with %s: err = %v, want a plain error", what, err)
		}
	}
	sameList(t, "after invalid creations", ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true})))

	// Seqs that only look like v-ids are the caller's to give.
	for i, seq := range []string{"v", "vx", "v1a", "V1", "auto-v1"} {
		createCk(t, s, newAuto(fmt.Sprintf("a%015x", i), sb, seq, metadata.TriggerInterval))
	}
	// Every trigger and consistency is accepted.
	for i, tr := range []string{metadata.TriggerManual, metadata.TriggerInterval, metadata.TriggerStop,
		metadata.TriggerRestart, metadata.TriggerFork, metadata.TriggerDelete, metadata.TriggerRestore} {
		ck := newAuto(fmt.Sprintf("b%015x", i), sb, "auto-"+tr, tr)
		if i%2 == 0 {
			ck.Consistency = metadata.ConsistencyFrozen
		}
		createCk(t, s, ck)
	}
	// No number was taken by the failures.
	if got := createCk(t, s, newCheckpoint("c000000000000001", sb)); got.Seq != "v0" {
		t.Errorf("first manual id after invalid creations is %s, want v0", got.Seq)
	}
}
