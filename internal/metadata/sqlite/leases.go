package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

const leaseColumns = `serial, id, resource, exclusive, owner, purpose, revoked, expires_at, created_at`

// storedLease is a lease with its serial, the order of acquisition.
type storedLease struct {
	metadata.Lease
	serial int64
}

// scanLease reads one row of leaseColumns; no row is ErrNotFound.
func scanLease(row scanner) (storedLease, error) {
	var (
		l                storedLease
		expires, created string
	)
	err := row.Scan(&l.serial, &l.ID, &l.Resource, &l.Exclusive, &l.Owner, &l.Purpose, &l.Revoked, &expires, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return storedLease{}, metadata.ErrNotFound
	} else if err != nil {
		return storedLease{}, err
	}
	if l.Expires, err = parseTime(expires); err != nil {
		return storedLease{}, err
	}
	l.CreatedAt, err = parseTime(created)
	return l, err
}

// scanLeases reads every row of leaseColumns and returns the leases oldest
// first (CreatedAt, then serial): RETURNING gives rows in no set order.
func scanLeases(rows *sql.Rows) ([]metadata.Lease, error) {
	defer rows.Close()
	var all []storedLease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, err
		}
		all = append(all, l)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b storedLease) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.serial, b.serial))
	})
	out := make([]metadata.Lease, len(all))
	for i, l := range all {
		out[i] = l.Lease
	}
	return out, nil
}

// errLeaseHeld ends AcquireLease's transaction when a live lease conflicts.
var errLeaseHeld = errors.New("held")

// AcquireLease implements metadata.Store. The expired leases of the
// resource are deleted, the conflict looked for and the lease inserted in
// one IMMEDIATE transaction: no other writer, in this process or another,
// can take the resource in between.
func (s *Store) AcquireLease(ctx context.Context, l metadata.Lease) (metadata.Lease, error) {
	return s.acquireLease(ctx, l, s.leaseTx)
}

// txRunner runs fn in a write transaction: s.leaseTx, or inTx on the
// writer (at synchronous=FULL) for BenchmarkLeaseAcquireRelease to compare
// with.
type txRunner func(ctx context.Context, fn func(*sql.Tx) error) error

