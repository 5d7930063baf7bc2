package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Who a request speaks for. On the unix socket (root only: the
// administrator's channel) every request is the default account's, as
// admin. On the TCP listener (RemoteHandler) every request carries an API
// token; its account and role come from the token alone, never from the
// request. Each route needs a role (needs): reading is read's, changing
// member's, managing the host admin's.

// Authenticator checks the API tokens of the TCP listener's requests.
type Authenticator interface {
	// Authenticate returns the credential of token (remote is where the
	// request came from); A01 for a token that is malformed, unknown,
	// expired or revoked.
	Authenticate(ctx context.Context, token, remote string) (auth.Credential, error)
}

// socketCredential is the credential of the unix socket's requests.
var socketCredential = auth.Credential{Account: metadata.DefaultAccount, Role: auth.RoleAdmin, Remote: "unix"}

// adminRoutes are the routes only admin tokens may use: they manage the
// host, or what every account shares.
var adminRoutes = map[string]bool{
	"DELETE /v1/images/{name}":       true,
	"POST /v1/images/prune":          true,
	"GET /v1/accounts":               true,
	"POST /v1/accounts":              true,
	"PATCH /v1/accounts/{name}":      true,
	"DELETE /v1/accounts/{name}":     true,
	"GET /v1/tokens":                 true,
	"GET /v1/hosts":                  true,
	"POST /v1/hosts/{name}/evacuate": true,
	"POST /v1/tokens":                true,
	"DELETE /v1/tokens/{id}":         true,
}

// memberRoutes are GETs that read what opens more than the account's
// records: the port token opens its private ports (and is made on first
// need).
var memberRoutes = map[string]bool{
	"GET /v1/account/port-token": true,
}

// needs is the role route rt needs.
func needs(rt route) auth.Role {
	switch {
	case adminRoutes[rt.method+" "+rt.path]:
		return auth.RoleAdmin
	case memberRoutes[rt.method+" "+rt.path]:
		return auth.RoleMember
	case rt.method == http.MethodGet || rt.method == http.MethodHead:
		return auth.RoleRead
	}
	return auth.RoleMember
}

// RemoteHandler serves the API (or h, if not nil) to requests that
// carry an API token (Authorization: Bearer TOKEN): cairnd's TCP
// listener.
func (s *Server) RemoteHandler(authn Authenticator, h http.Handler) http.Handler {
	if h == nil {
		h = s.mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wait := s.authFails.blocked(r.RemoteAddr); wait > 0 {
			w.Header().Set("Retry-After", retryAfter(wait))
			writeError(w, http.StatusTooManyRequests, api.CodeRateLimited,
				"too many requests with bad API tokens from this address: wait for Retry-After")
			return
		}
		if ctx, ok, err := s.peer(r); ok {
			if err != nil {
				s.authFails.failed(r.RemoteAddr)
				s.fail(w, r, err)
				return
			}
			r = r.WithContext(ctx)
			if _, done := auth.FromContext(ctx); done {
				h.ServeHTTP(w, r) // the unix socket's administrator, on another host
				return
			}
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cairn"`)
			writeError(w, http.StatusUnauthorized, api.CodeUnauthenticated, "this request needs an API token (Authorization: Bearer TOKEN; `cairn login` stores one)")
			return
		}
		cred, err := authn.Authenticate(r.Context(), strings.TrimSpace(token), r.RemoteAddr)
		if err != nil {
			if errdefs.CodeOf(err) == api.CodeUnauthenticated {
				s.authFails.failed(r.RemoteAddr)
				w.Header().Set("WWW-Authenticate", `Bearer realm="cairn", error="invalid_token"`)
			}
			s.fail(w, r, err)
			return
		}
		if !s.tokenRates.take(cred.TokenID) {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, api.CodeRateLimited,
				"too many requests with this token: at most "+itoa(tokenRequestRate)+" a second; wait for Retry-After")
			return
		}
		h.ServeHTTP(w, r.WithContext(auth.NewContext(r.Context(), cred)))
	})
}

// A token may make tokenRequestRate requests a second on average, and
// tokenRequestBurst at once; beyond, 429 and A03.
const (
	tokenRequestRate  = 100
	tokenRequestBurst = 200
	// tokenRatesMax bounds the buckets kept; past it the full ones go.
	tokenRatesMax = 10000
)

// tokenRates is a request rate per token.
type tokenRates struct {
	mu      sync.Mutex
	buckets map[string]*tokenBucket
	now     func() time.Time // nil: time.Now
}

func (t *tokenRates) take(id string) bool {
	t.mu.Lock()
	if t.buckets == nil {
		t.buckets = map[string]*tokenBucket{}
	}
	b := t.buckets[id]
	if b == nil {
		if len(t.buckets) >= tokenRatesMax {
			clear(t.buckets) // each restarts full: at worst one more burst
		}
		b = newTokenBucket(tokenRequestRate, tokenRequestBurst, t.now)
		t.buckets[id] = b
	}
	t.mu.Unlock()
	return b.take()
}

// credential is who r speaks for; a request that came in by no known
// door has none: no account, no role (allowed refuses it everything).
func credential(r *http.Request) auth.Credential {
	c, _ := auth.FromContext(r.Context())
	return c
}

// allowed fails with A02 unless r's credential has the role rt needs.
func allowed(r *http.Request, rt route) error {
	c := credential(r)
	need := needs(rt)
	if !c.Role.Allows(need) {
		return errdefs.New(api.CodeForbidden, "a %s token cannot %s %s (it needs %s)", c.Role, rt.method, rt.path, need)
	}
	return nil
}

// permitted wraps h so that it answers A02 unless the credential has the
// role rt needs.
func permitted(rt route, h func(*Server, http.ResponseWriter, *http.Request) error) func(*Server, http.ResponseWriter, *http.Request) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		if err := allowed(r, rt); err != nil {
			return err
		}
		return h(s, w, r)
	}
}
