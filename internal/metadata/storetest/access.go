package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

func newToken(id string, account metadata.Account, name, role string) metadata.Token {
	return metadata.Token{ID: id, AccountID: account.ID, Name: name, Role: role, SecretHash: strings.Repeat("ab", 32)}
}

// Accounts made with a disk limit, changed, listed with it; a taken name
// is ErrConflict; an account holding a sandbox, or only a deleted
// sandbox's checkpoint, is not deleted; an empty one is, with its tokens
// and not its audit entries.
func testAccountLifecycle(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := open2(t, open)
	a, err := s.CreateAccount(ctx, "team-a", 1<<30)
	if err != nil || a.DiskLimit != 1<<30 || a.ID == 0 {
		t.Fatalf("CreateAccount = %+v, %v", a, err)
	}
	if _, err := s.CreateAccount(ctx, "team-a", 0); !errors.Is(err, metadata.ErrConflict) {
		t.Errorf("CreateAccount of a taken name: %v, want ErrConflict", err)
	}
	if got, err := s.SetAccountDiskLimit(ctx, "team-a", 5<<30); err != nil || got.DiskLimit != 5<<30 {
		t.Errorf("SetAccountDiskLimit = %+v, %v", got, err)
	}
	if _, err := s.SetAccountDiskLimit(ctx, "nobody", 1); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("SetAccountDiskLimit of no account: %v", err)
	}
	if got, err := s.AccountByName(ctx, "team-a"); err != nil || got.DiskLimit != 5<<30 {
		t.Errorf("AccountByName after the change = %+v, %v", got, err)
	}
	list, _ := s.ListAccounts(ctx)
	if len(list) != 2 || list[1].Name != "team-a" || list[1].DiskLimit != 5<<30 || list[0].DiskLimit != 0 {
		t.Errorf("ListAccounts = %+v", list)
	}

	// Holding a sandbox: refused.
	sb := newSandbox("00000000000000a1", a.ID, "web")
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, "team-a"); !errors.Is(err, metadata.ErrConflict) {
		t.Errorf("DeleteAccount holding a sandbox: %v, want ErrConflict", err)
	}
	// Holding only a deleted sandbox's checkpoint: refused too.
	createCk(t, s, newCheckpoint("ck-1", sb))
	if err := s.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, "team-a"); !errors.Is(err, metadata.ErrConflict) {
		t.Errorf("DeleteAccount holding a checkpoint: %v, want ErrConflict", err)
	}
	if err := s.DeleteCheckpoint(ctx, "ck-1"); err != nil {
		t.Fatal(err)
	}

	if _, err := s.CreateToken(ctx, newToken("aaaaaaaaaaaa", a, "ci", metadata.TokenMember)); err != nil {
		t.Fatal(err)
	}
	e, err := s.AppendAudit(ctx, metadata.AuditEntry{AccountID: a.ID, Action: "sandbox.create", Target: "web", Outcome: "ok"})
	if err != nil || e.Account != "team-a" {
		t.Fatalf("AppendAudit = %+v, %v", e, err)
	}
	if err := s.DeleteAccount(ctx, "team-a"); err != nil {
		t.Fatalf("DeleteAccount of an empty account: %v", err)
	}
	if _, err := s.AccountByName(ctx, "team-a"); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("the account after its delete: %v", err)
	}
	if _, err := s.Token(ctx, "aaaaaaaaaaaa"); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("its token after the account's delete: %v", err)
	}
	log, err := s.Audit(ctx, metadata.AuditFilter{})
	if err != nil || len(log) != 1 || log[0].AccountID != 0 || log[0].Account != "" || log[0].Action != "sandbox.create" {
		t.Errorf("the audit log after the account's delete: %+v, %v", log, err)
	}
	if err := s.DeleteAccount(ctx, "team-a"); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("DeleteAccount again: %v", err)
	}
	if err := s.DeleteAccount(ctx, metadata.DefaultAccount); err == nil || errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("DeleteAccount of the default account: %v", err)
	}
}

