// Package storetest is the one test suite every metadata.Store
// implementation must pass. An implementation's tests call Run with a
// function that opens a store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) metadata.Store {
//			s, err := sqlite.Open(filepath.Join(dirFor(t), "meta.db"), now)
//			…
//		})
//	}
//
// The suite checks what the metadata.Store documentation promises, so a
// behaviour added to the interface gets its test here, once.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// OpenFunc opens a store for test t whose clock is now. Calls with the same
// t must reach the same database (the suite closes a store and opens it
// again to check persistence); each new t must start with an empty
// database. The suite closes every store it opens.
type OpenFunc func(t *testing.T, now func() time.Time) metadata.Store

// Run runs the whole suite against the stores open returns, each test in
// its own subtest with its own database.
func Run(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(*testing.T, OpenFunc)
	}{
		{"Accounts", testAccounts},
		{"AccountLifecycle", testAccountLifecycle},
		{"Tokens", testTokens},
		{"Audit", testAudit},
		{"AccountHoldings", testAccountHoldings},
		{"AccountInvalidInput", testAccountInvalidInput},
		{"TokenFields", testTokenFields},
		{"AuditOrderAndFilters", testAuditOrderAndFilters},
		{"AccessPersistence", testAccessPersistence},
		{"CreateAndGet", testCreateAndGet},
		{"DefaultTimes", testDefaultTimes},
		{"Conflicts", testConflicts},
		{"AccountIsolation", testAccountIsolation},
		{"SandboxNetwork", testSandboxNetwork},
		{"SandboxSettings", testSandboxSettings},
		{"Hosts", testHosts},
		{"MoveSandbox", testMoveSandbox},
		{"NotFound", testNotFound},
		{"InvalidInput", testInvalidInput},
		{"ListOrderAndFilter", testListOrderAndFilter},
		{"AllSandboxes", testAllSandboxes},
		{"SetState", testSetState},
		{"Delete", testDelete},
		{"Persistence", testPersistence},
		{"CancelledContext", testCancelledContext},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ConcurrentCreateSameName", testConcurrentCreateSameName},
		{"SandboxCheckpointFields", testSandboxCheckpointFields},
		{"CheckpointCreateAndGet", testCheckpointCreateAndGet},
		{"CheckpointManualIDs", testCheckpointManualIDs},
		{"CheckpointConcurrentManualIDs", testCheckpointConcurrentManualIDs},
		{"CheckpointListOrder", testCheckpointListOrder},
		{"CheckpointListFilter", testCheckpointListFilter},
		{"AllCheckpoints", testAllCheckpoints},
		{"CheckpointConflicts", testCheckpointConflicts},
		{"CheckpointNames", testCheckpointNames},
		{"CheckpointsSurviveSandboxDelete", testCheckpointsSurviveSandboxDelete},
		{"CheckpointSizes", testCheckpointSizes},
		{"CheckpointDelete", testCheckpointDelete},
		{"CheckpointNotFound", testCheckpointNotFound},
		{"CheckpointInvalidInput", testCheckpointInvalidInput},
		{"CheckpointPersistence", testCheckpointPersistence},
		{"ListAccounts", testListAccounts},
		{"AutoCheckpointDefault", testAutoCheckpointDefault},
		{"SetAutoCheckpoint", testSetAutoCheckpoint},
		{"CheckpointRootGeneration", testCheckpointRootGeneration},
		{"LatestCheckpoint", testLatestCheckpoint},
		{"ResumeCheckpointCreate", testResumeCheckpointCreate},
		{"SetResumeCheckpoint", testSetResumeCheckpoint},
		{"ResumeCheckpointNotFound", testResumeCheckpointNotFound},
		{"DeleteCheckpointClearsResume", testDeleteCheckpointClearsResume},
		{"ResumeCheckpointConcurrentDelete", testResumeCheckpointConcurrentDelete},
		{"ResumeCheckpointPersistence", testResumeCheckpointPersistence},
		{"RestartPolicy", testRestartPolicy},
		{"SandboxCrashed", testSandboxCrashed},
		{"LastOOMKill", testLastOOMKill},
		{"CheckpointOffsite", testCheckpointOffsite},
		{"ImportCheckpoint", testImportCheckpoint},
		{"OffsiteDeletes", testOffsiteDeletes},
		{"Leases", testLeases},
		{"DiskPaths", testDiskPaths},
		{"InsidePolicyCreate", testInsidePolicyCreate},
		{"SetInsidePolicy", testSetInsidePolicy},
		{"CheckpointFromInside", testCheckpointFromInside},
		{"KeepCheckpoint", testKeepCheckpoint},
		{"Journal", testJournal},
		{"PublishedPorts", testPublishedPorts},
		{"CopyPorts", testCopyPorts},
		{"PortTokens", testPortTokens},
		{"Images", testImages},
		{"ImagesByDigest", testImagesByDigest},
		{"ImageInvalidInput", testImageInvalidInput},
		{"ImageUsers", testImageUsers},
		{"ImagesConcurrentCreate", testImagesConcurrentCreate},
		{"TwoStores", testTwoStores},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// Clock is a settable clock for the store under test. Its zero time is in a
// zone other than UTC, with nanoseconds, so the suite sees that the store
// converts to UTC and to microseconds.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// start is the first time of every Clock.
var start = time.Date(2031, 5, 17, 10, 30, 0, 123456789, time.FixedZone("UTC+2", 2*60*60))

// NewClock returns a clock at a fixed start time.
func NewClock() *Clock { return &Clock{t: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// stored is the form the store keeps t in.
func stored(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// openStore opens a store with a new clock and closes it when t ends.
func openStore(t *testing.T, open OpenFunc) (metadata.Store, *Clock) {
	t.Helper()
	c := NewClock()
	s := open(t, c.Now)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, c
}

func ensureAccount(t *testing.T, s metadata.Store, name string) metadata.Account {
	t.Helper()
	a, err := s.EnsureAccount(context.Background(), name)
	if err != nil {
		t.Fatalf("EnsureAccount(%q): %v", name, err)
	}
	return a
}

// newSandbox returns a valid sandbox with every field set except the times.
// Its AutoCheckpoint is not the default, so every comparison of a sandbox
// read back also checks that the interval round-trips.
func newSandbox(id string, accountID int64, name string) metadata.Sandbox {
	return metadata.Sandbox{
		ID:             id,
		AccountID:      accountID,
		Name:           name,
		Image:          "debian",
		State:          metadata.SandboxStopped,
		CPUs:           1.5,
		MemoryBytes:    512 << 20,
		AutoCheckpoint: 15 * time.Minute,
		Inside:         metadata.InsidePolicy{Memory: true, PerMinute: 3, Keep: 7},
		DiskBytes:      8 << 30,
		Restart:        metadata.RestartOnFailure,
	}
}

func create(t *testing.T, s metadata.Store, sb metadata.Sandbox) {
	t.Helper()
	if err := s.CreateSandbox(context.Background(), sb); err != nil {
		t.Fatalf("CreateSandbox(%s %q): %v", sb.ID, sb.Name, err)
	}
}

func byID(t *testing.T, s metadata.Store, id string) metadata.Sandbox {
	t.Helper()
	sb, err := s.SandboxByID(context.Background(), id)
	if err != nil {
		t.Fatalf("SandboxByID(%s): %v", id, err)
	}
	return sb
}

// checkUTC fails unless every time in ts is in UTC.
func checkUTC(t *testing.T, what string, ts ...time.Time) {
	t.Helper()
	for _, tm := range ts {
		if tm.Location() != time.UTC {
			t.Errorf("%s: time %v is in %v, want UTC", what, tm, tm.Location())
		}
	}
}

// sameSandbox fails unless got equals want field by field, times compared
// as instants and required in UTC.
func sameSandbox(t *testing.T, what string, got, want metadata.Sandbox) {
	t.Helper()
	checkUTC(t, what, got.CreatedAt, got.UpdatedAt)
	g, w := got, want
	g.CreatedAt, g.UpdatedAt, w.CreatedAt, w.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	g.LastCrash.At, g.LastOOMKill.At, w.LastCrash.At, w.LastOOMKill.At = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if w.Network.Mode == "" {
		w.Network.Mode = metadata.NetworkNone // what the store keeps for ""
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got  %+v\n want %+v", what, g, w)
	}
	if !got.LastCrash.At.Equal(want.LastCrash.At) || !got.LastOOMKill.At.Equal(want.LastOOMKill.At) {
		t.Errorf("%s: last crash at %v, last OOM kill at %v; want %v and %v", what,
			got.LastCrash.At, got.LastOOMKill.At, want.LastCrash.At, want.LastOOMKill.At)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("%s: times created %v updated %v, want %v and %v", what,
			got.CreatedAt, got.UpdatedAt, want.CreatedAt, want.UpdatedAt)
	}
}

// sameIDs fails unless sbs has exactly the ids want, in that order.
func sameIDs(t *testing.T, what string, sbs []metadata.Sandbox, want ...string) {
	t.Helper()
	got := make([]string, len(sbs))
	for i, sb := range sbs {
		got[i] = sb.ID
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

func testAccounts(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)

	if _, err := s.AccountByName(ctx, "alice"); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("AccountByName before creation: err = %v, want ErrNotFound", err)
	}
	a := ensureAccount(t, s, "alice")
	if a.ID == 0 || a.Name != "alice" {
		t.Fatalf("EnsureAccount = %+v", a)
	}
	checkUTC(t, "account", a.CreatedAt)
	if !a.CreatedAt.Equal(stored(clock.Now())) {
		t.Errorf("CreatedAt = %v, want the clock's %v", a.CreatedAt, stored(clock.Now()))
	}

	clock.Advance(time.Hour)
	again := ensureAccount(t, s, "alice")
	if again.ID != a.ID || !again.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("EnsureAccount again = %+v, want %+v", again, a)
	}
	got, err := s.AccountByName(ctx, "alice")
	if err != nil || got.ID != a.ID || got.Name != "alice" || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("AccountByName = %+v, %v; want %+v", got, err, a)
	}

	b := ensureAccount(t, s, "bob")
	if b.ID == a.ID {
		t.Errorf("two accounts share id %d", a.ID)
	}
	if _, err := s.AccountByName(ctx, "Alice"); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("AccountByName is not case-sensitive: err = %v", err)
	}
	if _, err := s.EnsureAccount(ctx, ""); err == nil {
		t.Errorf("EnsureAccount(\"\") succeeded")
	}
}

func testCreateAndGet(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	sb := newSandbox("0123456789abcdef", a.ID, "web")
	sb.State = metadata.SandboxRunning
	sb.ParentID = "fedcba9876543210"          // need not exist
	sb.CurrentCheckpoint = "c0c0c0c0c0c0c0c0" // nor these
	sb.SourceCheckpoint = "c1c1c1c1c1c1c1c1"
	sb.ResumeCheckpoint = "c2c2c2c2c2c2c2c2"
	sb.CreatedAt = time.Date(2030, 1, 2, 3, 4, 5, 6007, time.FixedZone("UTC-5", -5*60*60))
	sb.UpdatedAt = sb.CreatedAt.Add(90 * time.Minute)
	create(t, s, sb)

	want := sb
	want.CreatedAt, want.UpdatedAt = stored(sb.CreatedAt), stored(sb.UpdatedAt)
	sameSandbox(t, "SandboxByID", byID(t, s, sb.ID), want)
	got, err := s.SandboxByName(ctx, a.ID, "web")
	if err != nil {
		t.Fatalf("SandboxByName: %v", err)
	}
	sameSandbox(t, "SandboxByName", got, want)

	// Zero limits and no parent round-trip as zero; no interval reads back
	// as the default.
	plain := metadata.Sandbox{ID: "1111111111111111", AccountID: a.ID, Name: "plain", Image: "busybox", State: metadata.SandboxStopped}
	create(t, s, plain)
	if got := byID(t, s, plain.ID); got.CPUs != 0 || got.MemoryBytes != 0 || got.ParentID != "" || got.Image != "busybox" ||
		got.CurrentCheckpoint != "" || got.SourceCheckpoint != "" || got.ResumeCheckpoint != "" ||
		got.AutoCheckpoint != metadata.DefaultAutoCheckpoint {
		t.Errorf("plain sandbox = %+v", got)
	}
}

func testDefaultTimes(t *testing.T, open OpenFunc) {
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	clock.Advance(time.Minute)
	create(t, s, newSandbox("aaaaaaaaaaaaaaaa", a.ID, "zero"))
	got := byID(t, s, "aaaaaaaaaaaaaaaa")
	now := stored(clock.Now())
	if !got.CreatedAt.Equal(now) || !got.UpdatedAt.Equal(now) {
		t.Errorf("zero times became created %v updated %v, want both %v", got.CreatedAt, got.UpdatedAt, now)
	}
	checkUTC(t, "defaulted", got.CreatedAt, got.UpdatedAt)

	// Only CreatedAt given: UpdatedAt follows it, not the clock.
	sb := newSandbox("bbbbbbbbbbbbbbbb", a.ID, "created-only")
	sb.CreatedAt = time.Date(2029, 2, 3, 4, 5, 6, 0, time.UTC)
	create(t, s, sb)
	got = byID(t, s, sb.ID)
	if !got.CreatedAt.Equal(sb.CreatedAt) || !got.UpdatedAt.Equal(sb.CreatedAt) {
		t.Errorf("created-only: created %v updated %v, want both %v", got.CreatedAt, got.UpdatedAt, sb.CreatedAt)
	}
}

func testConflicts(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	orig := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, orig)

	err := s.CreateSandbox(ctx, newSandbox("0000000000000002", a.ID, "web"))
	wantErr(t, "same name, same account", err, metadata.ErrConflict)
	err = s.CreateSandbox(ctx, newSandbox("0000000000000001", a.ID, "other"))
	wantErr(t, "same id, same account", err, metadata.ErrConflict)
	err = s.CreateSandbox(ctx, newSandbox("0000000000000001", b.ID, "web"))
	wantErr(t, "same id, other account", err, metadata.ErrConflict)

	// The failed creations changed nothing.
	for _, acct := range []int64{a.ID, b.ID} {
		sbs, err := s.ListSandboxes(ctx, acct, metadata.SandboxFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if acct == a.ID {
			sameIDs(t, "alice's sandboxes", sbs, orig.ID)
		} else {
			sameIDs(t, "bob's sandboxes", sbs)
		}
	}
	if _, err := s.SandboxByID(ctx, "0000000000000002"); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("a conflicting sandbox was stored: err = %v", err)
	}
}

