package storetest

// Persistence, cancellation and concurrency of the sandbox rows.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

func testPersistence(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	sb.ParentID = "0000000000000000"
	create(t, s, sb)
	create(t, s, newSandbox("0000000000000002", a.ID, "gone"))
	clock.Advance(time.Second)
	if err := s.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAutoCheckpoint(ctx, sb.ID, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, "0000000000000002"); err != nil {
		t.Fatal(err)
	}
	want := byID(t, s, sb.ID)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	clock.Advance(time.Hour)
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	got, err := s2.AccountByName(ctx, "alice")
	if err != nil || got.ID != a.ID || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("account after reopen = %+v, %v; want %+v", got, err, a)
	}
	sameSandbox(t, "sandbox after reopen", byID(t, s2, sb.ID), want)
	all, err := s2.AllSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "AllSandboxes after reopen", all, sb.ID)

	// Ids are not reused after a reopen.
	b := ensureAccount(t, s2, "bob")
	if b.ID == a.ID {
		t.Errorf("new account after reopen reuses id %d", a.ID)
	}
}

func testCancelledContext(t *testing.T, open OpenFunc) {
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	if err := s.CreateSandbox(ctx, newSandbox("0000000000000001", a.ID, "web")); err == nil {
		t.Errorf("CreateSandbox with a cancelled context succeeded")
	}
	if _, err := s.EnsureAccount(ctx, "bob"); err == nil {
		t.Errorf("EnsureAccount with a cancelled context succeeded")
	}
	if _, err := s.AllSandboxes(ctx); err == nil {
		t.Errorf("AllSandboxes with a cancelled context succeeded")
	}
	if _, err := s.AccountByName(context.Background(), "bob"); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("account created despite the cancelled context: err = %v", err)
	}

	sb := newSandbox("0000000000000002", a.ID, "db")
	create(t, s, sb)
	if _, err := s.CreateCheckpoint(ctx, newCheckpoint("c000000000000001", sb)); err == nil {
		t.Errorf("CreateCheckpoint with a cancelled context succeeded")
	}
	if err := s.SetCurrentCheckpoint(ctx, sb.ID, ""); err == nil {
		t.Errorf("SetCurrentCheckpoint with a cancelled context succeeded")
	}
	if _, err := s.ListCheckpoints(ctx, a.ID, metadata.CheckpointFilter{IncludeAuto: true}); err == nil {
		t.Errorf("ListCheckpoints with a cancelled context succeeded")
	}
	if _, err := s.ListAccounts(ctx); err == nil {
		t.Errorf("ListAccounts with a cancelled context succeeded")
	}
	if err := s.SetAutoCheckpoint(ctx, sb.ID, time.Hour); err == nil {
		t.Errorf("SetAutoCheckpoint with a cancelled context succeeded")
	}
	if got := byID(t, s, sb.ID); got.AutoCheckpoint != sb.AutoCheckpoint {
		t.Errorf("interval changed despite the cancelled context: %v", got.AutoCheckpoint)
	}
	// The failed creation took no number.
	if got := createCk(t, s, newCheckpoint("c000000000000002", sb)); got.Seq != "v0" {
		t.Errorf("first checkpoint after a cancelled creation is %s, want v0", got.Seq)
	}
}

// testConcurrentWriters runs many goroutines that each create, update, read
// and delete their own sandboxes at once. Every call must succeed: a store
// makes concurrent writers wait, it does not fail them ("database is locked").
func testConcurrentWriters(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)

	const workers, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			errs <- func() error {
				// Every worker ensures the same accounts concurrently.
				a, err := s.EnsureAccount(ctx, fmt.Sprintf("acct-%d", w%3))
				if err != nil {
					return err
				}
				for i := range each {
					id := fmt.Sprintf("%08x%08x", w, i)
					if err := s.CreateSandbox(ctx, newSandbox(id, a.ID, "sb-"+id)); err != nil {
						return err
					}
					if err := s.SetSandboxState(ctx, id, metadata.SandboxRunning); err != nil {
						return err
					}
					if _, err := s.SandboxByID(ctx, id); err != nil {
						return err
					}
					if i%4 == 0 {
						if err := s.DeleteSandbox(ctx, id); err != nil {
							return err
						}
					}
				}
				return nil
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	all, err := s.AllSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := workers * (each - each/4); len(all) != want {
		t.Errorf("%d sandboxes after the run, want %d", len(all), want)
	}
	for _, sb := range all {
		if sb.State != metadata.SandboxRunning {
			t.Errorf("sandbox %s is %s", sb.ID, sb.State)
		}
	}
	accounts := map[int64]bool{}
	for _, sb := range all {
		accounts[sb.AccountID] = true
	}
	if len(accounts) != 3 {
		t.Errorf("sandboxes spread over %d accounts, want 3 (EnsureAccount raced)", len(accounts))
	}
}

// testConcurrentCreateSameName races creations of one name: exactly one
// wins, every other gets ErrConflict.
func testConcurrentCreateSameName(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, _ := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.CreateSandbox(ctx, newSandbox(fmt.Sprintf("%016x", i+1), a.ID, "web"))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, metadata.ErrConflict):
			t.Errorf("creator %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d creations of the same name succeeded, want 1", won)
	}
	sbs, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{})
	if err != nil || len(sbs) != 1 {
		t.Errorf("ListSandboxes = %v, %v; want one sandbox", sbs, err)
	}
}
