package server

import (
	"math"
	"net"
	"strconv"
	"sync"
	"time"
)

// tokenBucket allows rate events a second on average and burst at once.
type tokenBucket struct {
	mu          sync.Mutex
	rate, burst float64
	tokens      float64
	last        time.Time
	now         func() time.Time
}

// newTokenBucket returns a full bucket; now nil is time.Now.
func newTokenBucket(rate float64, burst int, now func() time.Time) *tokenBucket {
	if now == nil {
		now = time.Now
	}
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now(), now: now}
}

// refill adds what the time since the last look earned. b.mu is held.
func (b *tokenBucket) refill() {
	now := b.now()
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
	}
	b.last = now
}

// take reports whether one more event is allowed now, and counts it if so.
func (b *tokenBucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// wait is how long until one more event is allowed: 0 if it is now. It
// counts nothing.
func (b *tokenBucket) wait() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// full reports whether the bucket has refilled to its burst: it holds no
// trace of past events.
func (b *tokenBucket) full() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	return b.tokens >= b.burst
}

func itoa(n int) string { return strconv.Itoa(n) }

// retryAfter is a Retry-After header's value for a wait: whole seconds,
// at least 1.
func retryAfter(d time.Duration) string {
	return itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// Failed authentications on the TCP listener are limited per remote
// address: authFailBurst bad tokens at once, then one per
// authFailEvery. Past that, every request from the address is answered
// A03 (429, Retry-After) before its token is looked at, a good one too,
// until the allowance is back: guessing tokens gets nowhere fast, and a
// client elsewhere is not touched. A request without a token is no
// guess and is not counted.
const (
	authFailBurst = 10
	authFailEvery = 6 * time.Second
	// authFailMax bounds the addresses kept; past it those with a full
	// allowance go, then (a flood of addresses) all.
	authFailMax = 10000
)

// failedAuths counts bad tokens per remote address.
type failedAuths struct {
	mu      sync.Mutex
	buckets map[string]*tokenBucket
	now     func() time.Time // nil: time.Now
}

// addressOf is the address failures are counted for: the IP of a
// request's RemoteAddr (its port changes with each connection).
func addressOf(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// blocked is how long the address must wait before its next try (0: it
// may try now).
func (f *failedAuths) blocked(remote string) time.Duration {
	f.mu.Lock()
	b := f.buckets[addressOf(remote)]
	f.mu.Unlock()
	if b == nil {
		return 0
	}
	return b.wait()
}

// failed counts a bad token from the address.
func (f *failedAuths) failed(remote string) {
	addr := addressOf(remote)
	f.mu.Lock()
	if f.buckets == nil {
		f.buckets = map[string]*tokenBucket{}
	}
	b := f.buckets[addr]
	if b == nil {
		if len(f.buckets) >= authFailMax {
			for a, old := range f.buckets {
				if old.full() {
					delete(f.buckets, a)
				}
			}
			if len(f.buckets) >= authFailMax {
				clear(f.buckets)
			}
		}
		b = newTokenBucket(1/authFailEvery.Seconds(), authFailBurst, f.now)
		f.buckets[addr] = b
	}
	f.mu.Unlock()
	b.take()
}
