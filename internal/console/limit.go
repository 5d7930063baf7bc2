package console

import (
	"net"
	"sync"
	"time"
)

// Logins are limited per client address: a token cannot be guessed
// (128 random bits), but a client trying many is refused early, with
// 429 and A03, as the API does for a token's requests.
const (
	loginRate    = 1.0 // logins a second, on average
	loginBurst   = 10  // at once
	loginClients = 10000
)

// loginLimit is a token bucket per client IP.
type loginLimit struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLoginLimit(now func() time.Time) *loginLimit {
	return &loginLimit{now: now, buckets: map[string]*bucket{}}
}

// take reports whether a login from remote (IP:port) may go on.
func (l *loginLimit) take(remote string) bool {
	ip, _, err := net.SplitHostPort(remote)
	if err != nil {
		ip = remote
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[ip]
	if b == nil {
		if len(l.buckets) >= loginClients {
			clear(l.buckets) // each restarts full: at worst one more burst
		}
		b = &bucket{tokens: loginBurst, at: now}
		l.buckets[ip] = b
	}
	b.tokens += now.Sub(b.at).Seconds() * loginRate
	if b.tokens > loginBurst {
		b.tokens = loginBurst
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
