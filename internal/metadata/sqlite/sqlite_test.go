package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/migrations"
	"github.com/cairn-sandbox/cairn/internal/metadata/storetest"
)

// crashWriterEnv makes the test binary a writer for TestKilledWriter
// instead of running the tests.
const crashWriterEnv = "CAIRN_TEST_SQLITE_CRASH_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashWriterEnv); path != "" {
		crashWriter(path)
		return
	}
	if path := os.Getenv(crashLeaseWriterEnv); path != "" {
		crashLeaseWriter(path)
		return
	}
	os.Exit(m.Run())
}

// crashWriter creates sandboxes in the database at path and prints each id
// once CreateSandbox has returned, until it is killed.
func crashWriter(path string) {
	s, err := Open(path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	a, err := s.EnsureAccount(ctx, "alice")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := range 1_000_000 { // bounded, should the test not kill it
		id := fmt.Sprintf("%016x", i)
		sb := metadata.Sandbox{ID: id, AccountID: a.ID, Name: "sb-" + id, Image: "debian", State: metadata.SandboxRunning}
		if err := s.CreateSandbox(ctx, sb); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if _, err := fmt.Println(id); err != nil {
			os.Exit(2)
		}
	}
}

// TestKilledWriter kills (SIGKILL) a process in the middle of writing and
// checks that every write it had seen committed is in the database, which
// opens cleanly afterwards.
func TestKilledWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashWriterEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var committed []string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		committed = append(committed, lines.Text())
		if len(committed) == 50 {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Lines already in the pipe when the kill landed were committed too.
	if err := cmd.Wait(); err == nil {
		t.Fatal("the writer exited normally before it was killed")
	}
	if len(committed) < 50 {
		t.Fatalf("the writer stopped after %d writes", len(committed))
	}

	s := openT(t, path)
	defer s.Close()
	for _, id := range committed {
		if _, err := s.SandboxByID(context.Background(), id); err != nil {
			t.Errorf("committed sandbox %s: %v", id, err)
		}
	}
	var check string
	if err := s.reader.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
	t.Logf("%d committed writes before SIGKILL, all present", len(committed))
}

func TestStore(t *testing.T) {
	var (
		mu    sync.Mutex
		paths = map[*testing.T]string{} // one database file per test
	)
	storetest.Run(t, func(t *testing.T, now func() time.Time) metadata.Store {
		mu.Lock()
		path, ok := paths[t]
		if !ok {
			path = filepath.Join(t.TempDir(), "metadata.db")
			paths[t] = path
		}
		mu.Unlock()
		s, err := Open(path, now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func openT(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, storetest.NewClock().Now)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// rawDB opens path without the store, as the sqlite3 shell would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, url.Values{"_busy_timeout": {"10000"}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

type appliedMigration struct {
	version   int
	appliedAt string
}

func appliedMigrations(t *testing.T, db *sql.DB) []appliedMigration {
	t.Helper()
	rows, err := db.Query(`SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []appliedMigration
	for rows.Next() {
		var m appliedMigration
		if err := rows.Scan(&m.version, &m.appliedAt); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func latest(t *testing.T) int {
	t.Helper()
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	return migrations.Latest(ms)
}

func TestMigrationsRecordedAndReopenIsNoOp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	clock := storetest.NewClock()
	s, err := Open(path, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := rawDB(t, path)
	first := appliedMigrations(t, db)
	if len(first) != latest(t) {
		t.Fatalf("schema_migrations has %d rows, want %d", len(first), latest(t))
	}
	for i, m := range first {
		if m.version != i+1 {
			t.Errorf("row %d is version %d", i, m.version)
		}
		if want := formatTime(clock.Now()); m.appliedAt != want {
			t.Errorf("version %d applied_at = %q, want the clock's %q", m.version, m.appliedAt, want)
		}
	}

	for range 2 {
		clock.Advance(time.Hour)
		s, err := Open(path, clock.Now)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		s.Close()
	}
	if again := appliedMigrations(t, db); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Errorf("reopening changed schema_migrations: %v, was %v", again, first)
	}
}

func TestNewerSchemaFailsOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	s := openT(t, path)
	ctx := context.Background()
	a, err := s.EnsureAccount(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A newer cairnd migrated the database further.
	newer := latest(t) + 1
	db := rawDB(t, path)
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		newer, "2040-01-01T00:00:00.000000Z"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE from_the_future (x INTEGER)`); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(path, nil)
	if err == nil {
		s2.Close()
		t.Fatal("Open of a database from a newer cairnd succeeded")
	}
	if !errors.Is(err, metadata.ErrSchemaTooNew) {
		t.Errorf("err = %v, want ErrSchemaTooNew", err)
	}
	msg := err.Error()
	for _, want := range []string{path, fmt.Sprintf("version is %d", newer), fmt.Sprintf("up to %d", newer-1), "upgrade cairnd"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}

	// The database is untouched: still at the newer version, data intact.
	if got := appliedMigrations(t, db); got[len(got)-1].version != newer {
		t.Errorf("versions after the failed Open: %v", got)
	}
	var name string
	if err := db.QueryRow(`SELECT name FROM accounts WHERE id = ?`, a.ID).Scan(&name); err != nil || name != "alice" {
		t.Errorf("account after the failed Open: %q, %v", name, err)
	}
}

// TestMigrationsAreAtomic applies a set whose second migration fails: the
// first must be rolled back with it, and nothing recorded.
func TestMigrationsAreAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	db, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms := []migrations.Migration{
		{Version: 1, Name: "good", SQL: "CREATE TABLE one (x INTEGER); CREATE TABLE two (y INTEGER);"},
		{Version: 2, Name: "bad", SQL: "CREATE TABLE three (z INTEGER); THIS IS NOT SQL;"},
	}
	err = applyMigrations(context.Background(), db, ms, time.Now)
	if err == nil || !strings.Contains(err.Error(), "0002_bad") {
		t.Fatalf("applyMigrations = %v, want an error naming 0002_bad", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tables left after a failed migration, want none", n)
	}

	// With the bad one fixed, both apply, every statement of each.
	ms[1].SQL = "CREATE TABLE three (z INTEGER);"
	if err := applyMigrations(context.Background(), db, ms, time.Now); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"one", "two", "three"} {
		if _, err := db.Exec(`INSERT INTO ` + table + ` VALUES (1)`); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}
	if got := appliedMigrations(t, db); len(got) != 2 {
		t.Errorf("recorded %v, want versions 1 and 2", got)
	}
}

func TestPragmas(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "metadata.db"))
	defer s.Close()
	for _, db := range []struct {
		name string
		db   *sql.DB
	}{{"writer", s.writer}, {"reader", s.reader}} {
		for pragma, want := range map[string]string{
			"journal_mode": "wal",
			"synchronous":  "2", // FULL
			"foreign_keys": "1",
			"busy_timeout": fmt.Sprint(busyTimeout.Milliseconds()),
		} {
			var got string
			if err := db.db.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: PRAGMA %s = %s, want %s", db.name, pragma, got, want)
			}
		}
	}
	if _, err := s.reader.Exec(`INSERT INTO accounts (name, created_at) VALUES ('x', 'y')`); err == nil {
		t.Errorf("the reader pool can write")
	}
}

// TestConcurrentStoresOnOneFile opens two stores on one file, as two
// processes would (two writer connections competing for the SQLite lock),
// and writes through both at once. No call may fail with SQLITE_BUSY:
// BEGIN IMMEDIATE and busy_timeout make writers wait for each other.
func TestConcurrentStoresOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	stores := []*Store{openT(t, path), openT(t, path)}
	defer stores[0].Close()
	defer stores[1].Close()
	ctx := context.Background()

	const workers, each = 8, 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for w := range workers {
		s := stores[w%2]
		wg.Go(func() {
			fail := func(err error) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
			}
			a, err := s.EnsureAccount(ctx, fmt.Sprintf("acct-%d", w%3))
			if err != nil {
				fail(err)
				return
			}
			for i := range each {
				id := fmt.Sprintf("%08x%08x", w, i)
				sb := metadata.Sandbox{ID: id, AccountID: a.ID, Name: "sb-" + id, Image: "debian", State: metadata.SandboxStopped}
				if err := s.CreateSandbox(ctx, sb); err != nil {
					fail(err)
					return
				}
				if err := s.SetSandboxState(ctx, id, metadata.SandboxRunning); err != nil {
					fail(err)
					return
				}
				if _, err := s.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{}); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if code := sqliteCode(err); code&0xff == sqlite3.SQLITE_BUSY {
			t.Errorf("SQLITE_BUSY: %v", err)
		} else {
			t.Error(err)
		}
	}
	for i, s := range stores {
		all, err := s.AllSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != workers*each {
			t.Errorf("store %d sees %d sandboxes, want %d", i, len(all), workers*each)
		}
	}
}

// TestPathIsEscaped opens a file whose name contains URI syntax: it must be
// taken as part of the name, not as parameters.
func TestPathIsEscaped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir%20with #odd?chars")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "meta?mode=ro.db")
	s := openT(t, path)
	if _, err := s.EnsureAccount(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database is not at the path given: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("Open created files outside the directory given: %v", entries)
	}
}

func TestOpenRejectsNonDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path, nil); err == nil {
		s.Close()
		t.Fatal("Open of a file that is not a database succeeded")
	}
}

// TestConcurrentOpens opens one new file from many goroutines at once, as
// racing processes would: each must succeed (switching to WAL and migrating
// wait for each other), and the migrations must be applied once.
func TestConcurrentOpens(t *testing.T) {
	for round := range 5 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("metadata-%d.db", round))
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				s, err := Open(path, nil)
				if err == nil {
					_, err = s.EnsureAccount(context.Background(), "alice")
					s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, Open %d: %v", round, i, err)
			}
		}
		if got := appliedMigrations(t, rawDB(t, path)); len(got) != latest(t) {
			t.Errorf("round %d: schema_migrations = %v", round, got)
		}
	}
}

// TestReadThenWriteTransactions runs transactions that read before they
// write (count, then insert: the shape of allocating the next checkpoint
// number) through the writers of two stores on one file. In WAL mode a
// deferred transaction that upgrades from a read snapshot another
// connection has since moved past fails at once with SQLITE_BUSY, busy
// timeout or not; the store's BEGIN IMMEDIATE takes the write lock first
// and so only ever waits.
func TestReadThenWriteTransactions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	stores := []*Store{openT(t, path), openT(t, path)}
	defer stores[0].Close()
	defer stores[1].Close()
	ctx := context.Background()

	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		s := stores[w%2]
		wg.Go(func() {
			for i := range each {
				errs <- inTx(ctx, s.writer, func(tx *sql.Tx) error {
					var n int
					if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM accounts`).Scan(&n); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, `INSERT INTO accounts (name, created_at) VALUES (?, ?)`,
						fmt.Sprintf("acct-%d-%d-%d", w, i, n), formatTime(time.Now()))
					return err
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var n int
	if err := stores[0].reader.QueryRow(`SELECT count(*) FROM accounts`).Scan(&n); err != nil || n != workers*each {
		t.Errorf("%d accounts, %v; want %d", n, err, workers*each)
	}
}

// TestResumeCheckpointIndex checks that the statement DeleteCheckpoint
// clears resume checkpoints with finds the sandboxes through the partial
// index of 0004, not by scanning every sandbox.
func TestResumeCheckpointIndex(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "metadata.db"))
	defer s.Close()
	rows, err := s.reader.Query(`EXPLAIN QUERY PLAN
		UPDATE sandboxes SET resume_checkpoint = NULL, updated_at = ? WHERE resume_checkpoint = ?`, "x", "c000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(plan, "; "), "sandboxes_resume_idx") {
		t.Errorf("query plan %q does not use sandboxes_resume_idx", plan)
	}
}

// TestConcurrentCheckpointsTwoStores takes manual checkpoints of one
// sandbox through two stores on one file, as two processes would: the
// counter is read and incremented under the write lock, so the ids are
// v0…vN-1, each once, and no call fails with SQLITE_BUSY.
func TestConcurrentCheckpointsTwoStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	stores := []*Store{openT(t, path), openT(t, path)}
	defer stores[0].Close()
	defer stores[1].Close()
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
