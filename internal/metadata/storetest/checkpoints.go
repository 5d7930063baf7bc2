package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// newCheckpoint returns a valid manual checkpoint of sb (Seq left to the
// store) with every other field set except CreatedAt.
func newCheckpoint(id string, sb metadata.Sandbox) metadata.Checkpoint {
	return metadata.Checkpoint{
		ID:             id,
		AccountID:      sb.AccountID,
		SandboxID:      sb.ID,
		SandboxName:    sb.Name,
		Trigger:        metadata.TriggerManual,
		Consistency:    metadata.ConsistencyFrozen,
		Comment:        "a comment",
		Label:          "a label",
		Image:          sb.Image,
		SizeExclusive:  4096,
		SizeTotal:      1 << 30,
		RootGeneration: 4242,
	}
}

// newAuto returns a valid automatic checkpoint of sb with the given seq and
// trigger.
func newAuto(id string, sb metadata.Sandbox, seq, trigger string) metadata.Checkpoint {
	ck := newCheckpoint(id, sb)
	ck.Seq, ck.Trigger, ck.Consistency, ck.Comment, ck.Label = seq, trigger, metadata.ConsistencyCrash, "", ""
	return ck
}

func createCk(t *testing.T, s metadata.Store, ck metadata.Checkpoint) metadata.Checkpoint {
	t.Helper()
	got, err := s.CreateCheckpoint(context.Background(), ck)
	if err != nil {
		t.Fatalf("CreateCheckpoint(%s of %s): %v", ck.ID, ck.SandboxID, err)
	}
	return got
}

func ckByID(t *testing.T, s metadata.Store, id string) metadata.Checkpoint {
	t.Helper()
	ck, err := s.CheckpointByID(context.Background(), id)
	if err != nil {
		t.Fatalf("CheckpointByID(%s): %v", id, err)
	}
	return ck
}

func listCks(t *testing.T, s metadata.Store, accountID int64, f metadata.CheckpointFilter) []metadata.Checkpoint {
	t.Helper()
	cks, err := s.ListCheckpoints(context.Background(), accountID, f)
	if err != nil {
		t.Fatalf("ListCheckpoints(%d, %+v): %v", accountID, f, err)
	}
	if cks == nil {
		t.Errorf("ListCheckpoints(%d, %+v) = nil, want a non-nil slice", accountID, f)
	}
	return cks
}

// sameCheckpoint fails unless got equals want field by field, CreatedAt
// compared as an instant and required in UTC.
func sameCheckpoint(t *testing.T, what string, got, want metadata.Checkpoint) {
	t.Helper()
	checkUTC(t, what, got.CreatedAt)
	g, w := got, want
	g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
	if g != w {
		t.Errorf("%s:\n got  %+v\n want %+v", what, g, w)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("%s: created %v, want %v", what, got.CreatedAt, want.CreatedAt)
	}
}

// seqs returns the Seq of each checkpoint, in order.
func seqs(cks []metadata.Checkpoint) []string {
	out := make([]string, len(cks))
	for i, ck := range cks {
		out[i] = ck.Seq
	}
	return out
}

// ckIDs returns the ID of each checkpoint, in order.
func ckIDs(cks []metadata.Checkpoint) []string {
	out := make([]string, len(cks))
	for i, ck := range cks {
		out[i] = ck.ID
	}
	return out
}

