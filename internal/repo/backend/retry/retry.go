// Package retry wraps a Backend so that failed calls are retried with
// exponential backoff and jitter. Not-found and already-exists answers and
// cancellation are final; waiting between attempts honours the context.
package retry

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
)

// Policy says how often and how patiently to retry.
type Policy struct {
	Attempts int           // total tries, at least 1
	Initial  time.Duration // first wait
	Max      time.Duration // longest wait
}

// DefaultPolicy tries 8 times over about a minute.
var DefaultPolicy = Policy{Attempts: 8, Initial: 250 * time.Millisecond, Max: 15 * time.Second}

// Backend retries the calls of the Backend it wraps.
type Backend struct {
	b backend.Backend
	p Policy
}

var _ backend.Backend = (*Backend)(nil)

// New wraps b.
func New(b backend.Backend, p Policy) *Backend {
	if p.Attempts < 1 {
		p.Attempts = 1
	}
	return &Backend{b: b, p: p}
}

func do[T any](ctx context.Context, p Policy, f func() (T, error)) (T, error) {
	wait := p.Initial
	for attempt := 1; ; attempt++ {
		v, err := f()
		if err == nil || attempt >= p.Attempts || errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrExists) || ctx.Err() != nil {
			return v, err
		}
		// Full jitter: sleep a random time up to the current backoff.
		d := time.Duration(rand.Int64N(int64(wait) + 1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, p.Max)
	}
}

// Save implements backend.Backend.
func (r *Backend) Save(ctx context.Context, name string, data []byte) error {
	_, err := do(ctx, r.p, func() (struct{}, error) { return struct{}{}, r.b.Save(ctx, name, data) })
	return err
}

// Create implements backend.Backend. An attempt that failed (a timeout, a
// lost answer) may still have stored the object, so ErrExists on a later
// attempt is success if the object holds exactly data.
func (r *Backend) Create(ctx context.Context, name string, data []byte) error {
	retried := false
	_, err := do(ctx, r.p, func() (struct{}, error) {
		err := r.b.Create(ctx, name, data)
		if errors.Is(err, backend.ErrExists) && retried {
			if got, lerr := r.b.Load(ctx, name); lerr == nil && bytes.Equal(got, data) {
				return struct{}{}, nil
			}
		}
		retried = true
		return struct{}{}, err
	})
	return err
}

// Load implements backend.Backend.
func (r *Backend) Load(ctx context.Context, name string) ([]byte, error) {
	return do(ctx, r.p, func() ([]byte, error) { return r.b.Load(ctx, name) })
}

// Stat implements backend.Backend.
func (r *Backend) Stat(ctx context.Context, name string) (backend.Info, error) {
	return do(ctx, r.p, func() (backend.Info, error) { return r.b.Stat(ctx, name) })
}

// List implements backend.Backend.
func (r *Backend) List(ctx context.Context, prefix string) ([]backend.Info, error) {
	return do(ctx, r.p, func() ([]backend.Info, error) { return r.b.List(ctx, prefix) })
}

// Remove implements backend.Backend.
func (r *Backend) Remove(ctx context.Context, name string) error {
	_, err := do(ctx, r.p, func() (struct{}, error) { return struct{}{}, r.b.Remove(ctx, name) })
	return err
}
