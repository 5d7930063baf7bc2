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

// TestUpgradeFromVersion1 builds a database as a cairnd of schema version 1
// left it (0001 only, with sandboxes in it) and opens it with this store:
// it must move to the latest version with every sandbox intact, and their
// manual checkpoints must start at v0.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:1], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id, created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'running', 1.5, 1024, NULL,
		         '2030-01-02T00:00:00.000001Z', '2030-01-03T00:00:00.000002Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id, created_at, updated_at)
		 VALUES ('0000000000000002', 7, 'fork', 'busybox', 'stopped', 0, 0, '0000000000000001',
		         '2030-01-04T00:00:00.000000Z', '2030-01-04T00:00:00.000000Z')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	clock := storetest.NewClock()
	s, err := Open(path, clock.Now)
	if err != nil {
		t.Fatalf("Open of a version 1 database: %v", err)
	}
	defer s.Close()
	if got := appliedMigrations(t, rawDB(t, path)); len(got) != latest(t) || got[len(got)-1].appliedAt != formatTime(clock.Now()) {
		t.Errorf("schema_migrations after the upgrade = %v, want versions up to %d, the new ones applied now", got, latest(t))
	}

	day := func(d, us int) time.Time { return time.Date(2030, 1, d, 0, 0, 0, us*1000, time.UTC) }
	want := []metadata.Sandbox{
		{ID: "0000000000000002", AccountID: 7, Name: "fork", Image: "busybox", State: metadata.SandboxStopped,
			ParentID: "0000000000000001", AutoCheckpoint: 5 * time.Minute, CreatedAt: day(4, 0), UpdatedAt: day(4, 0)},
		{ID: "0000000000000001", AccountID: 7, Name: "web", Image: "debian", State: metadata.SandboxRunning,
			CPUs: 1.5, MemoryBytes: 1024, AutoCheckpoint: 5 * time.Minute, CreatedAt: day(2, 1), UpdatedAt: day(3, 2)},
	}
	got, err := s.ListSandboxes(ctx, 7, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sandboxes after the upgrade:\n got  %+v\n want %+v", got, want)
	}
	var counters string
	if err := s.reader.QueryRow(`SELECT group_concat(next_checkpoint) FROM (SELECT next_checkpoint FROM sandboxes ORDER BY id)`).
		Scan(&counters); err != nil || counters != "0,0" {
		t.Errorf("next_checkpoint after the upgrade = %q, %v; want 0 for both", counters, err)
	}

	for i, wantSeq := range []string{"v0", "v1"} {
		ck, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{
			ID: fmt.Sprintf("c%015x", i), AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
		})
		if err != nil || ck.Seq != wantSeq {
			t.Errorf("checkpoint %d after the upgrade = %q, %v; want %s", i, ck.Seq, err, wantSeq)
		}
	}
}

