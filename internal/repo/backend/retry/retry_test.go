package retry

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/local"
)

var fast = Policy{Attempts: 4, Initial: time.Millisecond, Max: 4 * time.Millisecond}

func faultyLocal(t *testing.T) *backendtest.Faulty {
	l, err := local.New(filepath.Join(t.TempDir(), "loc"))
	if err != nil {
		t.Fatal(err)
	}
	return backendtest.NewFaulty(l)
}

func TestSuite(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend { return New(faultyLocal(t), fast) })
}

func TestRetriesTransientErrors(t *testing.T) {
	f := faultyLocal(t)
	var calls atomic.Int32
	f.Inject(func(op backendtest.Op, name string) error {
		if calls.Add(1) <= 2 {
			return errors.New("503 slow down")
		}
		return nil
	})
	r := New(f, fast)
	if err := r.Save(context.Background(), "packs/p", []byte("x")); err != nil {
		t.Fatalf("Save after two transient failures: %v", err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d calls, want 3", calls.Load())
	}
}

func TestGivesUp(t *testing.T) {
	f := faultyLocal(t)
	var calls atomic.Int32
	f.Inject(func(backendtest.Op, string) error { calls.Add(1); return errors.New("down") })
	if err := New(f, fast).Save(context.Background(), "packs/p", nil); err == nil {
		t.Fatal("Save succeeded against a dead backend")
	}
	if calls.Load() != int32(fast.Attempts) {
		t.Fatalf("%d calls, want %d", calls.Load(), fast.Attempts)
	}
}

func TestNotFoundIsFinal(t *testing.T) {
	f := faultyLocal(t)
	var calls atomic.Int32
	f.Inject(func(backendtest.Op, string) error { calls.Add(1); return nil })
	if _, err := New(f, fast).Load(context.Background(), "packs/none"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Load: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("not-found retried: %d calls", calls.Load())
	}
}

func TestHonoursContext(t *testing.T) {
	f := faultyLocal(t)
	f.Inject(func(backendtest.Op, string) error { return errors.New("down") })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := New(f, Policy{Attempts: 1000, Initial: time.Second, Max: time.Minute}).Remove(ctx, "packs/p")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Remove: %v, want the deadline", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("backoff ignored the context")
	}
}
