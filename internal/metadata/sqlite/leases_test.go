package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// BenchmarkLeaseAcquireRelease measures what one AcquireLease and its
// ReleaseLease cost together, on a database file on the disk the test's
// temporary directory is on (not tmpfs, or the fsyncs would be free), the
// way every checkpoint takes and releases a lease. For comparison it also
// measures one ordinary write (SetSandboxState), which commits with
// synchronous=FULL.
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "metadata.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// Some leases of other resources, as a busy daemon holds.
	for i := range 20 {
		if _, err := s.AcquireLease(ctx, metadata.Lease{ID: fmt.Sprintf("other-%d", i), Resource: fmt.Sprintf("sandbox/%016x", i),
			Exclusive: true, Owner: "host/bench/1", Purpose: "upload", Expires: time.Now().Add(time.Hour)}); err != nil {
			b.Fatal(err)
		}
	}

	full := func(ctx context.Context, fn func(*sql.Tx) error) error { return inTx(ctx, s.writer, fn) }
	for _, run := range []struct {
		name string
		tx   txRunner
	}{{"acquire+release", s.leaseTx}, {"acquire+release-at-FULL", full}} {
		b.Run(run.name, func(b *testing.B) {
			cpu := cpuTime(b)
			for i := 0; b.Loop(); i++ {
				l, err := s.acquireLease(ctx, metadata.Lease{ID: fmt.Sprintf("l%d", i), Resource: "checkpoint/c000000000000001",
					Owner: "host/bench/1", Purpose: "checkpoint", Expires: time.Now().Add(time.Minute)}, run.tx)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.releaseLease(ctx, l.ID, run.tx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}

	a, err := s.EnsureAccount(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	sb := metadata.Sandbox{ID: "0000000000000001", AccountID: a.ID, Name: "web", Image: "debian", State: metadata.SandboxStopped}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		b.Fatal(err)
	}
	b.Run("full-write", func(b *testing.B) {
		cpu := cpuTime(b)
		for b.Loop() {
			if err := s.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}

// cpuTime returns the CPU time (user and system) the process has used: on
// a machine other work shares, it says what an operation costs apart from
// waiting for the disk and for a core.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
