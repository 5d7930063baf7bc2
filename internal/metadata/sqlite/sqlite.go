// Package sqlite is the embedded metadata.Store: one SQLite file under the
// data directory, through the pure-Go driver modernc.org/sqlite (no cgo).
//
// Connections: one writer connection, through which every write goes, and a
// small pool of read-only connections. In WAL mode readers never block the
// writer nor each other, and because the writer is a single connection the
// writes of this process queue in database/sql instead of racing for the
// SQLite lock. Writes that span statements run in BEGIN IMMEDIATE
// transactions, which take the write lock up front and so wait under
// busy_timeout for another process holding it; a deferred transaction that
// upgrades from read to write would fail with SQLITE_BUSY at once instead.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/migrations"
)

var _ metadata.Store = (*Store)(nil)

// busyTimeout is how long a statement waits for a lock another connection
// (another process, or the WAL recovery of a reader) holds before failing
// with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// maxReaders bounds the read-only connection pool.
const maxReaders = 4

// timeFormat stores times as fixed-width UTC text with microseconds, which
// sorts in time order and reads well in the sqlite3 shell.
const timeFormat = "2006-01-02T15:04:05.000000Z"

// Store is a metadata.Store in one SQLite database file.
type Store struct {
	writer    *sql.DB // exactly one connection; every write goes through it
	reader    *sql.DB // query_only connections
	now       func() time.Time
	stmts     leaseStmts // prepared on the writer
	closeOnce sync.Once
	closeErr  error
}

// Open opens the database at path, creating it if needed, and brings its
// schema up to date. now is the clock for CreatedAt/UpdatedAt defaults; nil
// means time.Now. A database written by a newer cairnd fails with an error
// wrapping metadata.ErrSchemaTooNew and is left untouched.
func Open(path string, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	// synchronous=FULL: every COMMIT fsyncs the WAL before it returns. NORMAL
	// would already survive the daemon being killed (the WAL is in the page
	// cache), but a power cut or kernel crash could then lose the last
	// commits, leaving rows older than the btrfs snapshots and off-site
	// uploads they describe. Metadata writes are few (one per lifecycle
	// step or checkpoint), so one fsync each costs nothing that matters.
	// Lease writes are the exception: two per checkpoint, and none needs
	// to survive a power cut, so they alone commit at NORMAL (leaseTx).
	common := url.Values{
		"_busy_timeout": {fmt.Sprint(busyTimeout.Milliseconds())},
		"_foreign_keys": {"on"},
		"_synchronous":  {"full"},
	}
	w := url.Values{"_journal_mode": {"wal"}, "_txlock": {"immediate"}}
	r := url.Values{"_query_only": {"on"}}
	for k, v := range common {
		w[k], r[k] = v, v
	}

	s := &Store{now: now}
	if s.writer, err = sql.Open("sqlite", dsn(abs, w)); err != nil {
		return nil, fmt.Errorf("metadata: open %s: %w", abs, err)
	}
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.writer.SetConnMaxLifetime(0)
	s.writer.SetConnMaxIdleTime(0)

	ctx := context.Background()
	if err := s.checkWAL(ctx); err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("metadata: open %s: %w", abs, err)
	}
	if err := migrate(ctx, s.writer, s.now); err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("metadata: open %s: %w", abs, err)
	}

	if s.stmts, err = prepareLeaseStmts(ctx, s.writer); err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("metadata: open %s: %w", abs, err)
	}
	// The reader pool opens after the writer has put the file in WAL mode.
	if s.reader, err = sql.Open("sqlite", dsn(abs, r)); err != nil {
		s.stmts.close()
		s.writer.Close()
		return nil, fmt.Errorf("metadata: open %s: %w", abs, err)
	}
	s.reader.SetMaxOpenConns(maxReaders)
	s.reader.SetMaxIdleConns(maxReaders)
	return s, nil
}

// dsn builds a file: URI for the driver. The path is escaped, so a '?' or
// '#' in it is part of the name and not the start of the parameters.
func dsn(abs string, params url.Values) string {
	u := url.URL{Scheme: "file", Path: abs, RawQuery: params.Encode()}
	return u.String()
}