// Tokens: made, read with their account's name, listed by account in
// order of making; an id or a name in the account taken is ErrConflict
// (the name of a revoked one too), another account may reuse the name;
// revoke keeps its first time; a use only moves forward.
func testTokens(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := open2(t, open)
	a, b := ensureAccount(t, s, "alice"), ensureAccount(t, s, "bob")
	t1, err := s.CreateToken(ctx, newToken("aaaaaaaaaaaa", a, "laptop", metadata.TokenAdmin))
	if err != nil || t1.Account != "alice" || t1.CreatedAt.IsZero() {
		t.Fatalf("CreateToken = %+v, %v", t1, err)
	}
	clock.Advance(time.Minute)
	exp := clock.Now().Add(24 * time.Hour)
	t2 := newToken("bbbbbbbbbbbb", a, "ci", metadata.TokenRead)
	t2.ExpiresAt = exp
	if _, err := s.CreateToken(ctx, t2); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if _, err := s.CreateToken(ctx, newToken("cccccccccccc", b, "laptop", metadata.TokenMember)); err != nil {
		t.Errorf("the same name in another account: %v", err)
	}
	for _, bad := range []metadata.Token{newToken("aaaaaaaaaaaa", b, "other", metadata.TokenRead), newToken("dddddddddddd", a, "ci", metadata.TokenRead)} {
		if _, err := s.CreateToken(ctx, bad); !errors.Is(err, metadata.ErrConflict) {
			t.Errorf("CreateToken(%s %s): %v, want ErrConflict", bad.ID, bad.Name, err)
		}
	}
	for _, bad := range []metadata.Token{newToken("short", a, "x", metadata.TokenRead), newToken("eeeeeeeeeeee", a, "x", "root"),
		newToken("eeeeeeeeeeee", a, "", metadata.TokenRead)} {
		if _, err := s.CreateToken(ctx, bad); err == nil || errors.Is(err, metadata.ErrConflict) || errors.Is(err, metadata.ErrNotFound) {
			t.Errorf("CreateToken(%+v): %v, want a plain error", bad, err)
		}
	}
	if _, err := s.CreateToken(ctx, newToken("ffffffffffff", metadata.Account{ID: a.ID + 1000}, "x", metadata.TokenRead)); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("CreateToken of no account: %v", err)
	}
	got, err := s.Token(ctx, "bbbbbbbbbbbb")
	if err != nil || got.Account != "alice" || got.Role != metadata.TokenRead || !got.ExpiresAt.Equal(normUTC(exp)) || !got.RevokedAt.IsZero() {
		t.Fatalf("Token = %+v, %v", got, err)
	}
	if _, err := s.Token(ctx, "zzzzzzzzzzzz"); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("Token of none: %v", err)
	}
	ids := func(ts []metadata.Token) (out []string) {
		for _, x := range ts {
			out = append(out, x.ID)
		}
		return out
	}
	if all, _ := s.Tokens(ctx, 0); strings.Join(ids(all), ",") != "aaaaaaaaaaaa,bbbbbbbbbbbb,cccccccccccc" {
		t.Errorf("Tokens(all) = %v", ids(all))
	}
	if mine, _ := s.Tokens(ctx, a.ID); strings.Join(ids(mine), ",") != "aaaaaaaaaaaa,bbbbbbbbbbbb" {
		t.Errorf("Tokens(alice) = %v", ids(mine))
	}

	at := clock.Now()
	r, err := s.RevokeToken(ctx, "aaaaaaaaaaaa", at)
	if err != nil || !r.RevokedAt.Equal(normUTC(at)) {
		t.Fatalf("RevokeToken = %+v, %v", r, err)
	}
	if r, err := s.RevokeToken(ctx, "aaaaaaaaaaaa", at.Add(time.Hour)); err != nil || !r.RevokedAt.Equal(normUTC(at)) {
		t.Errorf("RevokeToken again = %+v, %v; want the first time kept", r, err)
	}
	if _, err := s.RevokeToken(ctx, "zzzzzzzzzzzz", at); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("RevokeToken of none: %v", err)
	}
	if _, err := s.CreateToken(ctx, newToken("gggggggggggg", a, "laptop", metadata.TokenRead)); !errors.Is(err, metadata.ErrConflict) {
		t.Errorf("a revoked token's name again: %v, want ErrConflict", err)
	}

	used := clock.Now().Add(time.Minute)
	if err := s.TokenUsed(ctx, "bbbbbbbbbbbb", used); err != nil {
		t.Fatal(err)
	}
	if err := s.TokenUsed(ctx, "bbbbbbbbbbbb", used.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Token(ctx, "bbbbbbbbbbbb"); !got.LastUsedAt.Equal(normUTC(used)) {
		t.Errorf("LastUsedAt = %v, want %v (only forward)", got.LastUsedAt, used)
	}
	if err := s.TokenUsed(ctx, "zzzzzzzzzzzz", used); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("TokenUsed of none: %v", err)
	}
}

