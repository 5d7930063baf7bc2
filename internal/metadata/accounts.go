package metadata

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Accounts and their API tokens (schema version 17).

// MaxAccountName is the longest account name CreateAccount takes.
const MaxAccountName = 63

// ValidateAccountName checks the name of an account CreateAccount makes:
// 1 to MaxAccountName characters, lower-case letters, digits and '-', not
// starting with '-'. (EnsureAccount does not judge names: it makes
// DefaultAccount and the accounts of older cairnds.)
func ValidateAccountName(name string) error {
	switch {
	case name == "":
		return errors.New("empty account name")
	case len(name) > MaxAccountName:
		return fmt.Errorf("account name %q is longer than %d characters", name, MaxAccountName)
	case name[0] == '-':
		return fmt.Errorf("account name %q starts with '-'", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("account name %q has %q: only a-z, 0-9 and '-' are allowed", name, c)
		}
	}
	return nil
}

// AccountStore is the part of the Store that keeps accounts, under the
// Store's guarantees (atomic, durable, sentinel errors). Every account
// read back has all its fields, DiskLimit included.
type AccountStore interface {
	// EnsureAccount returns the account called name, creating it if it
	// does not exist (with DiskLimit 0). It is idempotent: calling it
	// again, concurrently or not, returns the same account. An empty
	// name is a plain error; other names are not judged.
	EnsureAccount(ctx context.Context, name string) (Account, error)
	// AccountByName returns the account called name, or ErrNotFound.
	AccountByName(ctx context.Context, name string) (Account, error)
	// ListAccounts returns every account, ordered by id.
	ListAccounts(ctx context.Context) ([]Account, error)
	// CreateAccount makes the account called name with that disk limit
	// (bytes; 0: the host's default) and CreatedAt now, and returns it.
	// ErrConflict if an account has that name; a name that fails
	// ValidateAccountName or a negative limit is a plain error.
	CreateAccount(ctx context.Context, name string, diskLimit int64) (Account, error)
	// SetAccountDiskLimit records bytes as the account's disk limit (0:
	// the host's default) and returns the account as it is now.
	// ErrNotFound if there is no account called name; a negative limit
	// is a plain error.
	SetAccountDiskLimit(ctx context.Context, name string, bytes int64) (Account, error)
	// DeleteAccount deletes the account called name, which must hold
	// nothing: an error wrapping ErrConflict, saying what it still holds,
	// if it has sandboxes, checkpoints (those of deleted sandboxes too),
	// manifests still to delete from its off-site repository
	// (OffsiteDeletes) or journal entries still running. In the same
	// transaction its API tokens, its port token and its ended journal
	// entries are deleted; its audit entries stay, with AccountID 0 and
	// Account "". Images are the host's: they do not keep an account.
	// ErrNotFound if there is no account called name; DefaultAccount is
	// never deleted (a plain error). Account ids are not reused: an
	// account made later with the same name has another id.
	DeleteAccount(ctx context.Context, name string) error
}

// Holdings says what an account that DeleteAccount is asked to delete
// still holds, for its error ("2 sandboxes, 1 checkpoint"); "" when it
// holds nothing. Stores count; this words it, the same in each.
func Holdings(sandboxes, checkpoints, offsiteDeletes, running int) string {
	var parts []string
	for _, h := range []struct {
		n         int
		one, many string
	}{
		{sandboxes, "sandbox", "sandboxes"},
		{checkpoints, "checkpoint", "checkpoints"},
		{offsiteDeletes, "off-site manifest to delete", "off-site manifests to delete"},
		{running, "operation running", "operations running"},
	} {
		switch {
		case h.n == 1:
			parts = append(parts, "1 "+h.one)
		case h.n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", h.n, h.many))
		}
	}
	return strings.Join(parts, ", ")
}

// Token roles as stored (package auth gives their meaning).
const (
	TokenRead   = "read"
	TokenMember = "member"
	TokenAdmin  = "admin"
)

// TokenIDLen is the length of a token's id.
const TokenIDLen = 12

// Token is an API token's record: everything but its secret.
type Token struct {
	ID         string // TokenIDLen base32 characters, chosen by the caller (package auth)
	AccountID  int64
	Account    string // the account's name, filled in by reads
	Name       string // unique in the account
	Role       string // TokenRead, TokenMember or TokenAdmin
	SecretHash string // hex SHA-256 of the secret, 64 lower-case characters
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	RevokedAt  time.Time // zero: not revoked
	LastUsedAt time.Time // zero: never used
}

// Validate checks a token given to CreateToken for what the store relies
// on: an id of TokenIDLen characters, an account, a name, a known role
// and a hash of 64 lower-case hex digits. It does not judge the id's
// alphabet nor the name's syntax: package auth and the API do.
func (t Token) Validate() error {
	switch {
	case len(t.ID) != TokenIDLen:
		return fmt.Errorf("invalid token %q: id is not %d characters", t.ID, TokenIDLen)
	case t.AccountID == 0:
		return fmt.Errorf("invalid token %s: no account", t.ID)
	case t.Name == "":
		return fmt.Errorf("invalid token %s: empty name", t.ID)
	case t.Role != TokenRead && t.Role != TokenMember && t.Role != TokenAdmin:
		return fmt.Errorf("invalid token %s: unknown role %q", t.ID, t.Role)
	case !isHexSHA256(t.SecretHash):
		return fmt.Errorf("invalid token %s: secret hash is not 64 lower-case hex digits", t.ID)
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// TokenStore is the part of the Store that keeps API tokens, under the
// Store's guarantees (atomic, durable, sentinel errors). A token is never
// changed but for RevokedAt and LastUsedAt, and never deleted but with
// its account: a revoked one stays, so that the audit log keeps naming it
// and its name stays taken.
type TokenStore interface {
	// CreateToken stores a new token and returns it as stored, with
	// Account filled in. t must pass t.Validate (else a plain error); a
	// zero CreatedAt is set to now; ExpiresAt, RevokedAt and LastUsedAt
	// are stored as given. ErrConflict if a token (of any account) has
	// t.ID, or one of the account (revoked or not) is called t.Name;
	// ErrNotFound if t.AccountID is no account.
	CreateToken(ctx context.Context, t Token) (Token, error)
	// Token returns the token with that id, or ErrNotFound.
	Token(ctx context.Context, id string) (Token, error)
	// Tokens returns the tokens of the account, or of every account when
	// accountID is 0, revoked ones included, ordered by CreatedAt and
	// then ID (byte-wise).
	Tokens(ctx context.Context, accountID int64) ([]Token, error)
	// RevokeToken sets the token's RevokedAt to at (zero: now) unless it
	// is revoked already, when it keeps its first RevokedAt (no error),
	// and returns the token as it is now. ErrNotFound if no token has
	// that id.
	RevokeToken(ctx context.Context, id string, at time.Time) (Token, error)
	// TokenUsed records that the token was used at at (zero: now): its
	// LastUsedAt becomes at unless it is later already (it only goes
	// forward). ErrNotFound if no token has that id. It is a durable
	// write like the others: callers record a use once in a while (a
	// minute after the last), not at every request.
	TokenUsed(ctx context.Context, id string, at time.Time) error
}

// AccountByID returns the account with that id from s (the stores look
// accounts up by name; there are few), or ErrNotFound.
func AccountByID(ctx context.Context, s AccountStore, id int64) (Account, error) {
	accts, err := s.ListAccounts(ctx)
	if err != nil {
		return Account{}, err
	}
	for _, a := range accts {
		if a.ID == id {
			return a, nil
		}
	}
	return Account{}, fmt.Errorf("account %d: %w", id, ErrNotFound)
}