func testAccountIsolation(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")

	create(t, s, newSandbox("a000000000000001", a.ID, "web"))
	create(t, s, newSandbox("b000000000000001", b.ID, "web"))
	create(t, s, newSandbox("b000000000000002", b.ID, "db"))

	for _, tc := range []struct {
		acct int64
		id   string
	}{{a.ID, "a000000000000001"}, {b.ID, "b000000000000001"}} {
		got, err := s.SandboxByName(ctx, tc.acct, "web")
		if err != nil || got.ID != tc.id || got.AccountID != tc.acct {
			t.Errorf("SandboxByName(%d, web) = %s in %d, %v; want %s", tc.acct, got.ID, got.AccountID, err, tc.id)
		}
	}
	_, err := s.SandboxByName(ctx, a.ID, "db")
	wantErr(t, "bob's sandbox by name in alice's account", err, metadata.ErrNotFound)

	sbs, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "alice's sandboxes", sbs, "a000000000000001")
	sbs, err = s.ListSandboxes(ctx, b.ID, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "bob's sandboxes", sbs, "b000000000000002", "b000000000000001")

	// Deleting one account's "web" leaves the other's.
	if err := s.DeleteSandbox(ctx, "a000000000000001"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SandboxByName(ctx, b.ID, "web"); err != nil || got.ID != "b000000000000001" {
		t.Errorf("bob's web after deleting alice's = %s, %v", got.ID, err)
	}
}

