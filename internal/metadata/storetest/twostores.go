package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// The tests of two stores open on one database at once, as two cairnd
// processes, or two hosts sharing one PostgreSQL, have them: the rules a
// store keeps must hold across stores too, not only among the goroutines
// of one (whatever the store serializes in memory, it cannot rely on).

// testTwoStores runs the two-store tests, each with its own database.
func testTwoStores(t *testing.T, open OpenFunc) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, [2]metadata.Store, *Clock)
	}{
		{"EnsureAccount", testTwoStoresEnsureAccount},
		{"ManualIDs", testTwoStoresManualIDs},
		{"LeaseExclusion", testTwoStoresLeaseExclusion},
		{"OnePath", testTwoStoresOnePath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clock := openStore(t, open)
			other := open(t, clock.Now)
			t.Cleanup(func() {
				if err := other.Close(); err != nil {
					t.Errorf("Close of the second store: %v", err)
				}
			})
			tc.fn(t, [2]metadata.Store{s, other}, clock)
		})
	}
}

// testTwoStoresEnsureAccount ensures the same accounts through both stores
// at once: each name has one account, whichever store asked.
func testTwoStoresEnsureAccount(t *testing.T, stores [2]metadata.Store, _ *Clock) {
	ctx := context.Background()
	const n = 16
	var wg sync.WaitGroup
	got := make([]metadata.Account, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { got[i], errs[i] = stores[i%2].EnsureAccount(ctx, fmt.Sprintf("acct-%d", i%4)) })
	}
	wg.Wait()
	ids := map[string]int64{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
			continue
		}
		if id, ok := ids[got[i].Name]; ok && id != got[i].ID {
			t.Errorf("account %s has ids %d and %d", got[i].Name, id, got[i].ID)
		}
		ids[got[i].Name] = got[i].ID
	}
	if all, err := stores[1].ListAccounts(ctx); err != nil || len(all) != 4 {
		t.Errorf("ListAccounts = %d accounts, %v; want 4", len(all), err)
	}
}

// testTwoStoresManualIDs takes manual checkpoints of one sandbox through
// both stores at once: the ids are v0…vN-1, each once, and no call fails.
func testTwoStoresManualIDs(t *testing.T, stores [2]metadata.Store, _ *Clock) {
	ctx := context.Background()
	a := ensureAccount(t, stores[0], "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	create(t, stores[0], sb)
	const n = 24
	var wg sync.WaitGroup
	seqs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ck, err := stores[i%2].CreateCheckpoint(ctx, newCheckpoint(fmt.Sprintf("c%015x", i), sb))
			seqs[i], errs[i] = ck.Seq, err
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("creator %d: %v", i, err)
			continue
		}
		if seen[seqs[i]] {
			t.Errorf("%s given twice", seqs[i])
		}
		seen[seqs[i]] = true
	}
	for i := range n {
		if seq := metadata.ManualSeq(int64(i)); !seen[seq] {
			t.Errorf("%s never given", seq)
		}
	}
}

// testTwoStoresLeaseExclusion has workers on both stores take turns at an
// exclusive lease of one resource, each releasing through the other store:
// never two hold it at once, and every refusal is ErrConflict.
func testTwoStoresLeaseExclusion(t *testing.T, stores [2]metadata.Store, clock *Clock) {
	ctx := context.Background()
	const workers, each = 6, 8
	var (
		wg      sync.WaitGroup
		holders atomic.Int32
	)
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := 0; i < each; {
				l, err := stores[w%2].AcquireLease(ctx, newLease(fmt.Sprintf("w%d-%d", w, i), "sandbox/0000000000000001", true,
					fmt.Sprintf("host/%d/1", w%2), "checkpoint", clock, time.Hour))
				if errors.Is(err, metadata.ErrConflict) {
					time.Sleep(time.Millisecond)
					continue
				} else if err != nil {
					errs <- err
					return
				}
				if n := holders.Add(1); n != 1 {
					errs <- fmt.Errorf("%d holders of an exclusive lease", n)
				}
				time.Sleep(200 * time.Microsecond)
				holders.Add(-1)
				if err := stores[(w+1)%2].ReleaseLease(ctx, l.ID); err != nil {
					errs <- err
					return
				}
				i++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sameLeases(t, "at the end", leases(t, stores[0], ""))
}

// testTwoStoresOnePath races checkpoints through both stores that all name
// one pool path, as a disk or as a memory image: exactly one is stored.
// (Only the disk paths and only the memory paths are unique indexes; a
// disk path that is another checkpoint's memory path is the store's own
// check, which must hold across stores.)
func testTwoStoresOnePath(t *testing.T, stores [2]metadata.Store, _ *Clock) {
	ctx := context.Background()
	a := ensureAccount(t, stores[0], "alice")
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			sb := newSandbox(fmt.Sprintf("%016x", i+1), a.ID, "web")
			ck := newAuto(fmt.Sprintf("c%015x", i), sb, "auto-20310517T103000Z", metadata.TriggerInterval)
			ck.DiskPath = "checkpoints/shared"
			if i%2 == 1 {
				ck.DiskPath, ck.HasMemory, ck.MemoryPath = "", true, "checkpoints/shared"
			}
			_, errs[i] = stores[i%2].CreateCheckpoint(ctx, ck)
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
		t.Errorf("%d checkpoints name the one path, want 1", won)
	}
}
