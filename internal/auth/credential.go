package auth

import (
	"context"
	"time"
)

// Credential is who a request speaks for: the account it works in (never
// taken from the request itself) and what it may do there.
type Credential struct {
	Account   string // the account's name
	Role      Role
	TokenID   string // "" for the administrator's unix socket
	TokenName string
	Remote    string // "unix", or the client's IP:port
	// ExpiresAt is when the token expires (zero: never): a long session
	// it opened (an exec, a port connection, a followed event stream)
	// ends then.
	ExpiresAt time.Time
}

type credentialKey struct{}

// NewContext returns ctx carrying c.
func NewContext(ctx context.Context, c Credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

// FromContext returns the credential ctx carries, if any.
func FromContext(ctx context.Context) (Credential, bool) {
	c, ok := ctx.Value(credentialKey{}).(Credential)
	return c, ok
}