func sameList(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func testSandboxCheckpointFields(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")

	src := newSandbox("0000000000000001", a.ID, "src")
	create(t, s, src)
	ck := createCk(t, s, newCheckpoint("c000000000000001", src))
	ck2 := createCk(t, s, newCheckpoint("c000000000000002", src))

	fork := newSandbox("0000000000000002", a.ID, "fork")
	fork.ParentID, fork.CurrentCheckpoint, fork.SourceCheckpoint = src.ID, ck.ID, ck.ID
	create(t, s, fork)
	want := fork
	want.CreatedAt, want.UpdatedAt = stored(clock.Now()), stored(clock.Now())
	sameSandbox(t, "fork by id", byID(t, s, fork.ID), want)
	got, err := s.SandboxByName(ctx, a.ID, "fork")
	if err != nil {
		t.Fatal(err)
	}
	sameSandbox(t, "fork by name", got, want)

	// Lists carry the new fields too.
	list, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.AllSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for what, sbs := range map[string][]metadata.Sandbox{"ListSandboxes": list, "AllSandboxes": all} {
		sameIDs(t, what, sbs, fork.ID, src.ID)
		if len(sbs) == 2 {
			sameSandbox(t, what+"[fork]", sbs[0], want)
			if sbs[1].CurrentCheckpoint != "" || sbs[1].SourceCheckpoint != "" {
				t.Errorf("%s: src has checkpoints %q, %q; want none", what, sbs[1].CurrentCheckpoint, sbs[1].SourceCheckpoint)
			}
		}
	}

	// SetCurrentCheckpoint moves the current checkpoint and UpdatedAt only.
	clock.Advance(time.Minute)
	if err := s.SetCurrentCheckpoint(ctx, fork.ID, ck2.ID); err != nil {
		t.Fatalf("SetCurrentCheckpoint: %v", err)
	}
	want.CurrentCheckpoint, want.UpdatedAt = ck2.ID, stored(clock.Now())
	sameSandbox(t, "after SetCurrentCheckpoint", byID(t, s, fork.ID), want)

	clock.Advance(time.Minute)
	if err := s.SetCurrentCheckpoint(ctx, src.ID, ck.ID); err != nil {
		t.Fatalf("SetCurrentCheckpoint(src): %v", err)
	}
	if got := byID(t, s, src.ID); got.CurrentCheckpoint != ck.ID || got.SourceCheckpoint != "" {
		t.Errorf("src after SetCurrentCheckpoint = current %q source %q", got.CurrentCheckpoint, got.SourceCheckpoint)
	}

	// "" clears it; the source stays.
	clock.Advance(time.Minute)
	if err := s.SetCurrentCheckpoint(ctx, fork.ID, ""); err != nil {
		t.Fatalf("SetCurrentCheckpoint(\"\"): %v", err)
	}
	want.CurrentCheckpoint, want.UpdatedAt = "", stored(clock.Now())
	sameSandbox(t, "after clearing the current checkpoint", byID(t, s, fork.ID), want)

	// Unknown sandbox, unknown checkpoint, another account's checkpoint:
	// ErrNotFound and nothing changes.
	err = s.SetCurrentCheckpoint(ctx, "ffffffffffffffff", ck.ID)
	wantErr(t, "SetCurrentCheckpoint(unknown sandbox)", err, metadata.ErrNotFound)
	err = s.SetCurrentCheckpoint(ctx, fork.ID, "cfffffffffffffff")
	wantErr(t, "SetCurrentCheckpoint(unknown checkpoint)", err, metadata.ErrNotFound)
	bobs := newSandbox("b000000000000001", b.ID, "bobs")
	create(t, s, bobs)
	bck := createCk(t, s, newCheckpoint("cb00000000000001", bobs))
	clock.Advance(time.Minute)
	err = s.SetCurrentCheckpoint(ctx, fork.ID, bck.ID)
	wantErr(t, "SetCurrentCheckpoint(another account's checkpoint)", err, metadata.ErrNotFound)
	sameSandbox(t, "after failed SetCurrentCheckpoint", byID(t, s, fork.ID), want)
}

func testCheckpointCreateAndGet(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)

	// Every field set, a time in another zone with nanoseconds.
	ck := newCheckpoint("c000000000000001", sb)
	ck.Name, ck.HasMemory, ck.Image = "before-upgrade", true, "registry.example/app:1"
	ck.CreatedAt = time.Date(2030, 1, 2, 3, 4, 5, 6007, time.FixedZone("UTC-5", -5*60*60))
	got := createCk(t, s, ck)
	want := ck
	want.Seq, want.CreatedAt = "v0", stored(ck.CreatedAt)
	sameCheckpoint(t, "CreateCheckpoint result", got, want)
	sameCheckpoint(t, "CheckpointByID", ckByID(t, s, ck.ID), want)
	bySeq, err := s.CheckpointBySeq(ctx, sb.ID, "v0")
	if err != nil {
		t.Fatalf("CheckpointBySeq: %v", err)
	}
	sameCheckpoint(t, "CheckpointBySeq", bySeq, want)
	byName, err := s.CheckpointByName(ctx, a.ID, "before-upgrade")
	if err != nil {
		t.Fatalf("CheckpointByName: %v", err)
	}
	sameCheckpoint(t, "CheckpointByName", byName, want)

	// An automatic one: Seq as given, a zero CreatedAt from the clock, zero
	// fields round-trip as zero.
	clock.Advance(time.Minute)
	auto := metadata.Checkpoint{
		ID: "c000000000000002", AccountID: a.ID, SandboxID: sb.ID, SandboxName: sb.Name,
		Seq: "auto-20310517T083100Z", Trigger: metadata.TriggerInterval, Consistency: metadata.ConsistencyCrash,
	}
	got = createCk(t, s, auto)
	wantAuto := auto
	wantAuto.CreatedAt = stored(clock.Now())
	sameCheckpoint(t, "automatic checkpoint", got, wantAuto)
	bySeq, err = s.CheckpointBySeq(ctx, sb.ID, auto.Seq)
	if err != nil {
		t.Fatalf("CheckpointBySeq(auto): %v", err)
	}
	sameCheckpoint(t, "automatic checkpoint by seq", bySeq, wantAuto)

	// An automatic id needs no sandbox row.
	gone := newAuto("c000000000000003", newSandbox("0000000000000099", a.ID, "gone"), "auto-20310517T083200Z", metadata.TriggerDelete)
	createCk(t, s, gone)

	// The next manual one is v1: automatic ids take no number.
	if got := createCk(t, s, newCheckpoint("c000000000000004", sb)); got.Seq != "v1" {
		t.Errorf("manual checkpoint after an automatic one is %s, want v1", got.Seq)
	}
}

