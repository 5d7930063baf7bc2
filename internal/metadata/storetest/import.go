package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// testImportCheckpoint: a checkpoint read back from off-site is stored
// with its own v-id and no sandbox row; it reads back as given; a sandbox
// with its id that exists gets its counter raised past it; ids, seqs and
// names conflict as for CreateCheckpoint; what is not an import is a plain
// error.
func testImportCheckpoint(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	a := ensureAccount(t, s, "alice")
	gone := newSandbox("0000000000000009", a.ID, "old") // no row: its host died
	ck := newCheckpoint("c000000000000001", gone)
	ck.Seq, ck.OffsiteManifest, ck.DiskPath, ck.MemoryPath, ck.HasMemory = "v7", strings.Repeat("ab", 32), "", "", false
	got, err := s.ImportCheckpoint(ctx, ck)
	if err != nil {
		t.Fatalf("ImportCheckpoint: %v", err)
	}
	want := ck
	want.CreatedAt, want.ImportedAt = got.CreatedAt, clock.Now().UTC().Truncate(time.Microsecond)
	sameCheckpoint(t, "imported", ckByID(t, s, ck.ID), want)
	taken := createCk(t, s, func() metadata.Checkpoint {
		c := newCheckpoint("c000000000000006", newSandbox("0000000000000002", a.ID, "here"))
		c.Seq = "auto-20261203T000000Z"
		return c
	}())
	if !taken.ImportedAt.IsZero() {
		t.Errorf("a checkpoint taken here has ImportedAt %v", taken.ImportedAt)
	}
	if bySeq, err := s.CheckpointBySeq(ctx, gone.ID, "v7"); err != nil || bySeq.ID != ck.ID {
		t.Errorf("CheckpointBySeq(v7) = %v, %v", bySeq.ID, err)
	}

	// A sandbox of that id here: its next v-id comes after the import's.
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	imp := newCheckpoint("c000000000000002", sb)
	imp.Seq, imp.OffsiteManifest, imp.DiskPath, imp.MemoryPath, imp.HasMemory = "v4", strings.Repeat("cd", 32), "", "", false
	if _, err := s.ImportCheckpoint(ctx, imp); err != nil {
		t.Fatal(err)
	}
	next := newCheckpoint("c000000000000003", sb)
	next.DiskPath, next.MemoryPath, next.HasMemory = "", "", false
	if got := createCk(t, s, next); got.Seq != "v5" {
		t.Errorf("the next checkpoint after an imported v4: %s, want v5", got.Seq)
	}

	dup := ck
	wantErr(t, "an id imported twice", func() error { _, err := s.ImportCheckpoint(ctx, dup); return err }(), metadata.ErrConflict)
	sameSeq := ck
	sameSeq.ID = "c000000000000004"
	sameSeq.OffsiteManifest = strings.Repeat("ef", 32)
	wantErr(t, "a seq of the sandbox taken", func() error { _, err := s.ImportCheckpoint(ctx, sameSeq); return err }(), metadata.ErrConflict)
	// A checkpoint the account deleted (its manifest queued for deletion
	// off-site) is not brought back, nor a row given another account's
	// sandbox id.
	queued := newCheckpoint("c000000000000007", sb)
	queued.OffsiteManifest, queued.DiskPath, queued.MemoryPath, queued.HasMemory = strings.Repeat("77", 32), "", "", false
	createCk(t, s, queued)
	if err := s.DeleteCheckpoint(ctx, queued.ID); err != nil {
		t.Fatal(err)
	}
	back := queued
	back.Seq = "v40"
	wantErr(t, "import of a deleted checkpoint's manifest", func() error { _, err := s.ImportCheckpoint(ctx, back); return err }(), metadata.ErrConflict)
	b := ensureAccount(t, s, "bob")
	bobs := newSandbox("00000000000000b1", b.ID, "bobs")
	create(t, s, bobs)
	foreign := ck
	foreign.ID, foreign.SandboxID, foreign.Seq, foreign.OffsiteManifest = "c000000000000008", bobs.ID, "v1", strings.Repeat("88", 32)
	wantErr(t, "import under another account's sandbox id", func() error { _, err := s.ImportCheckpoint(ctx, foreign); return err }(), metadata.ErrConflict)

	for name, bad := range map[string]func(*metadata.Checkpoint){
		"no manifest":  func(c *metadata.Checkpoint) { c.OffsiteManifest = "" },
		"a local disk": func(c *metadata.Checkpoint) { c.DiskPath = "checkpoints/x" },
		"no seq":       func(c *metadata.Checkpoint) { c.Seq = "" },
		"no account":   func(c *metadata.Checkpoint) { c.AccountID = 0 },
	} {
		c := ck
		c.ID, c.Seq = "c000000000000005", "v99"
		bad(&c)
		_, err := s.ImportCheckpoint(ctx, c)
		wantPlainErr(t, "import with "+name, err)
	}
}
