// Package access is cairnd's accounts and API tokens: making, listing,
// changing and deleting them, and checking the token of each request to
// the TCP listener (server.Authenticator). A token's account and role are
// the store's; the token itself is never kept, only its hash (package
// auth). A revoked or expired token is refused from its next request on:
// nothing is cached.
package access

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// Service is cairnd's accounts and tokens.
type Service struct {
	store metadata.Store
	now   func() time.Time
	purge Purge

	mu       sync.Mutex
	lastUsed map[string]time.Time     // token id -> when its use was last written
	purging  map[string]*operation.Op // account name -> its running forced delete
}

// Config is what a Service works with.
type Config struct {
	Store metadata.Store
	Now   func() time.Time
	// Purge deletes accounts that hold something (PurgeAccount); its
	// zero value: no forced deletes.
	Purge Purge
}

// New returns the service of cfg.
func New(cfg Config) *Service {
	if cfg.Purge.OffsiteWait == 0 {
		cfg.Purge.OffsiteWait = offsiteWait
	}
	return &Service{store: cfg.Store, now: cfg.Now, purge: cfg.Purge,
		lastUsed: map[string]time.Time{}, purging: map[string]*operation.Op{}}
}

// usedEvery is how often at most a token's last use is written.
const usedEvery = time.Minute

// badToken is the one answer to every token that is not good: which
// part was wrong is not said.
func badToken() error {
	return errdefs.New(api.CodeUnauthenticated, "the API token is not valid: unknown, expired or revoked")
}

// Authenticate implements server.Authenticator.
func (s *Service) Authenticate(ctx context.Context, token, remote string) (auth.Credential, error) {
	id, secret, err := auth.ParseToken(token)
	if err != nil {
		return auth.Credential{}, badToken()
	}
	t, err := s.store.Token(ctx, id)
	if errors.Is(err, metadata.ErrNotFound) {
		return auth.Credential{}, badToken()
	}
	if err != nil {
		return auth.Credential{}, err
	}
	now := s.now()
	if !auth.SecretMatches(secret, t.SecretHash) || !t.RevokedAt.IsZero() || (!t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)) {
		return auth.Credential{}, badToken()
	}
	s.noteUse(ctx, t.ID, now)
	return auth.Credential{Account: t.Account, Role: auth.Role(t.Role), TokenID: t.ID, TokenName: t.Name, Remote: remote, ExpiresAt: t.ExpiresAt}, nil
}

// noteUse writes that token id was used, at most every usedEvery.
func (s *Service) noteUse(ctx context.Context, id string, now time.Time) {
	s.mu.Lock()
	last, ok := s.lastUsed[id]
	if ok && now.Sub(last) < usedEvery {
		s.mu.Unlock()
		return
	}
	s.lastUsed[id] = now
	s.mu.Unlock()
	s.store.TokenUsed(context.WithoutCancel(ctx), id, now)
}

// namePattern is what account and token names must match.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func checkName(what, name string) error {
	if !namePattern.MatchString(name) {
		return errdefs.New(api.CodeInvalidName, "invalid %s name %q: lower-case letters, digits and dashes, at most 63, starting with a letter or digit", what, name)
	}
	return nil
}

// CreateToken makes a token for account with name and role, expiring
// after ttl (0: never), and returns it with its secret: the only time the
// secret is seen.
func (s *Service) CreateToken(ctx context.Context, account, name string, role auth.Role, ttl time.Duration) (api.NewToken, error) {
	if !role.Valid() {
		return api.NewToken{}, errdefs.New(api.CodeInvalidArgument, "unknown role %q: admin, member or read", role)
	}
	if err := checkName("token", name); err != nil {
		return api.NewToken{}, err
	}
	if ttl < 0 {
		return api.NewToken{}, errdefs.New(api.CodeInvalidArgument, "a token cannot expire before it is made")
	}
	acct, err := s.store.AccountByName(ctx, account)
	if errors.Is(err, metadata.ErrNotFound) {
		return api.NewToken{}, errdefs.New(api.CodeNoAccount, "no account named %q", account)
	} else if err != nil {
		return api.NewToken{}, err
	}
	secret, id, hash, err := auth.NewToken()
	if err != nil {
		return api.NewToken{}, err
	}
	now := s.now()
	t := metadata.Token{ID: id, AccountID: acct.ID, Name: name, Role: string(role), SecretHash: hash, CreatedAt: now}
	if ttl > 0 {
		t.ExpiresAt = now.Add(ttl)
	}
	t, err = s.store.CreateToken(ctx, t)
	if errors.Is(err, metadata.ErrConflict) {
		return api.NewToken{}, errdefs.New(api.CodeTokenNameTaken, "account %s has a token named %q already", account, name)
	} else if err != nil {
		return api.NewToken{}, err
	}
	return api.NewToken{Token: secret, Info: apiToken(t, now)}, nil
}