func testCheckpointManualIDs(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	other := newSandbox("0000000000000002", a.ID, "db")
	create(t, s, sb)
	create(t, s, other)

	var made []metadata.Checkpoint
	for i := range 3 {
		made = append(made, createCk(t, s, newCheckpoint(fmt.Sprintf("c00000000000000%d", i), sb)))
	}
	sameList(t, "first three ids", seqs(made), "v0", "v1", "v2")

	// Deleting the newest does not give its number again.
	if err := s.DeleteCheckpoint(ctx, made[2].ID); err != nil {
		t.Fatal(err)
	}
	if got := createCk(t, s, newCheckpoint("c000000000000003", sb)); got.Seq != "v3" {
		t.Errorf("after deleting v2 the next id is %s, want v3", got.Seq)
	}
	// Nor deleting all of them.
	for _, id := range []string{made[0].ID, made[1].ID, "c000000000000003"} {
		if err := s.DeleteCheckpoint(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := createCk(t, s, newCheckpoint("c000000000000004", sb)); got.Seq != "v4" {
		t.Errorf("after deleting every checkpoint the next id is %s, want v4", got.Seq)
	}
	_, err := s.CheckpointBySeq(ctx, sb.ID, "v2")
	wantErr(t, "CheckpointBySeq(deleted v2)", err, metadata.ErrNotFound)

	// Each sandbox counts on its own.
	if got := createCk(t, s, newCheckpoint("c000000000000005", other)); got.Seq != "v0" {
		t.Errorf("first checkpoint of another sandbox is %s, want v0", got.Seq)
	}

	// A manual id needs the sandbox, in the checkpoint's account.
	_, err = s.CreateCheckpoint(ctx, newCheckpoint("c000000000000006", newSandbox("ffffffffffffffff", a.ID, "nope")))
	wantErr(t, "manual checkpoint of an unknown sandbox", err, metadata.ErrNotFound)
	b := ensureAccount(t, s, "bob")
	wrong := newCheckpoint("c000000000000007", sb)
	wrong.AccountID = b.ID
	_, err = s.CreateCheckpoint(ctx, wrong)
	wantErr(t, "manual checkpoint of a sandbox in another account", err, metadata.ErrNotFound)
	for _, id := range []string{"c000000000000006", "c000000000000007"} {
		_, err := s.CheckpointByID(ctx, id)
		wantErr(t, "failed checkpoint "+id, err, metadata.ErrNotFound)
	}
	if got := createCk(t, s, newCheckpoint("c000000000000008", sb)); got.Seq != "v5" {
		t.Errorf("after failed creations the next id is %s, want v5", got.Seq)
	}

	// Once the sandbox is deleted, no manual checkpoint can be made of it.
	if err := s.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateCheckpoint(ctx, newCheckpoint("c000000000000009", sb))
	wantErr(t, "manual checkpoint of a deleted sandbox", err, metadata.ErrNotFound)
}

// testCheckpointConcurrentManualIDs races manual checkpoints of one sandbox
// (and automatic ones beside them): every creation succeeds and the v-ids
// are exactly v0…v15, each once.
func testCheckpointConcurrentManualIDs(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)

	const n = 16
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, 2*n)
	for i := range n {
		wg.Go(func() {
			ck, err := s.CreateCheckpoint(ctx, newCheckpoint(fmt.Sprintf("c%015x", i), sb))
			got[i], errs[i] = ck.Seq, err
		})
		wg.Go(func() {
			auto := newAuto(fmt.Sprintf("a%015x", i), sb, fmt.Sprintf("auto-2031051%dT0000%02dZ", i%10, i), metadata.TriggerInterval)
			_, errs[n+i] = s.CreateCheckpoint(ctx, auto)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("creator %d: %v", i, err)
		}
	}
	want := make([]string, n)
	for i := range n {
		want[i] = metadata.ManualSeq(int64(i))
	}
	// v-ids in numeric order: shorter first, then byte-wise.
	slices.SortFunc(got, func(x, y string) int {
		return cmp.Or(cmp.Compare(len(x), len(y)), strings.Compare(x, y))
	})
	sameList(t, "concurrent v-ids, sorted", got, want...)

	all := listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if len(all) != 2*n {
		t.Errorf("%d checkpoints stored, want %d", len(all), 2*n)
	}
	// Stored at the same instant: listed in the order the ids were given.
	manual := listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: sb.ID})
	sameList(t, "manual checkpoints listed", seqs(manual), want...)
}

