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

// lostAnswer stores the first Create but answers it with an error, like a
// PUT whose response never arrived.
type lostAnswer struct {
	backend.Backend
	calls atomic.Int32
}

func (l *lostAnswer) Create(ctx context.Context, name string, data []byte) error {
	err := l.Backend.Create(ctx, name, data)
	if l.calls.Add(1) == 1 && err == nil {
		return errors.New("connection reset")
	}
	return err
}

func TestCreateWhoseAnswerWasLost(t *testing.T) {
	l := &lostAnswer{Backend: faultyLocal(t)}
	r := New(l, fast)
	if err := r.Create(context.Background(), "heads/1", []byte("mine")); err != nil {
		t.Fatalf("Create that landed on the first attempt: %v", err)
	}
	if l.calls.Load() != 2 {
		t.Fatalf("%d calls, want 2", l.calls.Load())
	}
	// Someone else's object under the name is still a conflict.
	if err := r.Create(context.Background(), "heads/1", []byte("other")); !errors.Is(err, backend.ErrExists) {
		t.Fatalf("Create over another object: %v, want ErrExists", err)
	}
}

func TestCreateConflictAfterRetry(t *testing.T) {
	f := faultyLocal(t)
	var calls atomic.Int32
	f.Inject(func(op backendtest.Op, name string) error {
		if op == backendtest.OpCreate && calls.Add(1) == 1 {
			// A rival commits while the first attempt fails.
			if err := f.Save(context.Background(), "heads/1", []byte("rival")); err != nil {
				t.Error(err)
			}
			return errors.New("503 slow down")
		}
		return nil
	})
	if err := New(f, fast).Create(context.Background(), "heads/1", []byte("mine")); !errors.Is(err, backend.ErrExists) {
		t.Fatalf("Create that lost to a rival: %v, want ErrExists", err)
	}
}

func TestCreateExistsIsFinal(t *testing.T) {
	f := faultyLocal(t)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.Save(context.Background(), "heads/1", []byte("x")))
	var calls atomic.Int32
	f.Inject(func(backendtest.Op, string) error { calls.Add(1); return nil })
	// Even with the same bytes: the first attempt cannot have stored it.
	if err := New(f, fast).Create(context.Background(), "heads/1", []byte("x")); !errors.Is(err, backend.ErrExists) {
		t.Fatalf("Create: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("ErrExists retried: %d calls", calls.Load())
	}
}
