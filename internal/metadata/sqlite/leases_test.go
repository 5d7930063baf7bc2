package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// synchronous returns the writer connection's synchronous setting:
// 2 = FULL, 1 = NORMAL.
func synchronous(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.writer.QueryRow(`PRAGMA synchronous`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWriterIsOneConnection shows what leaseTx relies on: a *sql.Conn of
// the writer pool is the connection every other write then uses, so a
// setting left on it would apply to them.
func TestWriterIsOneConnection(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "metadata.db"))
	defer s.Close()
	ctx := context.Background()
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := synchronous(t, s); got != 1 {
		t.Fatalf("after setting NORMAL on a Conn of the writer, the writer is at %d: not one connection", got)
	}
	if _, err := s.writer.Exec(`PRAGMA synchronous = FULL`); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseWritesLeaveWriterFull checks that the lease writes' NORMAL
// never reaches another write: after every lease method, after lease
// calls cut short by their context at random moments, and while lease
// writes run concurrently, whatever else uses the writer connection finds
// it at FULL.
func TestLeaseWritesLeaveWriterFull(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "metadata.db"))
	defer s.Close()
	ctx := context.Background()
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	lease := func(id string) metadata.Lease {
		return metadata.Lease{ID: id, Resource: "checkpoint/" + id, Owner: "host/t/1", Purpose: "upload", Expires: far}
	}

	calls := map[string]func() error{
		"AcquireLease": func() error { _, err := s.AcquireLease(ctx, lease("a")); return err },
		"RenewLease":   func() error { return s.RenewLease(ctx, "a", far.Add(time.Hour)) },
		"RevokeLeases": func() error { _, err := s.RevokeLeases(ctx, "checkpoint/a", ""); return err },
		"ReleaseLease": func() error { return s.ReleaseLease(ctx, "a") },
		"ReclaimLeases": func() error {
			_, err := s.ReclaimLeases(ctx, "host/t/")
			return err
		},
	}
	for _, name := range []string{"AcquireLease", "RenewLease", "RevokeLeases", "ReleaseLease", "ReclaimLeases"} {
		if err := calls[name](); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := synchronous(t, s); got != 2 {
			t.Errorf("after %s the writer is at synchronous %d, want 2 (FULL)", name, got)
		}
	}
	// Failing calls too.
	if _, err := s.AcquireLease(ctx, lease("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, lease("b")); !errors.Is(err, metadata.ErrConflict) {
		t.Fatalf("second AcquireLease(b) = %v, want ErrConflict", err)
	}
	if err := s.ReleaseLease(ctx, "none"); !errors.Is(err, metadata.ErrNotFound) {
		t.Fatalf("ReleaseLease(none) = %v", err)
	}
	if got := synchronous(t, s); got != 2 {
		t.Errorf("after failed lease calls the writer is at synchronous %d, want 2", got)
	}

	// Cut short at random moments.
	for i := range 200 {
		c, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(400))*time.Microsecond)
		s.AcquireLease(c, lease(fmt.Sprintf("c%d", i)))
		s.ReleaseLease(c, fmt.Sprintf("c%d", i))
		cancel()
		if got := synchronous(t, s); got != 2 {
			t.Fatalf("after a lease call cut short (round %d) the writer is at synchronous %d, want 2", i, got)
		}
	}

	// Concurrently: the other users of the writer never see NORMAL.
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 150 {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, err := s.AcquireLease(ctx, lease(id)); err != nil {
					t.Error(err)
					return
				}
				if err := s.ReleaseLease(ctx, id); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var reads, normal int
	for running := true; running; reads++ {
		select {
		case <-done:
			running = false
		default:
		}
		var n int
		if err := s.writer.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			normal++
		}
	}
	if normal > 0 {
		t.Errorf("%d of %d uses of the writer during lease writes found it at NORMAL", normal, reads)
	}
}

// crashLeaseWriterEnv makes the test binary a lease writer for
// TestKilledLeaseWriter instead of running the tests.
const crashLeaseWriterEnv = "CAIRN_TEST_SQLITE_CRASH_LEASE_WRITER"

// crashLeaseWriter acquires leases l0, l1… in the database at path, and
// after each odd one releases the one before, printing "acquired ID" and
// "released ID" once each call has returned, until it is killed.
func crashLeaseWriter(path string) {
	s, err := Open(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1_000_000 { // bounded, should the test not kill it
		id := fmt.Sprintf("l%d", i)
		if _, err := s.AcquireLease(ctx, metadata.Lease{ID: id, Resource: "checkpoint/" + id, Owner: "host/t/1", Expires: far}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if _, err := fmt.Println("acquired", id); err != nil {
			os.Exit(2)
		}
		if i%2 == 1 {
			prev := fmt.Sprintf("l%d", i-1)
			if err := s.ReleaseLease(ctx, prev); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if _, err := fmt.Println("released", prev); err != nil {
				os.Exit(2)
			}
		}
	}
}

// TestKilledLeaseWriter kills (SIGKILL) a process in the middle of lease
// writes, which commit at synchronous=NORMAL: every acquire and release it
// had seen return must be in the database all the same (only a power cut
// or kernel crash may lose them).
func TestKilledLeaseWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashLeaseWriterEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acquired, released := map[string]bool{}, map[string]bool{}
	lines := bufio.NewScanner(out)
	n := 0
	for lines.Scan() {
		verb, id, _ := strings.Cut(lines.Text(), " ")
		if verb == "acquired" {
			acquired[id] = true
		} else {
			released[id] = true
		}
		if n++; n == 300 {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the writer exited normally before it was killed")
	}
	if n < 300 {
		t.Fatalf("the writer stopped after %d lines", n)
	}
	// The last lease acquired is l<len-1>; when that is odd, the release
	// of the one before may have committed without being printed.
	var maybeReleased string
	if last := len(acquired) - 1; last%2 == 1 {
		maybeReleased = fmt.Sprintf("l%d", last-1)
	}

	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ls, err := s.Leases(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, l := range ls {
		live[l.ID] = true
	}
	for id := range acquired {
		switch {
		case released[id] && live[id]:
			t.Errorf("lease %s was released, and is there after the kill", id)
		case !released[id] && !live[id] && id != maybeReleased:
			t.Errorf("lease %s was acquired, and is gone after the kill", id)
		}
	}
	t.Logf("%d acquires and %d releases returned before SIGKILL, all there", len(acquired), len(released))
}

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