// Tokens lists the tokens of account ("": of every account).
func (s *Service) Tokens(ctx context.Context, account string) ([]api.Token, error) {
	var id int64
	if account != "" {
		acct, err := s.account(ctx, account)
		if err != nil {
			return nil, err
		}
		id = acct.ID
	}
	ts, err := s.store.Tokens(ctx, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]api.Token, 0, len(ts))
	for _, t := range ts {
		out = append(out, apiToken(t, now))
	}
	return out, nil
}

// RevokeToken revokes token id: refused from its next request on.
func (s *Service) RevokeToken(ctx context.Context, id string) (api.Token, error) {
	if !auth.ValidID(id) {
		return api.Token{}, errdefs.New(api.CodeNoToken, "no token with id %q", id)
	}
	t, err := s.store.RevokeToken(ctx, id, s.now())
	if errors.Is(err, metadata.ErrNotFound) {
		return api.Token{}, errdefs.New(api.CodeNoToken, "no token with id %q", id)
	} else if err != nil {
		return api.Token{}, err
	}
	return apiToken(t, s.now()), nil
}

func (s *Service) account(ctx context.Context, name string) (metadata.Account, error) {
	acct, err := s.store.AccountByName(ctx, name)
	if errors.Is(err, metadata.ErrNotFound) {
		return metadata.Account{}, errdefs.New(api.CodeNoAccount, "no account named %q", name)
	}
	return acct, err
}

// CreateAccount makes the account name with a disk limit (0: the host's
// default).
func (s *Service) CreateAccount(ctx context.Context, name string, diskLimit int64) (api.AccountRecord, error) {
	if err := checkName("account", name); err != nil {
		return api.AccountRecord{}, err
	}
	if diskLimit < 0 {
		return api.AccountRecord{}, errdefs.New(api.CodeInvalidArgument, "a disk limit cannot be negative")
	}
	acct, err := s.store.CreateAccount(ctx, name, diskLimit)
	if errors.Is(err, metadata.ErrConflict) {
		return api.AccountRecord{}, errdefs.New(api.CodeAccountExists, "an account named %q exists already", name)
	} else if err != nil {
		return api.AccountRecord{}, err
	}
	return apiAccount(acct), nil
}

// Accounts lists every account.
func (s *Service) Accounts(ctx context.Context) ([]api.AccountRecord, error) {
	accts, err := s.store.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.AccountRecord, 0, len(accts))
	for _, a := range accts {
		out = append(out, apiAccount(a))
	}
	return out, nil
}

// SetDiskLimit sets account name's disk limit.
func (s *Service) SetDiskLimit(ctx context.Context, name string, bytes int64) (api.AccountRecord, error) {
	if bytes < 0 {
		return api.AccountRecord{}, errdefs.New(api.CodeInvalidArgument, "a disk limit cannot be negative")
	}
	acct, err := s.store.SetAccountDiskLimit(ctx, name, bytes)
	if errors.Is(err, metadata.ErrNotFound) {
		return api.AccountRecord{}, errdefs.New(api.CodeNoAccount, "no account named %q", name)
	} else if err != nil {
		return api.AccountRecord{}, err
	}
	return apiAccount(acct), nil
}

// DeleteAccount deletes account name, which must hold nothing (A05), with
// its tokens.
func (s *Service) DeleteAccount(ctx context.Context, name string) error {
	if name == metadata.DefaultAccount {
		return errdefs.New(api.CodeInvalidArgument, "the default account cannot be deleted")
	}
	err := s.store.DeleteAccount(ctx, name)
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		return errdefs.New(api.CodeNoAccount, "no account named %q", name)
	case errors.Is(err, metadata.ErrConflict):
		return errdefs.Wrap(api.CodeAccountNotEmpty, err, "account %s is not empty: delete its sandboxes and checkpoints first", name)
	}
	return err
}

func apiAccount(a metadata.Account) api.AccountRecord {
	return api.AccountRecord{Name: a.Name, DiskLimit: a.DiskLimit, CreatedAt: a.CreatedAt}
}

func apiToken(t metadata.Token, now time.Time) api.Token {
	out := api.Token{ID: t.ID, Account: t.Account, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt, State: "active"}
	if !t.ExpiresAt.IsZero() {
		e := t.ExpiresAt
		out.ExpiresAt = &e
		if !now.Before(e) {
			out.State = "expired"
		}
	}
	if !t.LastUsedAt.IsZero() {
		u := t.LastUsedAt
		out.LastUsedAt = &u
	}
	if !t.RevokedAt.IsZero() {
		r := t.RevokedAt
		out.RevokedAt = &r
		out.State = "revoked"
	}
	return out
}

// String names a credential in log lines.
func String(c auth.Credential) string {
	if c.TokenID == "" {
		return fmt.Sprintf("%s (unix socket)", c.Account)
	}
	return fmt.Sprintf("%s token %s (%s)", c.Account, c.TokenName, c.TokenID)
}