// The audit log: entries in order, filtered by account, time and target
// (a sandbox's own and its checkpoints', not another name's with that
// prefix), the newest N returned oldest first, pruned by age; an entry of
// no account is the host's.
func testAudit(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := open2(t, open)
	a, b := ensureAccount(t, s, "alice"), ensureAccount(t, s, "bob")
	add := func(acct int64, action, target, outcome string) metadata.AuditEntry {
		t.Helper()
		e, err := s.AppendAudit(ctx, metadata.AuditEntry{AccountID: acct, TokenID: "aaaaaaaaaaaa", TokenName: "ci", Remote: "127.0.0.1:5",
			Action: action, Target: target, Outcome: outcome})
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		return e
	}
	first := add(a.ID, "sandbox.create", "web", "accepted")
	add(a.ID, "checkpoint.create", "web/v1", "ok")
	mid := clock.Now()
	add(a.ID, "sandbox.create", "webapp", "S02")
	add(b.ID, "sandbox.delete", "web", "S01")
	add(0, "account.create", "", "ok")
	if first.ID == 0 || first.Account != "alice" || !first.At.Equal(normUTC(start)) {
		t.Errorf("AppendAudit = %+v", first)
	}
	targets := func(es []metadata.AuditEntry) (out []string) {
		for _, e := range es {
			out = append(out, e.Action+":"+e.Target)
		}
		return out
	}
	for _, tc := range []struct {
		f    metadata.AuditFilter
		want string
	}{
		{metadata.AuditFilter{}, "sandbox.create:web,checkpoint.create:web/v1,sandbox.create:webapp,sandbox.delete:web,account.create:"},
		{metadata.AuditFilter{AccountID: a.ID}, "sandbox.create:web,checkpoint.create:web/v1,sandbox.create:webapp"},
		{metadata.AuditFilter{AccountID: a.ID, Target: "web"}, "sandbox.create:web,checkpoint.create:web/v1"},
		{metadata.AuditFilter{Since: mid}, "sandbox.create:webapp,sandbox.delete:web,account.create:"},
		{metadata.AuditFilter{Limit: 2}, "sandbox.delete:web,account.create:"},
	} {
		got, err := s.Audit(ctx, tc.f)
		if err != nil || strings.Join(targets(got), ",") != tc.want {
			t.Errorf("Audit(%+v) = %v, %v; want %s", tc.f, targets(got), err, tc.want)
		}
	}
	if _, err := s.AppendAudit(ctx, metadata.AuditEntry{AccountID: b.ID + 1000, Action: "x", Outcome: "ok"}); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("AppendAudit of no account: %v", err)
	}
	if _, err := s.AppendAudit(ctx, metadata.AuditEntry{Action: "", Outcome: "ok"}); err == nil {
		t.Error("AppendAudit without an action")
	}
	if _, err := s.Audit(ctx, metadata.AuditFilter{Limit: -1}); err == nil {
		t.Error("Audit with a negative limit")
	}
	n, err := s.PruneAudit(ctx, mid)
	if err != nil || n != 2 {
		t.Errorf("PruneAudit = %d, %v; want 2", n, err)
	}
	if got, _ := s.Audit(ctx, metadata.AuditFilter{}); len(got) != 3 {
		t.Errorf("after the prune: %v", targets(got))
	}
}

// open2 opens a store whose default account exists, as cairnd's does.
func open2(t *testing.T, open OpenFunc) (metadata.Store, *Clock) {
	s, c := openStore(t, open)
	ensureAccount(t, s, metadata.DefaultAccount)
	return s, c
}

func normUTC(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
