package server

import (
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
func newTokenBucket(rate, burst int, now func() time.Time) *tokenBucket {
	if now == nil {
		now = time.Now
	}
	return &tokenBucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: now(), now: now}
}

// take reports whether one more event is allowed now, and counts it if so.
func (b *tokenBucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func itoa(n int) string { return strconv.Itoa(n) }