// TestUpgradeFromVersion2 builds a database as a cairnd of schema version 2
// left it (0001 and 0002, with sandboxes and checkpoints in it) and opens it
// with this store: it must move to the latest version with every row
// intact, existing sandboxes at the default automatic checkpoint interval
// (5m) and existing checkpoints at root generation 0 (unknown).
func TestUpgradeFromVersion2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:2], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id,
		                       next_checkpoint, current_checkpoint, source_checkpoint, created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'running', 1.5, 1024, NULL,
		         2, 'c000000000000001', NULL, '2030-01-02T00:00:00.000001Z', '2030-01-03T00:00:00.000002Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id,
		                       next_checkpoint, current_checkpoint, source_checkpoint, created_at, updated_at)
		 VALUES ('0000000000000002', 7, 'fork', 'busybox', 'stopped', 0, 0, '0000000000000001',
		         0, 'c000000000000001', 'c000000000000001', '2030-01-04T00:00:00.000000Z', '2030-01-04T00:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, created_at)
		 VALUES ('c000000000000001', 7, '0000000000000001', 'web', 'v0', 'snap', 'manual', 'frozen',
		         'a comment', 'a label', 0, 'debian', 4096, 8192, '2030-01-02T12:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, created_at)
		 VALUES ('c000000000000002', 7, '0000000000000001', 'web', 'v1', NULL, 'manual', 'frozen',
		         '', '', 0, 'debian', 0, 0, '2030-01-02T13:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, created_at)
		 VALUES ('c000000000000003', 7, '0000000000000001', 'web', 'auto-20300102T130000Z', NULL, 'interval', 'crash',
		         '', '', 0, 'debian', 0, 0, '2030-01-02T13:00:00.000000Z')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	clock := storetest.NewClock()
	s, err := Open(path, clock.Now)
	if err != nil {
		t.Fatalf("Open of a version 2 database: %v", err)
	}
	defer s.Close()
	applied := appliedMigrations(t, rawDB(t, path))
	if len(applied) != latest(t) || applied[1].appliedAt == formatTime(clock.Now()) ||
		applied[len(applied)-1].appliedAt != formatTime(clock.Now()) {
		t.Errorf("schema_migrations after the upgrade = %v, want versions up to %d, only the new ones applied now", applied, latest(t))
	}

	day := func(d, h, us int) time.Time { return time.Date(2030, 1, d, h, 0, 0, us*1000, time.UTC) }
	wantSbs := []metadata.Sandbox{
		{ID: "0000000000000002", AccountID: 7, Name: "fork", Image: "busybox", State: metadata.SandboxStopped,
			ParentID: "0000000000000001", CurrentCheckpoint: "c000000000000001", SourceCheckpoint: "c000000000000001",
			AutoCheckpoint: 5 * time.Minute, CreatedAt: day(4, 0, 0), UpdatedAt: day(4, 0, 0)},
		{ID: "0000000000000001", AccountID: 7, Name: "web", Image: "debian", State: metadata.SandboxRunning,
			CPUs: 1.5, MemoryBytes: 1024, CurrentCheckpoint: "c000000000000001",
			AutoCheckpoint: 5 * time.Minute, CreatedAt: day(2, 0, 1), UpdatedAt: day(3, 0, 2)},
	}
	sbs, err := s.ListSandboxes(ctx, 7, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sbs) != fmt.Sprint(wantSbs) {
		t.Errorf("sandboxes after the upgrade:\n got  %+v\n want %+v", sbs, wantSbs)
	}

	wantCks := []metadata.Checkpoint{
		{ID: "c000000000000001", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "v0", Name: "snap",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Comment: "a comment", Label: "a label",
			Image: "debian", SizeExclusive: 4096, SizeTotal: 8192, DiskPath: "checkpoints/c000000000000001", CreatedAt: day(2, 12, 0)},
		{ID: "c000000000000002", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "v1",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
			DiskPath: "checkpoints/c000000000000002", CreatedAt: day(2, 13, 0)},
		{ID: "c000000000000003", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "auto-20300102T130000Z",
			Trigger: metadata.TriggerInterval, Consistency: metadata.ConsistencyCrash, Image: "debian",
			DiskPath: "checkpoints/c000000000000003", CreatedAt: day(2, 13, 0)},
	}
	cks, err := s.ListCheckpoints(ctx, 7, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cks) != fmt.Sprint(wantCks) {
		t.Errorf("checkpoints after the upgrade:\n got  %+v\n want %+v", cks, wantCks)
	}
	// The newest: created with v1 at the same instant, stored after it.
	if ck, err := s.LatestCheckpoint(ctx, "0000000000000001"); err != nil || ck.ID != "c000000000000003" {
		t.Errorf("LatestCheckpoint after the upgrade = %s, %v; want c000000000000003", ck.ID, err)
	}

	// The counter carried over; new rows take the new columns.
	ck, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{
		ID: "c000000000000004", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web",
		Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian", RootGeneration: 1 << 40,
	})
	if err != nil || ck.Seq != "v2" || ck.RootGeneration != 1<<40 {
		t.Errorf("checkpoint after the upgrade = %s generation %d, %v; want v2 generation %d", ck.Seq, ck.RootGeneration, err, uint64(1<<40))
	}
	if err := s.SetAutoCheckpoint(ctx, "0000000000000001", time.Hour); err != nil {
		t.Fatal(err)
	}
	if sb, err := s.SandboxByID(ctx, "0000000000000001"); err != nil || sb.AutoCheckpoint != time.Hour {
		t.Errorf("interval after SetAutoCheckpoint = %v, %v; want 1h", sb.AutoCheckpoint, err)
	}
}

// TestUpgradeFromVersion3 builds a database as a cairnd of schema version 3
// left it (0001 to 0003, with sandboxes and checkpoints in it) and opens it
// with this store: it must move to the latest version with every row
// intact and no sandbox resuming from a checkpoint (they cold-start, as
// before); the new column then works on the old rows.
func TestUpgradeFromVersion3(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:3], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id,
		                       next_checkpoint, current_checkpoint, source_checkpoint, auto_checkpoint_seconds,
		                       created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'stopped', 1.5, 1024, NULL,
		         2, 'c000000000000001', NULL, 3600, '2030-01-02T00:00:00.000001Z', '2030-01-03T00:00:00.000002Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id,
		                       next_checkpoint, current_checkpoint, source_checkpoint, auto_checkpoint_seconds,
		                       created_at, updated_at)
		 VALUES ('0000000000000002', 7, 'fork', 'busybox', 'running', 0, 0, '0000000000000001',
		         0, 'c000000000000001', 'c000000000000001', 300, '2030-01-04T00:00:00.000000Z', '2030-01-04T00:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, root_generation, created_at)
		 VALUES ('c000000000000001', 7, '0000000000000001', 'web', 'v0', 'snap', 'manual', 'frozen',
		         'a comment', 'a label', 0, 'debian', 4096, 8192, 77, '2030-01-02T12:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, root_generation, created_at)
		 VALUES ('c000000000000002', 7, '0000000000000001', 'web', 'auto-20300102T130000Z', NULL, 'stop', 'frozen',
		         '', '', 1, 'debian', 0, 0, 78, '2030-01-02T13:00:00.000000Z')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	clock := storetest.NewClock()
	s, err := Open(path, clock.Now)
	if err != nil {
		t.Fatalf("Open of a version 3 database: %v", err)
	}
	defer s.Close()
	applied := appliedMigrations(t, rawDB(t, path))
	if len(applied) != latest(t) || applied[2].appliedAt == formatTime(clock.Now()) ||
		applied[len(applied)-1].appliedAt != formatTime(clock.Now()) {
		t.Errorf("schema_migrations after the upgrade = %v, want versions up to %d, only the new ones applied now", applied, latest(t))
	}

	day := func(d, h, us int) time.Time { return time.Date(2030, 1, d, h, 0, 0, us*1000, time.UTC) }
	wantSbs := []metadata.Sandbox{
		{ID: "0000000000000002", AccountID: 7, Name: "fork", Image: "busybox", State: metadata.SandboxRunning,
			ParentID: "0000000000000001", CurrentCheckpoint: "c000000000000001", SourceCheckpoint: "c000000000000001",
			AutoCheckpoint: 5 * time.Minute, CreatedAt: day(4, 0, 0), UpdatedAt: day(4, 0, 0)},
		{ID: "0000000000000001", AccountID: 7, Name: "web", Image: "debian", State: metadata.SandboxStopped,
			CPUs: 1.5, MemoryBytes: 1024, CurrentCheckpoint: "c000000000000001",
			AutoCheckpoint: time.Hour, CreatedAt: day(2, 0, 1), UpdatedAt: day(3, 0, 2)},
	}
	sbs, err := s.ListSandboxes(ctx, 7, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", sbs) != fmt.Sprintf("%+v", wantSbs) {
		t.Errorf("sandboxes after the upgrade:\n got  %+v\n want %+v", sbs, wantSbs)
	}
	var nulls int
	if err := s.reader.QueryRow(`SELECT count(*) FROM sandboxes WHERE resume_checkpoint IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
		t.Errorf("sandboxes without a resume checkpoint after the upgrade = %d, %v; want 2 (NULL)", nulls, err)
	}

	wantCks := []metadata.Checkpoint{
		{ID: "c000000000000001", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "v0", Name: "snap",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Comment: "a comment", Label: "a label",
			Image: "debian", SizeExclusive: 4096, SizeTotal: 8192, RootGeneration: 77,
			DiskPath: "checkpoints/c000000000000001", CreatedAt: day(2, 12, 0)},
		{ID: "c000000000000002", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "auto-20300102T130000Z",
			Trigger: metadata.TriggerStop, Consistency: metadata.ConsistencyFrozen, HasMemory: true, Image: "debian",
			RootGeneration: 78, DiskPath: "checkpoints/c000000000000002", MemoryPath: "memory/c000000000000002", CreatedAt: day(2, 13, 0)},
	}
	cks, err := s.ListCheckpoints(ctx, 7, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", cks) != fmt.Sprintf("%+v", wantCks) {
		t.Errorf("checkpoints after the upgrade:\n got  %+v\n want %+v", cks, wantCks)
	}

	// The old rows take the new column: an old stop checkpoint becomes a
	// saved session, deleting it ends the session, and the counter carried
	// over.
	if err := s.SetResumeCheckpoint(ctx, "0000000000000001", "c000000000000002"); err != nil {
		t.Fatal(err)
	}
	if sb, err := s.SandboxByID(ctx, "0000000000000001"); err != nil || sb.ResumeCheckpoint != "c000000000000002" ||
		!sb.UpdatedAt.Equal(normTime(clock.Now())) {
		t.Errorf("after SetResumeCheckpoint: resume %q updated %v, %v; want c000000000000002 at %v",
			sb.ResumeCheckpoint, sb.UpdatedAt, err, normTime(clock.Now()))
	}
	if err := s.DeleteCheckpoint(ctx, "c000000000000002"); err != nil {
		t.Fatal(err)
	}
	if sb, err := s.SandboxByID(ctx, "0000000000000001"); err != nil || sb.ResumeCheckpoint != "" {
		t.Errorf("after deleting the resume checkpoint: resume %q, %v; want none", sb.ResumeCheckpoint, err)
	}
	if ck, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{
		ID: "c000000000000003", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web",
		Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
	}); err != nil || ck.Seq != "v2" {
		t.Errorf("checkpoint after the upgrade = %s, %v; want v2", ck.Seq, err)
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