func testNotFound(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	create(t, s, newSandbox("0000000000000001", a.ID, "web"))

	_, err := s.AccountByName(ctx, "nobody")
	wantErr(t, "AccountByName(nobody)", err, metadata.ErrNotFound)
	_, err = s.SandboxByID(ctx, "ffffffffffffffff")
	wantErr(t, "SandboxByID(unknown)", err, metadata.ErrNotFound)
	_, err = s.SandboxByName(ctx, a.ID, "nope")
	wantErr(t, "SandboxByName(unknown name)", err, metadata.ErrNotFound)
	_, err = s.SandboxByName(ctx, a.ID+1000, "web")
	wantErr(t, "SandboxByName(unknown account)", err, metadata.ErrNotFound)
	err = s.SetSandboxState(ctx, "ffffffffffffffff", metadata.SandboxRunning)
	wantErr(t, "SetSandboxState(unknown)", err, metadata.ErrNotFound)
	err = s.SetAutoCheckpoint(ctx, "ffffffffffffffff", time.Hour)
	wantErr(t, "SetAutoCheckpoint(unknown)", err, metadata.ErrNotFound)
	err = s.DeleteSandbox(ctx, "ffffffffffffffff")
	wantErr(t, "DeleteSandbox(unknown)", err, metadata.ErrNotFound)
	err = s.CreateSandbox(ctx, newSandbox("0000000000000002", a.ID+1000, "web"))
	wantErr(t, "CreateSandbox in an unknown account", err, metadata.ErrNotFound)

	sbs, err := s.ListSandboxes(ctx, a.ID+1000, metadata.SandboxFilter{})
	if err != nil || len(sbs) != 0 {
		t.Errorf("ListSandboxes(unknown account) = %v, %v; want empty, nil", sbs, err)
	}
}

