// Package limit wraps a Backend so that at most n calls run at once; a call
// waiting for its turn gives up when its context ends.
package limit

import (
	"context"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
)

// Backend bounds the concurrency of the Backend it wraps.
type Backend struct {
	b   backend.Backend
	sem chan struct{}
}

var _ backend.Backend = (*Backend)(nil)

// New wraps b, allowing n concurrent calls (at least 1).
func New(b backend.Backend, n int) *Backend {
	return &Backend{b: b, sem: make(chan struct{}, max(n, 1))}
}

func (l *Backend) acquire(ctx context.Context) error {
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Backend) release() { <-l.sem }

// Save implements backend.Backend.
func (l *Backend) Save(ctx context.Context, name string, data []byte) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.b.Save(ctx, name, data)
}

// Create implements backend.Backend.
func (l *Backend) Create(ctx context.Context, name string, data []byte) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.b.Create(ctx, name, data)
}

// Load implements backend.Backend.
func (l *Backend) Load(ctx context.Context, name string) ([]byte, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()
	return l.b.Load(ctx, name)
}

// Stat implements backend.Backend.
func (l *Backend) Stat(ctx context.Context, name string) (backend.Info, error) {
	if err := l.acquire(ctx); err != nil {
		return backend.Info{}, err
	}
	defer l.release()
	return l.b.Stat(ctx, name)
}

// List implements backend.Backend.
func (l *Backend) List(ctx context.Context, prefix string) ([]backend.Info, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()
	return l.b.List(ctx, prefix)
}

// Remove implements backend.Backend.
func (l *Backend) Remove(ctx context.Context, name string) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.b.Remove(ctx, name)
}