func testCheckpointListOrder(t *testing.T, open OpenFunc) {
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	web := newSandbox("0000000000000001", a.ID, "web")
	db := newSandbox("0000000000000002", a.ID, "db")
	create(t, s, web)
	create(t, s, db)

	// Twelve at the same instant: v10 and v11 come after v9, not after v1.
	var want []string
	for i := range 12 {
		ck := createCk(t, s, newCheckpoint(fmt.Sprintf("c%015x", 100-i), web)) // ids sort backwards
		want = append(want, ck.Seq)
	}
	sameList(t, "ids assigned", want, "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11")
	sameList(t, "ListCheckpoints(web)", seqs(listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: web.ID})), want...)

	// Later ones come after, earlier ones (a caller-given time) before,
	// whatever the insertion order; account-wide the sandboxes interleave.
	clock.Advance(time.Second)
	dbLater := createCk(t, s, newCheckpoint("d000000000000001", db))
	webLater := createCk(t, s, newCheckpoint("d000000000000002", web))
	early := newAuto("d000000000000003", db, "auto-20310517T082959Z", metadata.TriggerStop)
	early.Name = "early" // named: listed without IncludeAuto
	early.CreatedAt = start.Add(-time.Second)
	createCk(t, s, early)

	webIDs := ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: web.ID}))
	sameList(t, "web's last", webIDs[len(webIDs)-1:], webLater.ID)
	sameList(t, "ListCheckpoints(db)", ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: db.ID})),
		early.ID, dbLater.ID)

	all := ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{}))
	wantAll := append([]string{early.ID}, webIDs[:12]...)
	wantAll = append(wantAll, dbLater.ID, webLater.ID)
	sameList(t, "ListCheckpoints(account)", all, wantAll...)
}