func testInvalidInput(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	bad := map[string]func(*metadata.Sandbox){
		"empty id":        func(sb *metadata.Sandbox) { sb.ID = "" },
		"no account":      func(sb *metadata.Sandbox) { sb.AccountID = 0 },
		"negative disk":   func(sb *metadata.Sandbox) { sb.DiskBytes = -1 },
		"empty name":      func(sb *metadata.Sandbox) { sb.Name = "" },
		"empty state":     func(sb *metadata.Sandbox) { sb.State = "" },
		"unknown state":   func(sb *metadata.Sandbox) { sb.State = "flying" },
		"negative cpus":   func(sb *metadata.Sandbox) { sb.CPUs = -1 },
		"negative memory": func(sb *metadata.Sandbox) { sb.MemoryBytes = -1 },
		"negative auto":   func(sb *metadata.Sandbox) { sb.AutoCheckpoint = -time.Minute },
		"sub-second auto": func(sb *metadata.Sandbox) { sb.AutoCheckpoint = 90*time.Second + time.Millisecond },
	}
	for what, mutate := range bad {
		sb := newSandbox("0000000000000001", a.ID, "web")
		mutate(&sb)
		err := s.CreateSandbox(ctx, sb)
		if err == nil || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrConflict) {
			t.Errorf("CreateSandbox with %s: err = %v, want a plain error", what, err)
		}
	}
	sbs, err := s.AllSandboxes(ctx)
	if err != nil || len(sbs) != 0 {
		t.Fatalf("after invalid creations: %v, %v; want nothing stored", sbs, err)
	}

	create(t, s, newSandbox("0000000000000001", a.ID, "web"))
	if err := s.SetSandboxState(ctx, "0000000000000001", "flying"); err == nil {
		t.Errorf("SetSandboxState(flying) succeeded")
	}
	if got := byID(t, s, "0000000000000001"); got.State != metadata.SandboxStopped {
		t.Errorf("state after an invalid update = %q", got.State)
	}
}

