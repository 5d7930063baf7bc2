package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

// twoStores opens two stores on one new database, as two hosts would.
func twoStores(t *testing.T) [2]*Store {
	t.Helper()
	url := pgtest.New(t)
	var out [2]*Store
	for i := range out {
		s, err := Open(context.Background(), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// TestConcurrentCheckpointsTwoStores takes manual checkpoints of one
// sandbox through two stores at once: the ids are v0…vN-1, each once, and
// no call fails (a serialization failure is retried, never returned).
func TestConcurrentCheckpointsTwoStores(t *testing.T) {
	stores := twoStores(t)
	ctx := context.Background()
	a, err := stores[0].EnsureAccount(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	sb := metadata.Sandbox{ID: "0000000000000001", AccountID: a.ID, Name: "web", Image: "debian", State: metadata.SandboxRunning}
	if err := stores[0].CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	const n = 32
	var wg sync.WaitGroup
	seqs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ck, err := stores[i%2].CreateCheckpoint(ctx, metadata.Checkpoint{
				ID: fmt.Sprintf("c%015x", i), AccountID: a.ID, SandboxID: sb.ID, SandboxName: sb.Name,
				Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: sb.Image,
				DiskPath: fmt.Sprintf("checkpoints/c%015x", i),
			})
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

// TestExclusiveLeaseAcrossStores has workers on two stores take turns at
// an exclusive lease of one resource: never two hold it at once, and
// every refusal is ErrConflict.
func TestExclusiveLeaseAcrossStores(t *testing.T) {
	stores := twoStores(t)
	ctx := context.Background()
	var (
		holders, took atomic.Int32
		wg            sync.WaitGroup
	)
	deadline := time.Now().Add(3 * time.Second)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				l := metadata.Lease{ID: fmt.Sprintf("w%d-%d", w, i), Resource: "sandbox/x", Exclusive: true,
					Owner: fmt.Sprintf("host/%d", w%2), Purpose: "test", Expires: time.Now().Add(time.Minute)}
				_, err := stores[w%2].AcquireLease(ctx, l)
				if errors.Is(err, metadata.ErrConflict) {
					time.Sleep(time.Millisecond)
					continue
				} else if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if n := holders.Add(1); n != 1 {
					t.Errorf("%d holders of an exclusive lease at once", n)
				}
				took.Add(1)
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				if err := stores[(w+1)%2].ReleaseLease(ctx, l.ID); err != nil {
					t.Errorf("worker %d: release: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if took.Load() < 10 {
		t.Errorf("the lease was taken %d times in 3 s", took.Load())
	}
	t.Logf("the lease was taken %d times", took.Load())
}

// TestOnePathAcrossStores races checkpoints through two stores that all
// name one disk path: exactly one is stored.
func TestOnePathAcrossStores(t *testing.T) {
	stores := twoStores(t)
	ctx := context.Background()
	a, err := stores[0].EnsureAccount(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// A disk path of one and the memory path of the other must
			// collide too.
			ck := metadata.Checkpoint{ID: fmt.Sprintf("c%015x", i), AccountID: a.ID, SandboxID: fmt.Sprintf("%016x", i),
				SandboxName: "web", Seq: "auto-1", Trigger: metadata.TriggerInterval, Consistency: metadata.ConsistencyFrozen,
				Image: "debian", DiskPath: "checkpoints/shared"}
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

// TestLeaseWritesCommitAsynchronously checks the one durability
// difference: lease transactions commit with synchronous_commit off,
// every other one with the server's setting (on).
func TestLeaseWritesCommitAsynchronously(t *testing.T) {
	s := twoStores(t)[0]
	ctx := context.Background()
	setting := func(run func(context.Context, func(*sql.Tx) error) error) (string, string) {
		var v, app string
		if err := run(ctx, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, `SELECT current_setting('synchronous_commit'), current_setting('application_name')`).Scan(&v, &app)
		}); err != nil {
			t.Fatal(err)
		}
		return v, app
	}
	if v, app := setting(s.leaseTx); v != "off" || app != "cairnd" {
		t.Errorf("in a lease transaction synchronous_commit = %q, application_name = %q; want off, cairnd", v, app)
	}
	if v, _ := setting(s.inTx); v != "on" {
		t.Errorf("in another transaction synchronous_commit = %q, want on", v)
	}
	if v, _ := setting(s.leaseTx); v != "off" {
		t.Errorf("again in a lease transaction: %q", v)
	}
	if v, _ := setting(s.inTx); v != "on" {
		t.Errorf("SET LOCAL outlived its transaction: synchronous_commit = %q", v)
	}
}