func testCheckpointListFilter(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	web := newSandbox("0000000000000001", a.ID, "web")
	db := newSandbox("0000000000000002", a.ID, "db")
	bobs := newSandbox("b000000000000001", b.ID, "web")
	for _, sb := range []metadata.Sandbox{web, db, bobs} {
		create(t, s, sb)
	}

	step := func() { clock.Advance(time.Second) }
	m0 := createCk(t, s, newCheckpoint("c000000000000001", web)) // manual
	step()
	a0 := createCk(t, s, newAuto("c000000000000002", web, "auto-1", metadata.TriggerInterval))
	step()
	named := newAuto("c000000000000003", web, "auto-2", metadata.TriggerStop)
	named.Name = "kept"
	n0 := createCk(t, s, named) // automatic but named
	step()
	d0 := createCk(t, s, newAuto("c000000000000004", db, "auto-1", metadata.TriggerFork))
	step()
	d1 := createCk(t, s, newCheckpoint("c000000000000005", db))
	step()
	createCk(t, s, newCheckpoint("c000000000000006", bobs))
	createCk(t, s, newAuto("c000000000000007", bobs, "auto-1", metadata.TriggerInterval))

	for _, tc := range []struct {
		f    metadata.CheckpointFilter
		want []string
	}{
		{metadata.CheckpointFilter{}, []string{m0.ID, n0.ID, d1.ID}},
		{metadata.CheckpointFilter{IncludeAuto: true}, []string{m0.ID, a0.ID, n0.ID, d0.ID, d1.ID}},
		{metadata.CheckpointFilter{SandboxID: web.ID}, []string{m0.ID, n0.ID}},
		{metadata.CheckpointFilter{SandboxID: web.ID, IncludeAuto: true}, []string{m0.ID, a0.ID, n0.ID}},
		{metadata.CheckpointFilter{SandboxID: db.ID}, []string{d1.ID}},
		{metadata.CheckpointFilter{SandboxID: db.ID, IncludeAuto: true}, []string{d0.ID, d1.ID}},
		{metadata.CheckpointFilter{SandboxID: bobs.ID, IncludeAuto: true}, nil}, // bob's sandbox, alice's account
		{metadata.CheckpointFilter{SandboxID: "ffffffffffffffff", IncludeAuto: true}, nil},
	} {
		sameList(t, fmt.Sprintf("ListCheckpoints(alice, %+v)", tc.f), ckIDs(listCks(t, s, a.ID, tc.f)), tc.want...)
	}
	sameList(t, "ListCheckpoints(bob)", seqs(listCks(t, s, b.ID, metadata.CheckpointFilter{IncludeAuto: true})), "v0", "auto-1")
	sameList(t, "ListCheckpoints(unknown account)", ckIDs(listCks(t, s, b.ID+a.ID+1000, metadata.CheckpointFilter{IncludeAuto: true})))

	// A listed checkpoint is the whole row.
	for _, ck := range listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true}) {
		sameCheckpoint(t, "listed "+ck.ID, ck, ckByID(t, s, ck.ID))
	}
	// Naming an automatic checkpoint lists it; unnaming it hides it again.
	if err := s.SetCheckpointName(ctx, a0.ID, "now-kept"); err != nil {
		t.Fatal(err)
	}
	sameList(t, "after naming auto-1", ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: web.ID})), m0.ID, a0.ID, n0.ID)
	if err := s.SetCheckpointName(ctx, a0.ID, ""); err != nil {
		t.Fatal(err)
	}
	sameList(t, "after unnaming auto-1", ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: web.ID})), m0.ID, n0.ID)
}

