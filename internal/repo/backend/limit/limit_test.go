package limit

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/local"
)

func newLocal(t *testing.T) *backendtest.Faulty {
	l, err := local.New(filepath.Join(t.TempDir(), "loc"))
	if err != nil {
		t.Fatal(err)
	}
	return backendtest.NewFaulty(l)
}

func TestSuite(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Backend { return New(newLocal(t), 2) })
}

func TestBoundsConcurrency(t *testing.T) {
	f := newLocal(t)
	var running, peak atomic.Int32
	f.Inject(func(backendtest.Op, string) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		return nil
	})
	l := New(f, 3)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _, _ = l.Stat(context.Background(), "packs/x") })
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p < 2 {
		t.Fatalf("peak concurrency %d, want 3", p)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	f := newLocal(t)
	release := make(chan struct{})
	f.Inject(func(backendtest.Op, string) error { <-release; return nil })
	l := New(f, 1)
	go func() { _, _ = l.Load(context.Background(), "packs/busy") }()
	time.Sleep(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Save(ctx, "packs/y", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Save while the slot is taken: %v", err)
	}
	close(release)
}