func testListOrderAndFilter(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	const parent, other = "p000000000000001", "p000000000000002"
	// Created out of order; ids sort differently from names on purpose.
	for _, sb := range []struct{ id, name, parent string }{
		{"0000000000000009", "web", ""},
		{"0000000000000008", "b-fork-2", parent},
		{"0000000000000007", "B-upper", ""}, // byte-wise: upper case sorts first
		{"0000000000000006", "a-fork-1", parent},
		{"0000000000000005", "c-fork-of-other", other},
		{"0000000000000004", "a-fork-10", parent},
	} {
		x := newSandbox(sb.id, a.ID, sb.name)
		x.ParentID = sb.parent
		create(t, s, x)
	}

	all, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "ListSandboxes (by name)", all,
		"0000000000000007", "0000000000000006", "0000000000000004", "0000000000000008", "0000000000000005", "0000000000000009")

	forks, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{ParentID: parent})
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "ListSandboxes(parent)", forks, "0000000000000006", "0000000000000004", "0000000000000008")
	for _, f := range forks {
		if f.ParentID != parent {
			t.Errorf("fork %s has parent %q", f.ID, f.ParentID)
		}
	}

	none, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{ParentID: "ffffffffffffffff"})
	if err != nil || len(none) != 0 {
		t.Errorf("ListSandboxes(parent without forks) = %v, %v; want empty", none, err)
	}

	// The filter is per account: bob's fork of the same parent id is not listed for alice.
	b := ensureAccount(t, s, "bob")
	x := newSandbox("b000000000000001", b.ID, "a-bobs-fork")
	x.ParentID = parent
	create(t, s, x)
	forks, err = s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{ParentID: parent})
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "alice's forks after bob's", forks, "0000000000000006", "0000000000000004", "0000000000000008")
}