func testAllCheckpoints(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	if all, err := s.AllCheckpoints(ctx); err != nil || all == nil || len(all) != 0 {
		t.Fatalf("AllCheckpoints on an empty store = %v, %v; want empty, non-nil", all, err)
	}

	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	ensureAccount(t, s, "carol") // no checkpoints
	web := newSandbox("a000000000000001", a.ID, "web")
	bobs := newSandbox("b000000000000001", b.ID, "web")
	create(t, s, web)
	create(t, s, bobs)

	b0 := createCk(t, s, newCheckpoint("c000000000000001", bobs))
	clock.Advance(time.Second)
	a0 := createCk(t, s, newAuto("c000000000000002", web, "auto-1", metadata.TriggerInterval))
	a1 := createCk(t, s, newCheckpoint("c000000000000003", web))
	clock.Advance(time.Second)
	b1 := createCk(t, s, newAuto("c000000000000004", bobs, "auto-1", metadata.TriggerDelete))
	if err := s.DeleteSandbox(ctx, bobs.ID); err != nil { // its checkpoints stay listed
		t.Fatal(err)
	}

	all, err := s.AllCheckpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alices, bobsCks := []string{a0.ID, a1.ID}, []string{b0.ID, b1.ID}
	want := append(alices, bobsCks...)
	if b.ID < a.ID {
		want = append(bobsCks, alices...)
	}
	sameList(t, "AllCheckpoints", ckIDs(all), want...)
	for _, ck := range all {
		sameCheckpoint(t, "AllCheckpoints has "+ck.ID, ck, ckByID(t, s, ck.ID))
	}
}

func testCheckpointNames(t *testing.T, open OpenFunc) {
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

	first := newCheckpoint("c000000000000001", web)
	first.Name = "before-upgrade"
	first = createCk(t, s, first)

	// Taken in the account, whichever sandbox asks.
	for _, sb := range []metadata.Sandbox{web, db} {
		ck := newCheckpoint("c000000000000002", sb)
		ck.Name = "before-upgrade"
		_, err := s.CreateCheckpoint(ctx, ck)
		wantErr(t, "CreateCheckpoint with a taken name (sandbox "+sb.Name+")", err, metadata.ErrConflict)
	}
	_, err := s.CheckpointByID(ctx, "c000000000000002")
	wantErr(t, "a checkpoint with a taken name was stored", err, metadata.ErrNotFound)
	if got := createCk(t, s, newCheckpoint("c000000000000003", web)); got.Seq != "v1" {
		t.Errorf("after a name conflict the next id is %s, want v1 (no gap)", got.Seq)
	}

	// Another account may use it.
	bck := newCheckpoint("cb00000000000001", bobs)
	bck.Name = "before-upgrade"
	bck = createCk(t, s, bck)
	for _, tc := range []struct {
		acct int64
		id   string
	}{{a.ID, first.ID}, {b.ID, bck.ID}} {
		got, err := s.CheckpointByName(ctx, tc.acct, "before-upgrade")
		if err != nil || got.ID != tc.id {
			t.Errorf("CheckpointByName(%d, before-upgrade) = %s, %v; want %s", tc.acct, got.ID, err, tc.id)
		}
	}

	// Any number of unnamed ones; "" names nothing.
	createCk(t, s, newCheckpoint("c000000000000004", web))
	_, err = s.CheckpointByName(ctx, a.ID, "")
	wantErr(t, "CheckpointByName(\"\")", err, metadata.ErrNotFound)

	// SetCheckpointName: taken → ErrConflict and unchanged; its own name → fine.
	err = s.SetCheckpointName(ctx, "c000000000000003", "before-upgrade")
	wantErr(t, "SetCheckpointName to a taken name", err, metadata.ErrConflict)
	if got := ckByID(t, s, "c000000000000003"); got.Name != "" {
		t.Errorf("name after a failed SetCheckpointName = %q", got.Name)
	}
	if err := s.SetCheckpointName(ctx, first.ID, "before-upgrade"); err != nil {
		t.Errorf("SetCheckpointName to its own name: %v", err)
	}

	// Renaming frees the old name; clearing frees it too.
	if err := s.SetCheckpointName(ctx, first.ID, "after-upgrade"); err != nil {
		t.Fatal(err)
	}
	want := first
	want.Name = "after-upgrade"
	sameCheckpoint(t, "after rename", ckByID(t, s, first.ID), want)
	got, err := s.CheckpointByName(ctx, a.ID, "after-upgrade")
	if err != nil || got.ID != first.ID {
		t.Errorf("CheckpointByName(after-upgrade) = %s, %v", got.ID, err)
	}
	_, err = s.CheckpointByName(ctx, a.ID, "before-upgrade")
	wantErr(t, "CheckpointByName(old name)", err, metadata.ErrNotFound)
	if err := s.SetCheckpointName(ctx, "c000000000000003", "before-upgrade"); err != nil {
		t.Errorf("SetCheckpointName to a freed name: %v", err)
	}
	if err := s.SetCheckpointName(ctx, first.ID, ""); err != nil {
		t.Fatal(err)
	}
	if got := ckByID(t, s, first.ID); got.Name != "" {
		t.Errorf("name after clearing = %q", got.Name)
	}
	_, err = s.CheckpointByName(ctx, a.ID, "after-upgrade")
	wantErr(t, "CheckpointByName(cleared name)", err, metadata.ErrNotFound)

	// Names are case-sensitive, byte-wise.
	if err := s.SetCheckpointName(ctx, first.ID, "Before-Upgrade"); err != nil {
		t.Errorf("a name differing in case: %v", err)
	}

	err = s.SetCheckpointName(ctx, "cfffffffffffffff", "x")
	wantErr(t, "SetCheckpointName(unknown)", err, metadata.ErrNotFound)
}

