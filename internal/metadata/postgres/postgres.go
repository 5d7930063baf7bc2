// Package postgres is the metadata.Store on PostgreSQL, for several cairnd
// hosts sharing one control plane (cairnd --database postgres://…).
//
// It is a port of package sqlite, statement for statement where the two
// dialects allow, and passes the same suite (package storetest). It goes
// through pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib), so
// that the code keeps the shape of the SQLite store's.
//
// Concurrency. SQLite serializes every write on one lock; here several
// hosts write at once, so every write runs in a SERIALIZABLE transaction
// (inTx), single statements included. PostgreSQL's serializable snapshot
// isolation then gives the checks that a write makes before it writes
// (a path named by no other checkpoint, no live lease conflicting, an
// account that holds nothing) the meaning they have under SQLite's lock:
// of two transactions that would break such a rule together, one fails
// with a serialization failure, and inTx runs it again from the start.
// Reads are single statements at READ COMMITTED, each of one snapshot.
//
// Migrations run at Open in one transaction that first takes a
// transaction-level advisory lock (pg_advisory_xact_lock(MigrationLock)):
// hosts that start together wait for each other, the first migrates and
// the others find nothing to do. The lock ends with the transaction, so a
// host killed while migrating leaves neither the lock nor half a schema.
//
// Times are TIMESTAMPTZ, written and read back as UTC with microseconds
// (what metadata.Store promises). Lease writes, which need not survive a
// power cut (see metadata.Store), commit with synchronous_commit off.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/migrations"
)

var _ metadata.Store = (*Store)(nil)

// MigrationLock is the key of the advisory lock the migrations run under
// ("cairnmig" in ASCII). Another program sharing the database must not
// use it.
const MigrationLock int64 = 0x636169726e6d6967

// maxConns bounds the connection pool of one Store.
const maxConns = 16

// maxAttempts bounds how often inTx runs a transaction that keeps failing
// with serialization failures or deadlocks: with the random pauses between
// them (up to 100 ms each) some five seconds of contention before the
// failure is returned (SQLite's writers wait up to ten for its lock).
const maxAttempts = 100

// Store is a metadata.Store in a PostgreSQL database.
type Store struct {
	db        *sql.DB
	now       func() time.Time
	closeOnce sync.Once
	closeErr  error
}

// Open connects to the database at url (postgres://user@host/db?…, as
// libpq and pgx take it) and brings its schema up to date. now is the
// clock for CreatedAt/UpdatedAt defaults; nil means time.Now. A database
// migrated by a newer cairnd fails with an error wrapping
// metadata.ErrSchemaTooNew and is left untouched.
func Open(ctx context.Context, url string, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("metadata: postgres: %w", err)
	}
	where := fmt.Sprintf("metadata: postgres database %q on %s", cfg.Database, cfg.Host)
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "cairnd" // what pg_stat_activity shows
	}
	s := &Store{db: stdlib.OpenDB(*cfg), now: now}
	s.db.SetMaxOpenConns(maxConns)
	s.db.SetMaxIdleConns(4)
	s.db.SetConnMaxIdleTime(5 * time.Minute)
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("%s: connect: %w", where, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return s, nil
}

// migrate applies the migrations the database lacks, all in one
// transaction, under the advisory lock MigrationLock.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations.Load(migrations.Postgres)
	if err != nil {
		return err
	}
	return applyMigrations(ctx, s.db, ms, s.now)
}

func applyMigrations(ctx context.Context, db *sql.DB, ms []migrations.Migration, now func() time.Time) error {
	tx, err := db.BeginTx(ctx, nil) // READ COMMITTED: each statement sees what committed before it
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, MigrationLock); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER     NOT NULL PRIMARY KEY,
		applied_at TIMESTAMPTZ NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	pending, err := migrations.Pending(ms, current)
	if err != nil {
		return err
	}
	for _, m := range pending {
		// No arguments: pgx sends it with the simple protocol, which
		// takes several statements.
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
			m.Version, normTime(now())); err != nil {
			return fmt.Errorf("record migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Close closes the connection pool. Calling it again returns the first
// result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

// inTx runs fn in a SERIALIZABLE transaction and commits it if fn returns
// nil. A serialization failure or a deadlock, from fn or from the commit,
// rolls it back and runs fn again (after a short random pause, growing
// with each attempt), so fn must set what it returns anew each time and
// change nothing it does not own. Another error is returned as it is.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.runTx(ctx, false, fn)
}

// leaseTx is inTx for the lease writes: it commits without waiting for
// the WAL to reach stable storage (synchronous_commit off). The process
// being killed loses nothing that committed (the server has it); a crash
// of the server's machine may lose the last of these commits, and only
// them: the WAL is written in commit order and every other commit flushes
// all of it before it returns.
func (s *Store) leaseTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.runTx(ctx, true, fn)
}