func (s *Store) acquireLease(ctx context.Context, l metadata.Lease, inLeaseTx txRunner) (metadata.Lease, error) {
	if err := l.Validate(); err != nil {
		return metadata.Lease{}, fmt.Errorf("metadata: acquire lease: %w", err)
	}
	what := fmt.Sprintf("metadata: acquire lease %s of %s", l.ID, l.Resource)
	now := normTime(s.now())
	l.Expires = normTime(l.Expires)
	if !l.Expires.After(now) {
		return metadata.Lease{}, fmt.Errorf("%s: it expires at %v, not after now (%v)", what, l.Expires, now)
	}
	if l.CreatedAt.IsZero() {
		l.CreatedAt = now
	}
	l.CreatedAt = normTime(l.CreatedAt)
	var held storedLease
	err := inLeaseTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.StmtContext(ctx, s.stmts.deleteExpired).ExecContext(ctx,
			l.Resource, formatTime(now)); err != nil {
			return fmt.Errorf("delete expired leases: %w", err)
		}
		var err error
		held, err = scanLease(tx.StmtContext(ctx, s.stmts.conflict).QueryRowContext(ctx, l.Resource, l.Exclusive))
		if err == nil {
			return errLeaseHeld
		} else if !errors.Is(err, metadata.ErrNotFound) {
			return err
		}
		_, err = tx.StmtContext(ctx, s.stmts.insert).ExecContext(ctx,
			l.ID, l.Resource, l.Exclusive, l.Owner, l.Purpose, formatTime(l.Expires), formatTime(l.CreatedAt))
		if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
			if held, err = scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE id = ?`, l.ID)); err != nil {
				return err
			}
			return fmt.Errorf("id taken by a lease of %s: %w", held.Resource, metadata.ErrConflict)
		}
		return err
	})
	switch {
	case errors.Is(err, errLeaseHeld):
		kind := "shared"
		if held.Exclusive {
			kind = "exclusive"
		}
		return held.Lease, fmt.Errorf("%s: held by %s (%s lease %s for %q until %v): %w",
			what, held.Owner, kind, held.ID, held.Purpose, held.Expires, metadata.ErrConflict)
	case errors.Is(err, metadata.ErrConflict):
		return held.Lease, fmt.Errorf("%s: %w", what, err)
	case err != nil:
		return metadata.Lease{}, fmt.Errorf("%s: %w", what, err)
	}
	return l, nil
}

// RenewLease implements metadata.Store.
func (s *Store) RenewLease(ctx context.Context, id string, expires time.Time) error {
	what := "metadata: renew lease " + id
	now := normTime(s.now())
	expires = normTime(expires)
	if !expires.After(now) {
		return fmt.Errorf("%s: new expiry %v is not after now (%v)", what, expires, now)
	}
	err := s.leaseTx(ctx, func(tx *sql.Tx) error {
		var (
			revoked bool
			until   string
		)
		err := tx.QueryRowContext(ctx, `SELECT revoked, expires_at FROM leases WHERE id = ?`, id).Scan(&revoked, &until)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return metadata.ErrNotFound
		case err != nil:
			return err
		case until <= formatTime(now):
			return fmt.Errorf("expired at %s: %w", until, metadata.ErrNotFound)
		case revoked:
			return metadata.ErrRevoked
		}
		_, err = tx.ExecContext(ctx, `UPDATE leases SET expires_at = ? WHERE id = ?`, formatTime(expires), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ReleaseLease implements metadata.Store.
func (s *Store) ReleaseLease(ctx context.Context, id string) error {
	return s.releaseLease(ctx, id, s.leaseTx)
}

func (s *Store) releaseLease(ctx context.Context, id string, inLeaseTx txRunner) error {
	err := inLeaseTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, s.stmts.release).ExecContext(ctx, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return metadata.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("metadata: release lease %s: %w", id, err)
	}
	return nil
}

// RevokeLeases implements metadata.Store.
func (s *Store) RevokeLeases(ctx context.Context, resource, purpose string) ([]metadata.Lease, error) {
	what := fmt.Sprintf("metadata: revoke leases of %s for %q", resource, purpose)
	if resource == "" {
		return nil, fmt.Errorf("%s: empty resource", what)
	}
	var out []metadata.Lease
	err := s.leaseTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE leases SET revoked = 1
			WHERE resource = ?1 AND expires_at > ?2 AND (?3 = '' OR purpose = ?3)
			RETURNING `+leaseColumns, resource, formatTime(s.now()), purpose)
		if err != nil {
			return err
		}
		out, err = scanLeases(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Leases implements metadata.Store.
func (s *Store) Leases(ctx context.Context, resource string) ([]metadata.Lease, error) {
	where, args := `WHERE expires_at > ?`, []any{formatTime(s.now())}
	if resource != "" {
		where, args = where+` AND resource = ?`, append(args, resource)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases `+where+` ORDER BY created_at, serial`, args...)
	if err != nil {
		return nil, fmt.Errorf("metadata: leases of %q: %w", resource, err)
	}
	out, err := scanLeases(rows)
	if err != nil {
		return nil, fmt.Errorf("metadata: leases of %q: %w", resource, err)
	}
	return out, nil
}

// ReclaimLeases implements metadata.Store. The owner prefix is compared
// as bytes (BLOB substr and length count bytes, TEXT ones characters), as
// strings.HasPrefix would.
func (s *Store) ReclaimLeases(ctx context.Context, ownerPrefix string) ([]metadata.Lease, error) {
	var out []metadata.Lease
	err := s.leaseTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `DELETE FROM leases
			WHERE expires_at <= ?1
			   OR (?2 != '' AND substr(CAST(owner AS BLOB), 1, length(CAST(?2 AS BLOB))) = CAST(?2 AS BLOB))
			RETURNING `+leaseColumns, formatTime(s.now()), ownerPrefix)
		if err != nil {
			return err
		}
		out, err = scanLeases(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: reclaim leases (owner prefix %q): %w", ownerPrefix, err)
	}
	return out, nil
}

// leaseTx runs fn in a transaction of the writer, as inTx does, but
// commits it with synchronous=NORMAL instead of FULL: without the fsync of
// the WAL. Every checkpoint takes and releases a lease; on this project's
// test machine (2 cores, ext4 on a virtual disk) the pair took 1.1 to 1.9
// ms at FULL, and 0.2 to 0.6 ms at NORMAL, about 0.3 ms of it CPU time
// (BenchmarkLeaseAcquireRelease, both in one run). A lease write
// need not survive a power cut or kernel crash (see metadata.Store): its
// holder dies with the host. It does survive the process being killed (the
// WAL is written before COMMIT returns, to the page cache), and since the
// WAL is appended to in commit order and every FULL commit fsyncs all of
// it, a crash can only lose the lease commits made after the last FULL
// one.
//
// synchronous is a setting of the connection, and the writer pool has one
// connection, which every write uses in turn: leaseTx takes it for itself
// (a *sql.Conn) from before the PRAGMA that lowers the setting until after
// the one that puts it back, so no other write can run at NORMAL in
// between. If putting it back fails (SQLite refuses to change it inside a
// transaction, and a transaction whose ctx was cancelled at Commit is
// rolled back by database/sql in the background), the connection is
// thrown away rather than returned to the pool; the pool's next
// connection starts at FULL from the DSN. That is no error of leaseTx's:
// the lease write itself committed, or did not, as its result says.
func (s *Store) leaseTx(ctx context.Context, fn func(*sql.Tx) error) error {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		// Not under ctx: a cancelled ctx must not leave the connection at
		// NORMAL.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return fmt.Errorf("synchronous=NORMAL: %w", err)
	}
	return inTx(ctx, conn, fn)
}

// leaseStmts are the statements of AcquireLease and ReleaseLease, prepared
// once on the writer: every checkpoint runs them, and parsing them anew
// each time was about a third of what the pair cost in CPU.
// database/sql keeps each prepared on the writer's connection (and
// prepares it again should that connection be replaced); tx.StmtContext
// uses it in a transaction of that connection.
type leaseStmts struct{ deleteExpired, conflict, insert, release *sql.Stmt }

func prepareLeaseStmts(ctx context.Context, db *sql.DB) (leaseStmts, error) {
	var st leaseStmts
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&st.deleteExpired, `DELETE FROM leases WHERE resource = ? AND expires_at <= ?`},
		{&st.conflict, `SELECT ` + leaseColumns + ` FROM leases
			WHERE resource = ? AND (exclusive = 1 OR ?) ORDER BY created_at, serial LIMIT 1`},
		{&st.insert, `INSERT INTO leases (id, resource, exclusive, owner, purpose, revoked, expires_at, created_at)
			VALUES (?, ?, ?, ?, ?, 0, ?, ?)`},
		{&st.release, `DELETE FROM leases WHERE id = ?`},
	} {
		var err error
		if *p.dst, err = db.PrepareContext(ctx, p.sql); err != nil {
			st.close()
			return leaseStmts{}, fmt.Errorf("prepare the lease statements: %w", err)
		}
	}
	return st, nil
}

func (st leaseStmts) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{st.deleteExpired, st.conflict, st.insert, st.release} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}