func testCheckpointsSurviveSandboxDelete(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)

	manual := createCk(t, s, newCheckpoint("c000000000000001", sb))
	clock.Advance(time.Second)
	named := newCheckpoint("c000000000000002", sb)
	named.Name = "keep-me"
	named = createCk(t, s, named)
	clock.Advance(time.Second)
	final := createCk(t, s, newAuto("c000000000000003", sb, "auto-20310517T083002Z", metadata.TriggerDelete))
	if err := s.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}

	for _, want := range []metadata.Checkpoint{manual, named, final} {
		sameCheckpoint(t, "after DeleteSandbox", ckByID(t, s, want.ID), want)
		got, err := s.CheckpointBySeq(ctx, sb.ID, want.Seq)
		if err != nil || got.ID != want.ID {
			t.Errorf("CheckpointBySeq(%s) after DeleteSandbox = %s, %v", want.Seq, got.ID, err)
		}
	}
	if got, err := s.CheckpointByName(ctx, a.ID, "keep-me"); err != nil || got.ID != named.ID {
		t.Errorf("CheckpointByName after DeleteSandbox = %s, %v", got.ID, err)
	}
	all := listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true})
	sameList(t, "account-wide after DeleteSandbox", ckIDs(all), manual.ID, named.ID, final.ID)
	for _, ck := range all {
		if ck.SandboxName != "web" || ck.SandboxID != sb.ID {
			t.Errorf("%s lost its sandbox: %s %q", ck.ID, ck.SandboxID, ck.SandboxName)
		}
	}
	sameList(t, "by sandbox id after DeleteSandbox",
		ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: sb.ID})), manual.ID, named.ID)

	// The id stays taken while checkpoints carry it; the name is free.
	err := s.CreateSandbox(ctx, newSandbox(sb.ID, a.ID, "web2"))
	wantErr(t, "CreateSandbox with the id of a deleted sandbox that has checkpoints", err, metadata.ErrConflict)
	again := newSandbox("0000000000000002", a.ID, "web")
	create(t, s, again)
	if got := createCk(t, s, newCheckpoint("c000000000000004", again)); got.Seq != "v0" {
		t.Errorf("new sandbox with the old name starts at %s, want v0", got.Seq)
	}
	sameList(t, "the new sandbox's checkpoints",
		ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{SandboxID: again.ID})), "c000000000000004")
	if all := listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true}); len(all) != 4 {
		t.Errorf("account-wide: %d checkpoints, want 4", len(all))
	}
}

