package portproxy

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Credentials decide whether a request may reach the private ports of an
// account. The proxy asks them about the credential a request carries (a
// bearer token or the cookie api.PortTokenCookie); API tokens (issue 18)
// will be another implementation.
type Credentials interface {
	// Allows reports whether credential (never "") opens the private
	// ports of account. A credential it does not accept is false with a
	// nil error; an error is a failure to decide (the store failed).
	Allows(ctx context.Context, account metadata.Account, credential string) (bool, error)
}

var _ Credentials = (*PortTokens)(nil)

// PortTokens are the accounts' port tokens, kept in the store: one secret
// per account, made on first need, replaced at once by a rotation.
type PortTokens struct{ store metadata.Store }

// NewPortTokens returns the port tokens kept in store.
func NewPortTokens(store metadata.Store) *PortTokens { return &PortTokens{store: store} }

// Allows implements Credentials: credential is the account's port token.
// The comparison takes the same time whatever the credential is.
func (t *PortTokens) Allows(ctx context.Context, account metadata.Account, credential string) (bool, error) {
	tok, err := t.store.PortToken(ctx, account.ID)
	if errors.Is(err, metadata.ErrNotFound) {
		return false, nil // none made yet: nothing can match
	} else if err != nil {
		return false, err
	}
	// Compare digests, so that not even the length of the token shows in
	// the time taken.
	want, got := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(credential))
	return subtle.ConstantTimeCompare(want[:], got[:]) == 1, nil
}

// Token returns the account's port token, making it if it has none.
func (t *PortTokens) Token(ctx context.Context, account metadata.Account) (string, error) {
	if tok, err := t.store.PortToken(ctx, account.ID); err == nil {
		return tok, nil
	} else if !errors.Is(err, metadata.ErrNotFound) {
		return "", err
	}
	return t.store.EnsurePortToken(ctx, account.ID, newToken())
}

// Rotate replaces the account's port token with a new one and returns it;
// the old one is refused from then on.
func (t *PortTokens) Rotate(ctx context.Context, account metadata.Account) (string, error) {
	tok := newToken()
	if err := t.store.SetPortToken(ctx, account.ID, tok); err != nil {
		return "", err
	}
	return tok, nil
}
