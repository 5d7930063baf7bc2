package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// The journal of multi-step operations (schema versions 11 and 12).

func newEntry(id string, accountID int64, owner string, children ...metadata.JournalChild) metadata.JournalEntry {
	return metadata.JournalEntry{
		ID: id, Kind: "sandbox.fork", Owner: owner, AccountID: accountID,
		SandboxID: "0000000000000001", Children: children, State: metadata.JournalRunning,
	}
}

func journalEntry(t *testing.T, s metadata.Store, id string) metadata.JournalEntry {
	t.Helper()
	e, err := s.JournalEntry(context.Background(), id)
	if err != nil {
		t.Fatalf("JournalEntry(%s): %v", id, err)
	}
	return e
}

func sameEntry(t *testing.T, what string, got, want metadata.JournalEntry) {
	t.Helper()
	checkUTC(t, what, got.CreatedAt, got.UpdatedAt)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func journalIDs(t *testing.T, s metadata.Store, f metadata.JournalFilter) []string {
	t.Helper()
	es, err := s.ListJournal(context.Background(), f)
	if err != nil {
		t.Fatalf("ListJournal(%+v): %v", f, err)
	}
	ids := []string{}
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

func testJournal(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	const here, there = "host/h1/i1", "host/h2/i1"
	kids := []metadata.JournalChild{{ID: "00000000000000a1", Name: "web-fork-1"}, {ID: "00000000000000a2", Name: "web-fork-2"}}

	// Begun: stored as given, running, times from the clock; the children
	// come back in order.
	fork := newEntry("op-1", a.ID, here, kids...)
	fork.Detail = `{"checkpoint":"00000000000000c1","old_root":257}`
	if err := s.BeginJournal(ctx, fork); err != nil {
		t.Fatalf("BeginJournal: %v", err)
	}
	want := fork
	want.CreatedAt, want.UpdatedAt = stored(clock.Now()), stored(clock.Now())
	sameEntry(t, "begun", journalEntry(t, s, "op-1"), want)

	// Ids are unique; a bad entry, a final state, an unknown account are refused.
	wantErr(t, "BeginJournal(same id)", s.BeginJournal(ctx, newEntry("op-1", a.ID, here)), metadata.ErrConflict)
	wantErr(t, "BeginJournal(unknown account)", s.BeginJournal(ctx, newEntry("op-x", a.ID+100, here)), metadata.ErrNotFound)
	for name, e := range map[string]metadata.JournalEntry{
		"no id":    newEntry("", a.ID, here),
		"no owner": newEntry("op-y", a.ID, ""),
		"done": func() metadata.JournalEntry {
			e := newEntry("op-y", a.ID, here)
			e.State = metadata.JournalDone
			return e
		}(),
		"child no id":    newEntry("op-y", a.ID, here, metadata.JournalChild{Name: "x"}),
		"no kind":        func() metadata.JournalEntry { e := newEntry("op-y", a.ID, here); e.Kind = ""; return e }(),
		"unknown status": func() metadata.JournalEntry { e := newEntry("op-y", a.ID, here); e.State = "half"; return e }(),
	} {
		if err := s.BeginJournal(ctx, e); err == nil {
			t.Errorf("BeginJournal(%s) succeeded", name)
		}
	}
	wantErr(t, "JournalEntry(op-y)", func() error { _, err := s.JournalEntry(ctx, "op-y"); return err }(), metadata.ErrNotFound)

	// Two more: one of another host, one without children.
	clock.Advance(time.Second)
	if err := s.BeginJournal(ctx, newEntry("op-2", a.ID, there)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if err := s.BeginJournal(ctx, newEntry("op-3", a.ID, here)); err != nil {
		t.Fatal(err)
	}
	if got := journalEntry(t, s, "op-3").Children; got != nil {
		t.Errorf("children of an entry begun without = %v, want nil", got)
	}
	if got, want := journalIDs(t, s, metadata.JournalFilter{}), []string{"op-1", "op-2", "op-3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListJournal() = %v, want %v (oldest first)", got, want)
	}
	if got, want := journalIDs(t, s, metadata.JournalFilter{OwnerPrefix: "host/h1/", State: metadata.JournalRunning}), []string{"op-1", "op-3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListJournal(running on h1) = %v, want %v", got, want)
	}

	// Noted: the detail of a running entry changes, and UpdatedAt.
	clock.Advance(time.Second)
	if err := s.NoteJournal(ctx, "op-1", `{"stopping":true}`); err != nil {
		t.Fatalf("NoteJournal: %v", err)
	}
	want.Detail, want.UpdatedAt = `{"stopping":true}`, stored(clock.Now())
	sameEntry(t, "noted", journalEntry(t, s, "op-1"), want)
	wantErr(t, "NoteJournal(unknown)", s.NoteJournal(ctx, "op-9", ""), metadata.ErrNotFound)

	// Finished: state, message and UpdatedAt change, nothing else.
	clock.Advance(time.Minute)
	if err := s.FinishJournal(ctx, "op-1", metadata.JournalUndone, "O02", "interrupted"); err != nil {
		t.Fatalf("FinishJournal: %v", err)
	}
	want.State, want.Code, want.Message, want.UpdatedAt = metadata.JournalUndone, "O02", "interrupted", stored(clock.Now())
	sameEntry(t, "undone", journalEntry(t, s, "op-1"), want)
	if err := s.FinishJournal(ctx, "op-3", metadata.JournalDone, "", ""); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "FinishJournal(unknown)", s.FinishJournal(ctx, "op-9", metadata.JournalDone, "", ""), metadata.ErrNotFound)
	for _, st := range []metadata.JournalState{metadata.JournalRunning, "", "half"} {
		if err := s.FinishJournal(ctx, "op-2", st, "", ""); err == nil {
			t.Errorf("FinishJournal(%q) succeeded", st)
		}
	}
	wantErr(t, "NoteJournal(ended)", s.NoteJournal(ctx, "op-3", "{}"), metadata.ErrConflict)
	if got, want := journalIDs(t, s, metadata.JournalFilter{State: metadata.JournalRunning}), []string{"op-2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("running after finishing two = %v, want %v", got, want)
	}
	if got, want := journalIDs(t, s, metadata.JournalFilter{UpdatedSince: clock.Now()}), []string{"op-1", "op-3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("updated since the finish = %v, want %v", got, want)
	}

	// Durable: another open of the same database sees it all.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now)
	sameEntry(t, "after reopen", journalEntry(t, s, "op-1"), want)

	// Pruned: finished entries older than the bound go, running ones stay
	// whatever their age.
	clock.Advance(time.Hour)
	if err := s.FinishJournal(ctx, "op-3", metadata.JournalFailed, "S06", "later"); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneJournal(ctx, clock.Now().Add(-time.Minute))
	if err != nil || n != 1 {
		t.Errorf("PruneJournal = %d, %v; want 1 (op-1)", n, err)
	}
	if got, want := journalIDs(t, s, metadata.JournalFilter{}), []string{"op-2", "op-3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after prune = %v, want %v", got, want)
	}
	if n, err := s.PruneJournal(ctx, clock.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("PruneJournal(future) = %d, %v; want 1 (op-3; op-2 runs)", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