func testCheckpointSizes(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	ck := newCheckpoint("c000000000000001", sb)
	ck.SizeExclusive, ck.SizeTotal = 0, 0
	ck = createCk(t, s, ck)
	other := createCk(t, s, newCheckpoint("c000000000000002", sb))

	const big = 5 << 40 // past 32 bits
	if err := s.SetCheckpointSize(ctx, ck.ID, 123, big); err != nil {
		t.Fatal(err)
	}
	want := ck
	want.SizeExclusive, want.SizeTotal = 123, big
	sameCheckpoint(t, "after SetCheckpointSize", ckByID(t, s, ck.ID), want)
	sameCheckpoint(t, "the other checkpoint", ckByID(t, s, other.ID), other)

	for _, sz := range [][2]int64{{-1, 0}, {0, -1}} {
		err := s.SetCheckpointSize(ctx, ck.ID, sz[0], sz[1])
		if err == nil || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrConflict) {
			t.Errorf("SetCheckpointSize(%d, %d): err = %v, want a plain error", sz[0], sz[1], err)
		}
	}
	sameCheckpoint(t, "after invalid sizes", ckByID(t, s, ck.ID), want)

	if err := s.SetCheckpointSize(ctx, ck.ID, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := ckByID(t, s, ck.ID); got.SizeExclusive != 0 || got.SizeTotal != 0 {
		t.Errorf("sizes after setting zero: %d, %d", got.SizeExclusive, got.SizeTotal)
	}
	err := s.SetCheckpointSize(ctx, "cfffffffffffffff", 1, 1)
	wantErr(t, "SetCheckpointSize(unknown)", err, metadata.ErrNotFound)
}

func testCheckpointDelete(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	named := newCheckpoint("c000000000000001", sb)
	named.Name = "snap"
	named = createCk(t, s, named)
	kept := createCk(t, s, newCheckpoint("c000000000000002", sb))

	if err := s.DeleteCheckpoint(ctx, named.ID); err != nil {
		t.Fatal(err)
	}
	_, err := s.CheckpointByID(ctx, named.ID)
	wantErr(t, "CheckpointByID after delete", err, metadata.ErrNotFound)
	_, err = s.CheckpointBySeq(ctx, sb.ID, named.Seq)
	wantErr(t, "CheckpointBySeq after delete", err, metadata.ErrNotFound)
	_, err = s.CheckpointByName(ctx, a.ID, "snap")
	wantErr(t, "CheckpointByName after delete", err, metadata.ErrNotFound)
	err = s.DeleteCheckpoint(ctx, named.ID)
	wantErr(t, "second DeleteCheckpoint", err, metadata.ErrNotFound)
	sameList(t, "after delete", ckIDs(listCks(t, s, a.ID, metadata.CheckpointFilter{IncludeAuto: true})), kept.ID)

	// Its name and its id are free again; its v-number is not.
	again := newCheckpoint(named.ID, sb)
	again.Name = "snap"
	if got := createCk(t, s, again); got.Seq != "v2" {
		t.Errorf("recreated checkpoint got %s, want v2", got.Seq)
	}
}

func testCheckpointPersistence(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, sb)
	v0 := createCk(t, s, newCheckpoint("c000000000000001", sb))
	v1 := createCk(t, s, newCheckpoint("c000000000000002", sb))
	if err := s.SetCheckpointSize(ctx, v0.ID, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCheckpointName(ctx, v0.ID, "snap"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCurrentCheckpoint(ctx, sb.ID, v0.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCheckpoint(ctx, v1.ID); err != nil {
		t.Fatal(err)
	}
	want := ckByID(t, s, v0.ID)
	wantSb := byID(t, s, sb.ID)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	clock.Advance(time.Hour)
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	sameCheckpoint(t, "checkpoint after reopen", ckByID(t, s2, v0.ID), want)
	sameSandbox(t, "sandbox after reopen", byID(t, s2, sb.ID), wantSb)
	// The counter persisted: v1 was deleted, the next is v2.
	if got := createCk(t, s2, newCheckpoint("c000000000000003", sb)); got.Seq != "v2" {
		t.Errorf("first id after reopen is %s, want v2", got.Seq)
	}
}
