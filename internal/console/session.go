package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"
)

// A session is held in memory alone: a cairnd restart logs everyone out.
// The cookie carries a random id; the server keeps, under the id's hash,
// the token it was opened with and the session's CSRF token. The token is
// looked up again on every request (Wrap), so the session is never more
// than the token: revoked or expired, it stops working at once.

// Session lifetimes: a session ends after idleTimeout without a request,
// and maxAge after login whatever happens.
const (
	idleTimeout = 8 * time.Hour
	maxAge      = 7 * 24 * time.Hour
	// maxSessions bounds the sessions held; past it the oldest goes.
	maxSessions = 10000
)

// session is one login.
type session struct {
	token   string // the API token it speaks with
	csrf    string // sent by the pages in X-Cairn-CSRF
	created time.Time
	seen    time.Time
}

// sessions is the store of open sessions, keyed by the hash of their id.
type sessions struct {
	mu  sync.Mutex
	m   map[[32]byte]*session
	now func() time.Time
	// prefix names this host in the ids it gives ("HOST." before the
	// random part); "" with one host.
	prefix string
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{m: map[[32]byte]*session{}, now: now}
}

// random returns n random bytes, base64url.
func random(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func key(id string) [32]byte { return sha256.Sum256([]byte(id)) }

// open starts a session speaking with token; it returns the cookie's id.
func (s *sessions) open(token string) (id string, se session) {
	now := s.now()
	id = random(32)
	if s.prefix != "" {
		id = s.prefix + "." + id
	}
	se = session{token: token, csrf: random(32), created: now, seen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if len(s.m) >= maxSessions {
		var oldest [32]byte
		var at time.Time
		for k, v := range s.m {
			if at.IsZero() || v.created.Before(at) {
				oldest, at = k, v.created
			}
		}
		delete(s.m, oldest)
	}
	c := se
	s.m[key(id)] = &c
	return id, se
}

// get returns the open session of id, and marks it used.
func (s *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(id)
	se, ok := s.m[k]
	if !ok {
		return session{}, false
	}
	if now.Sub(se.seen) > idleTimeout || now.Sub(se.created) > maxAge {
		delete(s.m, k)
		return session{}, false
	}
	se.seen = now
	return *se, true
}

// peek reports whether id is an open session here, without marking it
// used.
func (s *sessions) peek(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.m[key(id)]
	if !ok {
		return session{}, false
	}
	return *se, true
}

// close ends the session of id.
func (s *sessions) close(id string) {
	s.mu.Lock()
	delete(s.m, key(id))
	s.mu.Unlock()
}

// closeToken ends every session speaking with token (it was found
// revoked or expired).
func (s *sessions) closeToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.m {
		if v.token == token {
			delete(s.m, k)
		}
	}
}

func (s *sessions) expireLocked(now time.Time) {
	for k, v := range s.m {
		if now.Sub(v.seen) > idleTimeout || now.Sub(v.created) > maxAge {
			delete(s.m, k)
		}
	}
}

// csrfOK reports whether got is the session's CSRF token (in constant
// time).
func (se session) csrfOK(got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}
