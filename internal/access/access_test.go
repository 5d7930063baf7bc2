package access

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
)

func newService(t *testing.T) (*Service, *time.Time) {
	t.Helper()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "cairn.db"), clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.EnsureAccount(context.Background(), metadata.DefaultAccount); err != nil {
		t.Fatal(err)
	}
	return New(Config{Store: store, Now: clock}), &now
}

// A token works until it expires or is revoked, and from then on is
// refused at once, as a malformed or unknown one is, with one message.
func TestTokenLifetime(t *testing.T) {
	ctx := context.Background()
	s, now := newService(t)
	if _, err := s.CreateAccount(ctx, "team", 0); err != nil {
		t.Fatal(err)
	}
	tok, err := s.CreateToken(ctx, "team", "ci", auth.RoleMember, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Authenticate(ctx, tok.Token, "10.0.0.1:5")
	if err != nil || c.Account != "team" || c.Role != auth.RoleMember || c.TokenName != "ci" || c.Remote != "10.0.0.1:5" {
		t.Fatalf("Authenticate = %+v, %v", c, err)
	}
	list, _ := s.Tokens(ctx, "team")
	if len(list) != 1 || list[0].LastUsedAt == nil || list[0].State != "active" || strings.Contains(list[0].ID, "_") {
		t.Fatalf("Tokens = %+v", list)
	}

	refused := func(what, token string) {
		t.Helper()
		_, err := s.Authenticate(ctx, token, "x")
		if errdefs.CodeOf(err) != api.CodeUnauthenticated || err.Error() != badToken().Error() {
			t.Errorf("%s: %v, want A01 with the one message", what, err)
		}
	}
	refused("malformed", "cairn_nope")
	refused("another secret", tok.Token[:len(tok.Token)-3]+"AAA")
	other, _, _, _ := auth.NewToken()
	refused("unknown", other)

	*now = now.Add(time.Hour)
	refused("expired", tok.Token)
	if list, _ := s.Tokens(ctx, "team"); list[0].State != "expired" {
		t.Errorf("state after expiry: %s", list[0].State)
	}

	forever, _ := s.CreateToken(ctx, "team", "forever", auth.RoleRead, 0)
	if _, err := s.Authenticate(ctx, forever.Token, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeToken(ctx, forever.Info.ID); err != nil {
		t.Fatal(err)
	}
	refused("revoked", forever.Token)
	if _, err := s.RevokeToken(ctx, "nosuchtokenx"); errdefs.CodeOf(err) != api.CodeNoToken {
		t.Errorf("revoke of none: %v", err)
	}
}

// Bad input gets its code; an account with a token and nothing else is
// deleted with it.
func TestAccountsAndTokenErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	for _, tc := range []struct {
		err  error
		code string
	}{
		{second(s.CreateAccount(ctx, "Bad Name", 0)), api.CodeInvalidName},
		{second(s.CreateAccount(ctx, "ok", -1)), api.CodeInvalidArgument},
		{second(s.CreateToken(ctx, "nobody", "ci", auth.RoleRead, 0)), api.CodeNoAccount},
		{second(s.CreateToken(ctx, metadata.DefaultAccount, "ci", "root", 0)), api.CodeInvalidArgument},
		{s.DeleteAccount(ctx, metadata.DefaultAccount), api.CodeInvalidArgument},
		{s.DeleteAccount(ctx, "nobody"), api.CodeNoAccount},
		{second(s.SetDiskLimit(ctx, "nobody", 1)), api.CodeNoAccount},
	} {
		if got := errdefs.CodeOf(tc.err); got != tc.code {
			t.Errorf("%v: code %q, want %s", tc.err, got, tc.code)
		}
	}
	s.CreateAccount(ctx, "team", 0)
	if _, err := s.CreateAccount(ctx, "team", 0); errdefs.CodeOf(err) != api.CodeAccountExists {
		t.Errorf("a taken account name: %v", err)
	}
	tok, _ := s.CreateToken(ctx, "team", "ci", auth.RoleRead, 0)
	if _, err := s.CreateToken(ctx, "team", "ci", auth.RoleRead, 0); errdefs.CodeOf(err) != api.CodeTokenNameTaken {
		t.Errorf("a taken token name: %v", err)
	}
	if err := s.DeleteAccount(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, tok.Token, "x"); errdefs.CodeOf(err) != api.CodeUnauthenticated {
		t.Errorf("a deleted account's token: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }
