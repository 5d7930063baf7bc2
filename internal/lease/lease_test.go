package lease

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
)

func newManager(t *testing.T) *Manager {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "cairn.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return New(store, NewOwner("h1"), time.Now)
}

func TestAnExclusiveLeaseRefusesOthersUntilReleased(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "sandbox/a", Options{Exclusive: true, Purpose: "restoring"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Acquire(ctx, "sandbox/a", Options{Exclusive: true, Purpose: "deleting"})
	var held *HeldError
	if !errors.As(err, &held) || held.Holder.Purpose != "restoring" || !errors.Is(err, metadata.ErrConflict) {
		t.Fatalf("second exclusive lease: %v, want a HeldError naming the restore", err)
	}
	got := make(chan error, 1)
	go func() {
		l2, err := m.Acquire(ctx, "sandbox/a", Options{Exclusive: true, Purpose: "checkpoint", WaitFor: WaitAlways})
		if err == nil {
			l2.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a waiter got the lease while it was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	l.Release()
	l.Release() // twice is fine
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the lease after the release")
	}
}

func TestRevokeCancelsTheHoldersContext(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	up, err := m.Acquire(ctx, "checkpoint/c", Options{Purpose: "upload"})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := m.Acquire(ctx, "checkpoint/c", Options{Purpose: "restore"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Revoke(ctx, "checkpoint/c", "upload"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-up.Context().Done():
	case <-time.After(time.Second):
		t.Fatal("the revoked lease's context is not cancelled")
	}
	if rd.Context().Err() != nil {
		t.Fatal("a lease of another purpose was cancelled too")
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := m.WaitReleased(wctx, "checkpoint/c"); err == nil {
		t.Fatal("WaitReleased returned while two leases are held")
	}
	up.Release()
	rd.Release()
	if err := m.WaitReleased(ctx, "checkpoint/c"); err != nil {
		t.Fatal(err)
	}
}

func TestReclaimTakesBackADeadPredecessorsLeases(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	if _, err := m.Acquire(ctx, "sandbox/a", Options{Exclusive: true, Purpose: "starting"}); err != nil {
		t.Fatal(err)
	}
	next := New(m.store, NewOwner("h1"), time.Now)
	if _, err := next.Acquire(ctx, "sandbox/a", Options{Exclusive: true}); !errors.Is(err, metadata.ErrConflict) {
		t.Fatalf("before the reclaim: %v", err)
	}
	got, err := next.Reclaim(ctx, OwnerPrefix("h1"))
	if err != nil || len(got) != 1 {
		t.Fatalf("reclaim: %v %v", got, err)
	}
	l, err := next.Acquire(ctx, "sandbox/a", Options{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// A holder that can no longer renew its lease (another process revoked it,
// or it expired and was reclaimed) sees its context end.
func TestALostLeaseEndsItsHoldersContext(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	l, err := m.Acquire(ctx, "checkpoint/c", Options{Purpose: "upload"})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := m.Acquire(ctx, "checkpoint/d", Options{Purpose: "upload"})
	if err != nil {
		t.Fatal(err)
	}
	// Revoked in the store by someone else: no local cancel.
	if _, err := m.store.RevokeLeases(ctx, "checkpoint/c", ""); err != nil {
		t.Fatal(err)
	}
	if l.Context().Err() != nil {
		t.Fatal("cancelled before the renewal saw it")
	}
	m.renewAll(ctx)
	if l.Context().Err() == nil {
		t.Fatal("a revoked lease's holder goes on after the renewal")
	}
	if kept.Context().Err() != nil {
		t.Fatal("a lease renewed fine was cancelled")
	}
}