func (s *Store) runTx(ctx context.Context, async bool, fn func(*sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.tryTx(ctx, async, fn)
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return err
		}
		pause := time.Duration(rand.Int64N(int64(min(time.Millisecond<<min(attempt, 7), 100*time.Millisecond))))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

func (s *Store) tryTx(ctx context.Context, async bool, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if async {
		if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			tx.Rollback()
			return fmt.Errorf("synchronous_commit off: %w", err)
		}
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// SQLSTATE codes the store tells apart.
const (
	codeUniqueViolation      = "23505"
	codeForeignKeyViolation  = "23503"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

// pgError returns the PostgreSQL error in err's chain, or nil.
func pgError(err error) *pgconn.PgError {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// pgCode returns the SQLSTATE of err, "" if it is no PostgreSQL error.
func pgCode(err error) string {
	if e := pgError(err); e != nil {
		return e.Code
	}
	return ""
}

// violated returns the name of the constraint err broke ("" if none), and
// whether it is a unique violation (else a foreign-key one, or none).
func violated(err error) (constraint string, unique bool) {
	e := pgError(err)
	if e == nil || (e.Code != codeUniqueViolation && e.Code != codeForeignKeyViolation) {
		return "", false
	}
	return e.ConstraintName, e.Code == codeUniqueViolation
}

func retryable(err error) bool {
	c := pgCode(err)
	return c == codeSerializationFailure || c == codeDeadlockDetected
}

// exec runs one write statement in its own transaction (see inTx).
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = tx.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// execOne runs a write statement that must change one row, as exec does:
// none is metadata.ErrNotFound, wrapped with what.
func (s *Store) execOne(ctx context.Context, what, query string, args ...any) error {
	res, err := s.exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// execOneTx runs a statement in tx that must change one row: none is
// metadata.ErrNotFound.
func execOneTx(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return metadata.ErrNotFound
	}
	return nil
}

// oneRow turns "no row affected" into ErrNotFound.
func oneRow(res sql.Result, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, metadata.ErrNotFound)
	}
	return nil
}

// params returns "$1, $2, … $n".
func params(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(i))
	}
	return b.String()
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// stamp returns t, or now when t is zero, in the form every time is kept.
func (s *Store) stamp(t time.Time) time.Time {
	if t.IsZero() {
		t = s.now()
	}
	return normTime(t)
}

// nowTime is the store's clock in the form every time is kept.
func (s *Store) nowTime() time.Time { return normTime(s.now()) }

func normTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// nullable maps "" to NULL, for optional references.
func nullable(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

// nullableTime maps the zero time to NULL.
func nullableTime(t time.Time) sql.NullTime {
	if t.IsZero() {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: normTime(t), Valid: true}
}

// readTime turns a time read back (in the driver's local zone) into UTC.
func readTime(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// HoldLock takes the session-level advisory lock key on a connection of
// its own and keeps it until release is called (or the connection, or
// the process, ends: the server then lets go of it). A lock another
// session holds is an error wrapping metadata.ErrConflict, at once: it
// does not wait.
func (s *Store) HoldLock(ctx context.Context, key int64) (release func() error, err error) {
	l, err := s.TryLock(ctx, key)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// Lock is a session-level advisory lock held on a connection of its own.
type Lock struct {
	conn *sql.Conn
	key  int64
}

// TryLock takes the session-level advisory lock key on a connection of
// its own, as HoldLock does; the hosts' leader and the accounts'
// repository writers are held this way (package hosts).
func (s *Store) TryLock(ctx context.Context, key int64) (*Lock, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: lock %d: connect: %w", key, err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("metadata: lock %d: %w", key, err)
	}
	if !got {
		conn.Close()
		return nil, fmt.Errorf("metadata: lock %d: another session holds it: %w", key, metadata.ErrConflict)
	}
	return &Lock{conn: conn, key: key}, nil
}

// Check fails when the lock's connection does not answer (the lock may
// then be gone with it).
func (l *Lock) Check(ctx context.Context) error {
	var one int
	if err := l.conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("metadata: lock %d: %w", l.key, err)
	}
	return nil
}

// Release lets go of the lock and closes its connection.
func (l *Lock) Release() error {
	_, err := l.conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, l.key)
	return errors.Join(err, l.conn.Close())
}