// checkWAL connects the writer, which switches the file to WAL mode, and
// makes sure WAL mode took effect: SQLite quietly keeps the rollback journal
// on file systems that cannot do WAL, which would make readers and the
// writer block each other.
//
// Switching a new file to WAL can fail with SQLITE_BUSY without waiting
// when another process is switching it at the same moment (busy_timeout
// does not cover that step), so connecting is retried for up to
// busyTimeout. Once the file is in WAL mode, which is persistent, this
// never happens again.
func (s *Store) checkWAL(ctx context.Context) error {
	retry := time.NewTimer(busyTimeout)
	defer retry.Stop()
	var mode string
	for {
		err := s.writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if err == nil {
			break
		}
		if sqliteCode(err)&0xff != sqlite3.SQLITE_BUSY {
			return fmt.Errorf("connect: %w", err)
		}
		select {
		case <-retry.C:
			return fmt.Errorf("connect: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("connect: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, not WAL (is the file system one SQLite supports?)", mode)
	}
	return nil
}

// migrate applies the migrations the database lacks, all in one IMMEDIATE
// transaction: the database moves to the latest version or stays where it
// was. Two processes opening the same new file at once serialize on the
// write lock, and the second finds nothing to do.
func migrate(ctx context.Context, db *sql.DB, now func() time.Time) error {
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		return err
	}
	return applyMigrations(ctx, db, ms, now)
}

func applyMigrations(ctx context.Context, db *sql.DB, ms []migrations.Migration, now func() time.Time) error {
	return inTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			applied_at TEXT    NOT NULL
		) STRICT`); err != nil {
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
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
				m.Version, formatTime(now())); err != nil {
				return fmt.Errorf("record migration %04d_%s: %w", m.Version, m.Name, err)
			}
		}
		return nil
	})
}

// txBeginner is a *sql.DB or a *sql.Conn.
type txBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// inTx runs fn in a transaction on db (BEGIN IMMEDIATE on the writer) and
// commits it if fn returns nil.
func inTx(ctx context.Context, db txBeginner, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
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

// Close closes both connection pools. Calling it again returns the first
// result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.stmts.close(), s.reader.Close(), s.writer.Close())
	})
	return s.closeErr
}

// stamp returns t, or now when t is zero, in the form every time is kept.
func (s *Store) stamp(t time.Time) time.Time {
	if t.IsZero() {
		t = s.now()
	}
	return normTime(t)
}

func normTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func formatTime(t time.Time) string { return normTime(t).Format(timeFormat) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(timeFormat, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

const sandboxColumns = `id, account_id, name, image, state, cpus, memory_bytes, parent_id,
	current_checkpoint, source_checkpoint, auto_checkpoint_seconds, resume_checkpoint, created_at, updated_at,
	restart_policy, crash_reason, crashed_at, oom_process, oom_at,
	` + insideColumns + `, disk_bytes, network_mode, network_rules, settings, host_id`

// errOrphanCheckpoints is returned by CreateSandbox's transaction when
// checkpoints of a deleted sandbox carry the new sandbox's id.
var errOrphanCheckpoints = errors.New("checkpoints of a deleted sandbox carry this id")

// CreateSandbox implements metadata.Store.
func (s *Store) CreateSandbox(ctx context.Context, sb metadata.Sandbox) error {
	if err := sb.Validate(); err != nil {
		return fmt.Errorf("metadata: create sandbox: %w", err)
	}
	autoSeconds, _ := metadata.AutoCheckpointSeconds(sb.AutoCheckpoint) // checked by Validate
	sb.CreatedAt = s.stamp(sb.CreatedAt)
	if sb.Restart == "" {
		sb.Restart = metadata.RestartOnFailure
	}
	if sb.UpdatedAt.IsZero() {
		sb.UpdatedAt = sb.CreatedAt
	}
	mode, rules, err := sb.Network.Columns()
	if err != nil {
		return fmt.Errorf("metadata: create sandbox: %w", err)
	}
	settings, err := sb.Settings.Column()
	if err != nil {
		return fmt.Errorf("metadata: create sandbox: %w", err)
	}
	err = inTx(ctx, s.writer, func(tx *sql.Tx) error {
		// A sandbox id is used once: a new sandbox with the id of a deleted
		// one would inherit its checkpoints (and its v-numbers again).
		var orphans bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE sandbox_id = ?)`,
			sb.ID).Scan(&orphans); err != nil {
			return err
		}
		if orphans {
			return errOrphanCheckpoints
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, `+insidePlaceholders+`, ?, ?, ?, ?, ?)`,
			append([]any{sb.ID, sb.AccountID, sb.Name, sb.Image, string(sb.State), sb.CPUs, sb.MemoryBytes, nullable(sb.ParentID),
				nullable(sb.CurrentCheckpoint), nullable(sb.SourceCheckpoint), autoSeconds, nullable(sb.ResumeCheckpoint),
				formatTime(sb.CreatedAt), formatTime(sb.UpdatedAt),
				string(sb.Restart), nullable(sb.LastCrash.What), nullableTime(sb.LastCrash.At),
				nullable(sb.LastOOMKill.What), nullableTime(sb.LastOOMKill.At)}, append(insideValues(sb.Inside), sb.DiskBytes, mode, rules, settings, sb.HostID)...)...)
		return err
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, errOrphanCheckpoints) {
		return fmt.Errorf("metadata: create sandbox: id %s is used by checkpoints of a deleted sandbox: %w", sb.ID, metadata.ErrConflict)
	}
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("metadata: create sandbox: id %s: %w", sb.ID, metadata.ErrConflict)
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return fmt.Errorf("metadata: create sandbox: name %q in account %d: %w", sb.Name, sb.AccountID, metadata.ErrConflict)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("metadata: create sandbox %q: account %d: %w", sb.Name, sb.AccountID, metadata.ErrNotFound)
	}
	return fmt.Errorf("metadata: create sandbox %q: %w", sb.Name, err)
}

// nullable maps "" to NULL, for optional references.
func nullable(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

// sqliteCode returns the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// SandboxByName implements metadata.Store.
func (s *Store) SandboxByName(ctx context.Context, accountID int64, name string) (metadata.Sandbox, error) {
	sb, err := s.oneSandbox(ctx, `WHERE account_id = ? AND name = ?`, accountID, name)
	if err != nil {
		return metadata.Sandbox{}, fmt.Errorf("metadata: sandbox %q in account %d: %w", name, accountID, err)
	}
	return sb, nil
}

// SandboxByID implements metadata.Store.
func (s *Store) SandboxByID(ctx context.Context, id string) (metadata.Sandbox, error) {
	sb, err := s.oneSandbox(ctx, `WHERE id = ?`, id)
	if err != nil {
		return metadata.Sandbox{}, fmt.Errorf("metadata: sandbox %s: %w", id, err)
	}
	return sb, nil
}

func (s *Store) oneSandbox(ctx context.Context, where string, args ...any) (metadata.Sandbox, error) {
	sbs, err := s.sandboxes(ctx, where, args...)
	if err != nil {
		return metadata.Sandbox{}, err
	}
	if len(sbs) == 0 {
		return metadata.Sandbox{}, metadata.ErrNotFound
	}
	return sbs[0], nil
}

// ListSandboxes implements metadata.Store.
func (s *Store) ListSandboxes(ctx context.Context, accountID int64, f metadata.SandboxFilter) ([]metadata.Sandbox, error) {
	where, args := `WHERE account_id = ?`, []any{accountID}
	if f.ParentID != "" {
		where, args = where+` AND parent_id = ?`, append(args, f.ParentID)
	}
	sbs, err := s.sandboxes(ctx, where+` ORDER BY name`, args...)
	if err != nil {
		return nil, fmt.Errorf("metadata: list sandboxes of account %d: %w", accountID, err)
	}
	return sbs, nil
}

// AllSandboxes implements metadata.Store.
func (s *Store) AllSandboxes(ctx context.Context) ([]metadata.Sandbox, error) {
	sbs, err := s.sandboxes(ctx, `ORDER BY account_id, name`)
	if err != nil {
		return nil, fmt.Errorf("metadata: list all sandboxes: %w", err)
	}
	return sbs, nil
}

// sandboxes runs SELECT … FROM sandboxes with the rest of the query given.
// The result is empty, never nil.
func (s *Store) sandboxes(ctx context.Context, rest string, args ...any) ([]metadata.Sandbox, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes `+rest, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []metadata.Sandbox{}
	for rows.Next() {
		var (
			sb                         metadata.Sandbox
			state                      string
			parent, cur, src, resume   sql.NullString
			autoSeconds                int64
			created, updated           string
			restart                    string
			crash, crashAt, oom, oomAt sql.NullString
			rules, settings            string
		)
		if err := rows.Scan(append([]any{&sb.ID, &sb.AccountID, &sb.Name, &sb.Image, &state, &sb.CPUs, &sb.MemoryBytes,
			&parent, &cur, &src, &autoSeconds, &resume, &created, &updated,
			&restart, &crash, &crashAt, &oom, &oomAt}, append(insideDests(&sb.Inside), &sb.DiskBytes, &sb.Network.Mode, &rules, &settings, &sb.HostID)...)...); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(rules), &sb.Network); err != nil {
			return nil, fmt.Errorf("sandbox %s: stored network rules: %w", sb.ID, err)
		}
		if sb.Settings, err = metadata.ReadSettings(settings); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", sb.ID, err)
		}
		sb.Restart = metadata.RestartPolicy(restart)
		if sb.LastCrash, err = scanEvent(crash, crashAt); err != nil {
			return nil, err
		}
		if sb.LastOOMKill, err = scanEvent(oom, oomAt); err != nil {
			return nil, err
		}
		sb.State, sb.ParentID = metadata.SandboxState(state), parent.String
		sb.CurrentCheckpoint, sb.SourceCheckpoint, sb.ResumeCheckpoint = cur.String, src.String, resume.String
		if autoSeconds <= 0 || autoSeconds > math.MaxInt64/int64(time.Second) {
			return nil, fmt.Errorf("sandbox %s: stored automatic checkpoint interval %d s is out of range", sb.ID, autoSeconds)
		}
		sb.AutoCheckpoint = time.Duration(autoSeconds) * time.Second
		if sb.CreatedAt, err = parseTime(created); err != nil {
			return nil, err
		}
		if sb.UpdatedAt, err = parseTime(updated); err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

