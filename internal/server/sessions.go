package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Long sessions (an attached exec, a port connection, a followed event
// stream, an operation's events) outlive the request that opened them,
// and so the token check of that request. Each is held under its token
// here: revoking the token (or deleting its account) ends them at once,
// and each ends by itself at its token's expiry (a context deadline). The
// end is said where the protocol can say it: an exec's last frame is an
// Error frame (A01), an event stream's last line the error shape (A01); a
// port connection, raw bytes, is closed.

// Why a session was ended: its ctx's cause (context.Cause).
var (
	errSessionRevoked = errdefs.New(api.CodeUnauthenticated, "the API token of this session was revoked: the session is ended")
	errSessionExpired = errdefs.New(api.CodeUnauthenticated, "the API token of this session expired: the session is ended")
)

// tokenEnded is why ctx, a session's, was ended by its token: revoked or
// expired; nil if it was not (it ended otherwise, or goes on).
func tokenEnded(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, errSessionRevoked) || errors.Is(cause, errSessionExpired) {
		return cause
	}
	return nil
}

// sessions are the live long sessions, by token id.
type sessions struct {
	mu      sync.Mutex
	byToken map[string]map[*session]bool
	// revoked are the tokens ended in this run: a session that registers
	// after its token's end (its request was let in just before) is ended
	// at once. Revocations are few and final.
	revoked map[string]bool
}

type session struct {
	account string
	cancel  context.CancelCauseFunc
}

// openSession returns the context of a long session of r, which ends
// with r's, when r's token is revoked (endSessions) or when it expires;
// and done, to call when the session is over. Requests without a token
// (the unix socket, a management socket) are not held.
func (s *Server) openSession(r *http.Request) (ctx context.Context, done func()) {
	c := credential(r)
	ctx, cancel := context.WithCancelCause(r.Context())
	if c.TokenID == "" {
		return ctx, func() { cancel(nil) }
	}
	stop := func() {}
	if !c.ExpiresAt.IsZero() {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadlineCause(ctx, c.ExpiresAt, errSessionExpired)
		stop = cancelDeadline
	}
	se := &session{account: c.Account, cancel: cancel}
	r0 := &s.sessions
	r0.mu.Lock()
	if r0.revoked[c.TokenID] {
		cancel(errSessionRevoked)
	} else {
		if r0.byToken == nil {
			r0.byToken = map[string]map[*session]bool{}
		}
		if r0.byToken[c.TokenID] == nil {
			r0.byToken[c.TokenID] = map[*session]bool{}
		}
		r0.byToken[c.TokenID][se] = true
	}
	r0.mu.Unlock()
	return ctx, func() {
		r0.mu.Lock()
		if m := r0.byToken[c.TokenID]; m != nil {
			delete(m, se)
			if len(m) == 0 {
				delete(r0.byToken, c.TokenID)
			}
		}
		r0.mu.Unlock()
		stop()
		cancel(nil)
	}
}

// endSessions ends every long session of the tokens ids at once, and
// those they would open later: the tokens were revoked, or deleted with
// their account.
func (s *Server) endSessions(ids ...string) {
	r := &s.sessions
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revoked == nil {
		r.revoked = map[string]bool{}
	}
	for _, id := range ids {
		r.revoked[id] = true
		for se := range r.byToken[id] {
			se.cancel(errSessionRevoked)
		}
		delete(r.byToken, id)
	}
}

// endAccountSessions ends every long session open with a token of the
// account: it was deleted, with its tokens.
// EndTokenSessions ends the long sessions of the tokens with those ids
// and refuses those they would open later: they were revoked.
func (s *Server) EndTokenSessions(ids ...string) { s.endSessions(ids...) }

func (s *Server) endAccountSessions(account string) {
	r := &s.sessions
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, m := range r.byToken {
		for se := range m {
			if se.account == account {
				se.cancel(errSessionRevoked)
				delete(m, se)
			}
		}
		if len(m) == 0 {
			delete(r.byToken, id)
		}
	}
}

// liveSessions is how many long sessions token id holds open.
func (s *Server) liveSessions(id string) int {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	return len(s.sessions.byToken[id])
}

// endStream writes the reason a token's end cut the NDJSON stream of ctx
// short, as its last line (the one error shape), if it did.
func endStream(ctx context.Context, w http.ResponseWriter, enc *json.Encoder) {
	err := tokenEnded(ctx)
	if err == nil {
		return
	}
	enc.Encode(api.ErrorBody{Error: api.ErrorInfo{Code: errdefs.CodeOf(err), Message: err.Error()}})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