func testAllSandboxes(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)

	empty, err := s.AllSandboxes(ctx)
	if err != nil || len(empty) != 0 {
		t.Fatalf("AllSandboxes on an empty store = %v, %v", empty, err)
	}

	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")
	ensureAccount(t, s, "carol") // no sandboxes
	create(t, s, newSandbox("b000000000000001", b.ID, "zeta"))
	create(t, s, newSandbox("a000000000000002", a.ID, "web"))
	create(t, s, newSandbox("b000000000000002", b.ID, "alpha"))
	create(t, s, newSandbox("a000000000000001", a.ID, "db"))
	running := newSandbox("a000000000000003", a.ID, "worker")
	running.State = metadata.SandboxRunning
	create(t, s, running)

	all, err := s.AllSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Ordered by account id, then name.
	alices := []string{"a000000000000001", "a000000000000002", "a000000000000003"}
	bobs := []string{"b000000000000002", "b000000000000001"}
	want := append(alices, bobs...)
	if b.ID < a.ID {
		want = append(bobs, alices...)
	}
	sameIDs(t, "AllSandboxes", all, want...)
	for _, sb := range all {
		if want := byID(t, s, sb.ID); sb.State != want.State || sb.AccountID != want.AccountID {
			t.Errorf("AllSandboxes has %s as %+v, SandboxByID as %+v", sb.ID, sb, want)
		}
	}
}

func testSetState(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	create(t, s, newSandbox("0000000000000001", a.ID, "web"))
	create(t, s, newSandbox("0000000000000002", a.ID, "db"))
	before := byID(t, s, "0000000000000001")
	other := byID(t, s, "0000000000000002")

	clock.Advance(42 * time.Second)
	if err := s.SetSandboxState(ctx, "0000000000000001", metadata.SandboxRunning); err != nil {
		t.Fatal(err)
	}
	want := before
	want.State, want.UpdatedAt = metadata.SandboxRunning, stored(clock.Now())
	sameSandbox(t, "after SetSandboxState(running)", byID(t, s, "0000000000000001"), want)
	sameSandbox(t, "the other sandbox", byID(t, s, "0000000000000002"), other)

	// Setting the same state again still bumps UpdatedAt.
	clock.Advance(time.Hour)
	if err := s.SetSandboxState(ctx, "0000000000000001", metadata.SandboxRunning); err != nil {
		t.Fatal(err)
	}
	want.UpdatedAt = stored(clock.Now())
	sameSandbox(t, "after SetSandboxState(running) again", byID(t, s, "0000000000000001"), want)

	clock.Advance(time.Millisecond)
	if err := s.SetSandboxState(ctx, "0000000000000001", metadata.SandboxStopped); err != nil {
		t.Fatal(err)
	}
	want.State, want.UpdatedAt = metadata.SandboxStopped, stored(clock.Now())
	sameSandbox(t, "after SetSandboxState(stopped)", byID(t, s, "0000000000000001"), want)
}

func testDelete(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	create(t, s, newSandbox("0000000000000001", a.ID, "web"))
	create(t, s, newSandbox("0000000000000002", a.ID, "db"))

	if err := s.DeleteSandbox(ctx, "0000000000000001"); err != nil {
		t.Fatal(err)
	}
	_, err := s.SandboxByID(ctx, "0000000000000001")
	wantErr(t, "SandboxByID after delete", err, metadata.ErrNotFound)
	_, err = s.SandboxByName(ctx, a.ID, "web")
	wantErr(t, "SandboxByName after delete", err, metadata.ErrNotFound)
	err = s.DeleteSandbox(ctx, "0000000000000001")
	wantErr(t, "second DeleteSandbox", err, metadata.ErrNotFound)
	sbs, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "ListSandboxes after delete", sbs, "0000000000000002")

	// The name is free again, under a new id.
	create(t, s, newSandbox("0000000000000003", a.ID, "web"))
	if got, err := s.SandboxByName(ctx, a.ID, "web"); err != nil || got.ID != "0000000000000003" {
		t.Errorf("reused name = %s, %v", got.ID, err)
	}
}