// SetSandboxState implements metadata.Store.
func (s *Store) SetSandboxState(ctx context.Context, id string, st metadata.SandboxState) error {
	if !st.Valid() {
		return fmt.Errorf("metadata: set state of sandbox %s: unknown state %q", id, st)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE sandboxes SET state = ?, updated_at = ? WHERE id = ?`,
		string(st), formatTime(s.now()), id)
	if err != nil {
		return fmt.Errorf("metadata: set state of sandbox %s: %w", id, err)
	}
	return oneRow(res, "metadata: set state of sandbox "+id)
}

// SetCurrentCheckpoint implements metadata.Store.
func (s *Store) SetCurrentCheckpoint(ctx context.Context, sandboxID, checkpointID string) error {
	what := fmt.Sprintf("metadata: set current checkpoint of sandbox %s to %q", sandboxID, checkpointID)
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		var account int64
		err := tx.QueryRowContext(ctx, `SELECT account_id FROM sandboxes WHERE id = ?`, sandboxID).Scan(&account)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox: %w", metadata.ErrNotFound)
		} else if err != nil {
			return err
		}
		if checkpointID != "" {
			var found bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE id = ? AND account_id = ?)`,
				checkpointID, account).Scan(&found); err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("no checkpoint %s in account %d: %w", checkpointID, account, metadata.ErrNotFound)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET current_checkpoint = ?, updated_at = ? WHERE id = ?`,
			nullable(checkpointID), formatTime(s.now()), sandboxID)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SetAutoCheckpoint implements metadata.Store.
func (s *Store) SetAutoCheckpoint(ctx context.Context, sandboxID string, every time.Duration) error {
	what := fmt.Sprintf("metadata: set automatic checkpoint interval of sandbox %s to %v", sandboxID, every)
	seconds, err := metadata.AutoCheckpointSeconds(every)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE sandboxes SET auto_checkpoint_seconds = ?, updated_at = ? WHERE id = ?`,
		seconds, formatTime(s.now()), sandboxID)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// SetResumeCheckpoint implements metadata.Store.
