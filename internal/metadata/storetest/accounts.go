package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Accounts, API tokens and the audit log (schema version 17), beyond
// access.go: what else an account may hold when it is deleted, input the
// store refuses, every field round-tripping, ordering ties, filters that
// must not be patterns, and persistence.

func wantPlain(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, metadata.ErrNotFound) || errors.Is(err, metadata.ErrConflict) {
		t.Errorf("%s: err = %v, want a plain error", what, err)
	}
}

// An account that holds only manifests to delete off-site, or a running
// journal entry, is not deleted; one with only a port token and ended
// journal entries is, with them. Its id is not given again.
func testAccountHoldings(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := open2(t, open)
	a, err := s.CreateAccount(ctx, "team-b", 0)
	if err != nil {
		t.Fatal(err)
	}

	// Off-site: a deleted checkpoint's manifest awaits deletion.
	sb := newSandbox("00000000000000b1", a.ID, "web")
	create(t, s, sb)
	createCk(t, s, newCheckpoint("ck-b1", sb))
	if err := s.SetCheckpointOffsite(ctx, "ck-b1", "manifest-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCheckpoint(ctx, "ck-b1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteAccount with off-site manifests to delete", s.DeleteAccount(ctx, "team-b"), metadata.ErrConflict)
	if err := s.ForgetOffsiteDeletes(ctx, a.ID, []string{"manifest-1"}); err != nil {
		t.Fatal(err)
	}

	// A running operation.
	if err := s.BeginJournal(ctx, newEntry("op-b1", a.ID, "host/h1/i1")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteAccount with a running operation", s.DeleteAccount(ctx, "team-b"), metadata.ErrConflict)
	if err := s.FinishJournal(ctx, "op-b1", metadata.JournalDone, "", ""); err != nil {
		t.Fatal(err)
	}

	// What was refused changed nothing.
	if got, err := s.AccountByName(ctx, "team-b"); err != nil || got.ID != a.ID {
		t.Fatalf("the account after refused deletes: %+v, %v", got, err)
	}

	// A port token and an ended entry go with the account.
	if _, err := s.EnsurePortToken(ctx, a.ID, "port-token-b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, "team-b"); err != nil {
		t.Fatalf("DeleteAccount with a port token and an ended operation: %v", err)
	}
	_, err = s.PortToken(ctx, a.ID)
	wantErr(t, "the port token after the delete", err, metadata.ErrNotFound)
	_, err = s.JournalEntry(ctx, "op-b1")
	wantErr(t, "the ended entry after the delete", err, metadata.ErrNotFound)

	// The same name again is another account: new id, nothing of the old.
	clock.Advance(time.Minute)
	again, err := s.CreateAccount(ctx, "team-b", 7<<30)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == a.ID {
		t.Errorf("the account made again has the deleted one's id %d", a.ID)
	}
	if !again.CreatedAt.Equal(stored(clock.Now())) || again.DiskLimit != 7<<30 {
		t.Errorf("the account made again = %+v", again)
	}
	if toks, err := s.Tokens(ctx, again.ID); err != nil || toks == nil || len(toks) != 0 {
		t.Errorf("Tokens of the new account = %v, %v; want empty, not nil", toks, err)
	}
}

// Names and limits the store refuses, and the fields of accounts made
// otherwise.
func testAccountInvalidInput(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	for _, name := range []string{"", "-web", "Web", "a_b", "a.b", "a b", "é", strings.Repeat("a", metadata.MaxAccountName+1)} {
		_, err := s.CreateAccount(ctx, name, 0)
		wantPlain(t, "CreateAccount("+name+")", err)
		if name != "" {
			_, err = s.AccountByName(ctx, name)
			wantErr(t, "AccountByName("+name+") after a refused create", err, metadata.ErrNotFound)
		}
	}
	_, err := s.CreateAccount(ctx, "neg", -1)
	wantPlain(t, "CreateAccount with a negative limit", err)

	long := "0" + strings.Repeat("a-", (metadata.MaxAccountName-1)/2)
	if len(long) != metadata.MaxAccountName {
		t.Fatalf("test name is %d long", len(long))
	}
	a, err := s.CreateAccount(ctx, long, 0)
	if err != nil {
		t.Fatalf("CreateAccount of a %d-character name: %v", len(long), err)
	}
	checkUTC(t, "CreateAccount", a.CreatedAt)
	if a.Name != long || a.DiskLimit != 0 || !a.CreatedAt.Equal(stored(clock.Now())) {
		t.Errorf("CreateAccount = %+v", a)
	}
	_, err = s.SetAccountDiskLimit(ctx, long, -1)
	wantPlain(t, "SetAccountDiskLimit(-1)", err)
	if got, err := s.SetAccountDiskLimit(ctx, long, 0); err != nil || got != a {
		t.Errorf("SetAccountDiskLimit(0) = %+v, %v; want %+v", got, err, a)
	}

	// EnsureAccount's accounts have the host's default, and a name
	// CreateAccount would refuse is taken all the same.
	e := ensureAccount(t, s, "Legacy_Name")
	if e.DiskLimit != 0 {
		t.Errorf("EnsureAccount's DiskLimit = %d", e.DiskLimit)
	}
	_, err = s.CreateAccount(ctx, metadata.DefaultAccount, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ensureAccount(t, s, metadata.DefaultAccount); got.Name != metadata.DefaultAccount {
		t.Errorf("EnsureAccount of an account made by CreateAccount = %+v", got)
	}
	_, err = s.CreateAccount(ctx, metadata.DefaultAccount, 0)
	wantErr(t, "CreateAccount(default) again", err, metadata.ErrConflict)
}

// Every field of a token round-trips; zero times of revoke and use are
// the clock's; ties in CreatedAt are ordered by id, whatever the order
// of making; malformed hashes are refused.
func testTokenFields(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a, b := ensureAccount(t, s, "alice"), ensureAccount(t, s, "bob")
	zone := time.FixedZone("UTC-3", -3*60*60)
	created := time.Date(2031, 1, 2, 3, 4, 5, 678901234, zone)
	full := metadata.Token{
		ID: "mmmmmmmmmmmm", AccountID: a.ID, Name: "deploy", Role: metadata.TokenMember,
		SecretHash: strings.Repeat("0123456789abcdef", 4),
		CreatedAt:  created, ExpiresAt: created.Add(48 * time.Hour),
		RevokedAt: created.Add(time.Hour), LastUsedAt: created.Add(time.Minute),
	}
	want := full
	want.Account = "alice"
	want.CreatedAt, want.ExpiresAt = stored(full.CreatedAt), stored(full.ExpiresAt)
	want.RevokedAt, want.LastUsedAt = stored(full.RevokedAt), stored(full.LastUsedAt)
	got, err := s.CreateToken(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	checkUTC(t, "CreateToken", got.CreatedAt, got.ExpiresAt, got.RevokedAt, got.LastUsedAt)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CreateToken:\n got %+v\nwant %+v", got, want)
	}
	if got, err := s.Token(ctx, full.ID); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Token:\n got %+v, %v\nwant %+v", got, err, want)
	}

	// Zero times: the clock's.
	clock.Advance(time.Hour)
	plain, err := s.CreateToken(ctx, newToken("pppppppppppp", b, "plain", metadata.TokenRead))
	if err != nil {
		t.Fatal(err)
	}
	if !plain.CreatedAt.Equal(stored(clock.Now())) || !plain.ExpiresAt.IsZero() || !plain.RevokedAt.IsZero() || !plain.LastUsedAt.IsZero() {
		t.Errorf("a token made with zero times = %+v", plain)
	}
	clock.Advance(time.Minute)
	if err := s.TokenUsed(ctx, plain.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	r, err := s.RevokeToken(ctx, plain.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.RevokedAt.Equal(stored(clock.Now())) || !r.LastUsedAt.Equal(stored(clock.Now().Add(-time.Minute))) || r.Account != "bob" {
		t.Errorf("after a use and a revoke at the clock's times: %+v", r)
	}
	// A use after the revoke is recorded too: whether a revoked token
	// is refused is the caller's to say, not the store's.
	if err := s.TokenUsed(ctx, plain.ID, clock.Now().Add(time.Second)); err != nil {
		t.Errorf("TokenUsed of a revoked token: %v", err)
	}

	// Ties: the same CreatedAt, made in reverse id order.
	tie := clock.Now()
	for _, id := range []string{"zzzzzzzzzzz2", "aaaaaaaaaaa2"} {
		tk := newToken(id, a, "tie-"+id, metadata.TokenRead)
		tk.CreatedAt = tie
		if _, err := s.CreateToken(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{}
	all, err := s.Tokens(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range all {
		ids = append(ids, tk.ID)
	}
	if got, want := strings.Join(ids, ","), "mmmmmmmmmmmm,pppppppppppp,aaaaaaaaaaa2,zzzzzzzzzzz2"; got != want {
		t.Errorf("Tokens(0) = %s, want %s", got, want)
	}
	if none, err := s.Tokens(ctx, b.ID+1000); err != nil || none == nil || len(none) != 0 {
		t.Errorf("Tokens of no account = %v, %v; want empty, not nil", none, err)
	}

	for what, hash := range map[string]string{
		"upper case": strings.Repeat("AB", 32), "short": strings.Repeat("ab", 31), "not hex": strings.Repeat("gh", 32), "empty": "",
	} {
		tk := newToken("hhhhhhhhhhhh", a, "h", metadata.TokenRead)
		tk.SecretHash = hash
		_, err := s.CreateToken(ctx, tk)
		wantPlain(t, "CreateToken with a hash "+what, err)
	}
	_, err = s.CreateToken(ctx, newToken("hhhhhhhhhhhh", metadata.Account{}, "h", metadata.TokenRead))
	wantPlain(t, "CreateToken without an account", err)
	_, err = s.Token(ctx, "hhhhhhhhhhhh")
	wantErr(t, "Token after refused creates", err, metadata.ErrNotFound)
}

// Entries are ordered by At, then by id, whatever the order of appending;
// every field round-trips; the target filter is no pattern; filters
// combine; prune keeps an entry at its bound.
func testAuditOrderAndFilters(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a, b := ensureAccount(t, s, "alice"), ensureAccount(t, s, "bob")
	if got, err := s.Audit(ctx, metadata.AuditFilter{}); err != nil || got == nil || len(got) != 0 {
		t.Errorf("Audit of an empty log = %v, %v; want empty, not nil", got, err)
	}
	base := stored(clock.Now())
	add := func(e metadata.AuditEntry) metadata.AuditEntry {
		t.Helper()
		if e.Outcome == "" {
			e.Outcome = "ok"
		}
		if e.Action == "" {
			e.Action = "sandbox.exec"
		}
		got, err := s.AppendAudit(ctx, e)
		if err != nil {
			t.Fatalf("AppendAudit(%+v): %v", e, err)
		}
		checkUTC(t, "AppendAudit", got.At)
		return got
	}

	full := metadata.AuditEntry{
		At: base.Add(2 * time.Hour).In(time.FixedZone("UTC+5", 5*60*60)), AccountID: a.ID,
		TokenID: "tttttttttttt", TokenName: "ci", Remote: "[2001:db8::1]:4431",
		Action: "checkpoint.delete", Target: "a_b/v1", Outcome: "C04", Detail: "in use by a fork",
	}
	e1 := add(full) // newest by At, appended first
	want := full
	want.ID, want.Account, want.At = e1.ID, "alice", stored(full.At)
	if !reflect.DeepEqual(e1, want) {
		t.Errorf("AppendAudit:\n got %+v\nwant %+v", e1, want)
	}
	e2 := add(metadata.AuditEntry{At: base, AccountID: b.ID, Remote: "unix", Target: "axb/v1"})
	e3 := add(metadata.AuditEntry{At: base, AccountID: a.ID, Remote: "unix", Target: "a%b"})
	e4 := add(metadata.AuditEntry{At: base.Add(time.Hour), Action: "image.delete", Target: "é"})
	e5 := add(metadata.AuditEntry{At: base.Add(time.Hour), AccountID: a.ID, Target: "é/v2"})
	e6 := add(metadata.AuditEntry{AccountID: b.ID, Target: "a_b"}) // the clock's time: base
	if !(e1.ID < e2.ID && e2.ID < e3.ID && e3.ID < e4.ID && e4.ID < e5.ID && e5.ID < e6.ID) {
		t.Errorf("ids not increasing: %d %d %d %d %d %d", e1.ID, e2.ID, e3.ID, e4.ID, e5.ID, e6.ID)
	}
	if !e6.At.Equal(base) || e4.Account != "" || e4.AccountID != 0 {
		t.Errorf("entries = %+v, %+v", e4, e6)
	}

	ids := func(f metadata.AuditFilter) []int64 {
		t.Helper()
		es, err := s.Audit(ctx, f)
		if err != nil {
			t.Fatalf("Audit(%+v): %v", f, err)
		}
		out := []int64{}
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	for _, tc := range []struct {
		what string
		f    metadata.AuditFilter
		want []metadata.AuditEntry
	}{
		{"all", metadata.AuditFilter{}, []metadata.AuditEntry{e2, e3, e6, e4, e5, e1}},
		{"target with _", metadata.AuditFilter{Target: "a_b"}, []metadata.AuditEntry{e6, e1}},
		{"target with %", metadata.AuditFilter{Target: "a%b"}, []metadata.AuditEntry{e3}},
		{"target é", metadata.AuditFilter{Target: "é"}, []metadata.AuditEntry{e4, e5}},
		{"target a", metadata.AuditFilter{Target: "a"}, nil},
		{"since", metadata.AuditFilter{Since: base.Add(time.Hour)}, []metadata.AuditEntry{e4, e5, e1}},
		{"account and since", metadata.AuditFilter{AccountID: a.ID, Since: base.Add(time.Hour)}, []metadata.AuditEntry{e5, e1}},
		{"account and limit", metadata.AuditFilter{AccountID: b.ID, Limit: 1}, []metadata.AuditEntry{e6}},
		{"limit in a tie", metadata.AuditFilter{Limit: 5}, []metadata.AuditEntry{e3, e6, e4, e5, e1}},
		{"limit past the count", metadata.AuditFilter{AccountID: a.ID, Limit: 10}, []metadata.AuditEntry{e3, e5, e1}},
		{"everything", metadata.AuditFilter{AccountID: a.ID, Since: base, Target: "a_b", Limit: 1}, []metadata.AuditEntry{e1}},
		{"no account of that id", metadata.AuditFilter{AccountID: b.ID + 1000}, nil},
	} {
		want := []int64{}
		for _, e := range tc.want {
			want = append(want, e.ID)
		}
		if got := ids(tc.f); !reflect.DeepEqual(got, want) {
			t.Errorf("Audit(%s) = %v, want %v", tc.what, got, want)
		}
	}
	if got, err := s.Audit(ctx, metadata.AuditFilter{Target: "é/v2"}); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], e5) {
		t.Errorf("Audit(é/v2) = %+v, %v; want %+v", got, err, e5)
	}

	_, err := s.AppendAudit(ctx, metadata.AuditEntry{Action: "x"})
	wantPlain(t, "AppendAudit without an outcome", err)
	_, err = s.AppendAudit(ctx, metadata.AuditEntry{AccountID: -1, Action: "x", Outcome: "ok"})
	wantPlain(t, "AppendAudit of a negative account", err)

	// Prune: before the bound goes, at it stays.
	if n, err := s.PruneAudit(ctx, base); err != nil || n != 0 {
		t.Errorf("PruneAudit(the oldest's time) = %d, %v; want 0", n, err)
	}
	if n, err := s.PruneAudit(ctx, base.Add(time.Hour)); err != nil || n != 3 {
		t.Errorf("PruneAudit(+1h) = %d, %v; want 3", n, err)
	}
	if got, want := ids(metadata.AuditFilter{}), []int64{e4.ID, e5.ID, e1.ID}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the prune = %v, want %v", got, want)
	}
	// Ids are not given again after a prune.
	if e := add(metadata.AuditEntry{}); e.ID <= e6.ID {
		t.Errorf("an entry after the prune has id %d, not past %d", e.ID, e6.ID)
	}
}

// Accounts with their limits, tokens with every time, and the audit log
// survive a reopen.
func testAccessPersistence(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a, err := s.CreateAccount(ctx, "team-p", 3<<30)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := s.CreateToken(ctx, newToken("kkkkkkkkkkkk", a, "ci", metadata.TokenAdmin))
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := s.TokenUsed(ctx, tk.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if tk, err = s.RevokeToken(ctx, tk.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	e, err := s.AppendAudit(ctx, metadata.AuditEntry{AccountID: a.ID, TokenID: tk.ID, TokenName: tk.Name, Remote: "unix",
		Action: "token.revoke", Target: tk.ID, Outcome: "ok", Detail: "by hand"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, clock.Now)
	defer s.Close()
	if got, err := s.AccountByName(ctx, "team-p"); err != nil || got != a {
		t.Errorf("account after reopen = %+v, %v; want %+v", got, err, a)
	}
	if got, err := s.Token(ctx, tk.ID); err != nil || !reflect.DeepEqual(got, tk) {
		t.Errorf("token after reopen = %+v, %v; want %+v", got, err, tk)
	}
	if got, err := s.Audit(ctx, metadata.AuditFilter{}); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], e) {
		t.Errorf("audit log after reopen = %+v, %v; want [%+v]", got, err, e)
	}
}