func (s *Store) SetResumeCheckpoint(ctx context.Context, sandboxID, checkpointID string) error {
	what := fmt.Sprintf("metadata: set resume checkpoint of sandbox %s to %q", sandboxID, checkpointID)
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		var account int64
		err := tx.QueryRowContext(ctx, `SELECT account_id FROM sandboxes WHERE id = ?`, sandboxID).Scan(&account)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox: %w", metadata.ErrNotFound)
		} else if err != nil {
			return err
		}
		if checkpointID != "" {
			// The account too: an automatic checkpoint needs no sandbox
			// row, so one of another account could carry this sandbox id.
			var found bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints
				WHERE id = ? AND sandbox_id = ? AND account_id = ?)`,
				checkpointID, sandboxID, account).Scan(&found); err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("no checkpoint %s of the sandbox: %w", checkpointID, metadata.ErrNotFound)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET resume_checkpoint = ?, updated_at = ? WHERE id = ?`,
			nullable(checkpointID), formatTime(s.now()), sandboxID)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SetSandboxCrashed implements metadata.Store.
func (s *Store) SetSandboxCrashed(ctx context.Context, id, reason string, at time.Time) error {
	what := "metadata: mark sandbox " + id + " crashed"
	res, err := s.writer.ExecContext(ctx, `UPDATE sandboxes SET state = ?, crash_reason = ?, crashed_at = ?, updated_at = ? WHERE id = ?`,
		string(metadata.SandboxCrashed), reason, formatTime(s.stamp(at)), formatTime(s.now()), id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// SetRestartPolicy implements metadata.Store.
func (s *Store) SetRestartPolicy(ctx context.Context, id string, p metadata.RestartPolicy) error {
	what := fmt.Sprintf("metadata: set restart policy of sandbox %s to %q", id, p)
	if !p.Valid() {
		return fmt.Errorf("%s: unknown policy", what)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE sandboxes SET restart_policy = ?, updated_at = ? WHERE id = ?`,
		string(p), formatTime(s.now()), id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// SetSandboxNetwork implements metadata.Store.
func (s *Store) SetSandboxNetwork(ctx context.Context, id string, n metadata.NetworkSettings) error {
	what := "metadata: set network of sandbox " + id
	mode, rules, err := n.Columns()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE sandboxes SET network_mode = ?, network_rules = ?, updated_at = ? WHERE id = ?`,
		mode, rules, formatTime(s.now()), id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// SetSandboxSettings implements metadata.Store.
func (s *Store) SetSandboxSettings(ctx context.Context, id string, set metadata.SandboxSettings) error {
	what := "metadata: set settings of sandbox " + id
	v, err := set.Column()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE sandboxes SET settings = ?, updated_at = ? WHERE id = ?`,
		v, formatTime(s.now()), id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// errEncode: a value could not be stored.
var errEncode = errors.New("cannot encode")

// SetLastOOMKill implements metadata.Store.
func (s *Store) SetLastOOMKill(ctx context.Context, id, process string, at time.Time) error {
	what := "metadata: record an OOM kill in sandbox " + id
	res, err := s.writer.ExecContext(ctx, `UPDATE sandboxes SET oom_process = ?, oom_at = ? WHERE id = ?`,
		process, formatTime(s.stamp(at)), id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// nullableTime maps the zero time to NULL.
func nullableTime(t time.Time) sql.NullString {
	if t.IsZero() {
		return sql.NullString{}
	}
	return sql.NullString{String: formatTime(t), Valid: true}
}

// scanEvent reads an event kept as two nullable columns.
func scanEvent(what, at sql.NullString) (metadata.Event, error) {
	ev := metadata.Event{What: what.String}
	if at.Valid {
		t, err := parseTime(at.String)
		if err != nil {
			return ev, err
		}
		ev.At = t
	}
	return ev, nil
}

// DeleteSandbox implements metadata.Store.
func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	res, err := s.writer.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("metadata: delete sandbox %s: %w", id, err)
	}
	return oneRow(res, "metadata: delete sandbox "+id)
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
