package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Leases (migration 0007). Every write commits with leaseTx: a lease need
// not survive a power cut (see metadata.Store).

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
		expires, created time.Time
	)
	err := row.Scan(&l.serial, &l.ID, &l.Resource, &l.Exclusive, &l.Owner, &l.Purpose, &l.Revoked, &expires, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return storedLease{}, metadata.ErrNotFound
	} else if err != nil {
		return storedLease{}, err
	}
	l.Expires, l.CreatedAt = expires.UTC(), created.UTC()
	return l, nil
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
// one serializable transaction: of two acquires of one resource that would
// conflict, whichever host they come from, one commits and the other runs
// again and finds the first.
func (s *Store) AcquireLease(ctx context.Context, l metadata.Lease) (metadata.Lease, error) {
	if err := l.Validate(); err != nil {
		return metadata.Lease{}, fmt.Errorf("metadata: acquire lease: %w", err)
	}
	what := fmt.Sprintf("metadata: acquire lease %s of %s", l.ID, l.Resource)
	now := s.nowTime()
	l.Expires = normTime(l.Expires)
	if !l.Expires.After(now) {
		return metadata.Lease{}, fmt.Errorf("%s: it expires at %v, not after now (%v)", what, l.Expires, now)
	}
	l.CreatedAt = s.stamp(l.CreatedAt)
	var held storedLease
	err := s.leaseTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE resource = $1 AND expires_at <= $2`,
			l.Resource, now); err != nil {
			return fmt.Errorf("delete expired leases: %w", err)
		}
		var err error
		held, err = scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases
			WHERE resource = $1 AND (exclusive OR $2) ORDER BY created_at, serial LIMIT 1`, l.Resource, l.Exclusive))
		if err == nil {
			return errLeaseHeld
		} else if !errors.Is(err, metadata.ErrNotFound) {
			return err
		}
		// The id, before the INSERT: a failed statement would abort the
		// transaction, and the lease that has it is to be returned.
		taken, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE id = $1`, l.ID))
		if err == nil {
			held = taken
			return fmt.Errorf("id taken by a lease of %s: %w", held.Resource, metadata.ErrConflict)
		} else if !errors.Is(err, metadata.ErrNotFound) {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO leases (id, resource, exclusive, owner, purpose, revoked, expires_at, created_at)
			VALUES ($1, $2, $3, $4, $5, FALSE, $6, $7)`,
			l.ID, l.Resource, l.Exclusive, l.Owner, l.Purpose, l.Expires, l.CreatedAt)
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
	now := s.nowTime()
	expires = normTime(expires)
	if !expires.After(now) {
		return fmt.Errorf("%s: new expiry %v is not after now (%v)", what, expires, now)
	}
	err := s.leaseTx(ctx, func(tx *sql.Tx) error {
		var (
			revoked bool
			until   time.Time
		)
		err := tx.QueryRowContext(ctx, `SELECT revoked, expires_at FROM leases WHERE id = $1`, id).Scan(&revoked, &until)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return metadata.ErrNotFound
		case err != nil:
			return err
		case !until.After(now):
			return fmt.Errorf("expired at %v: %w", until.UTC(), metadata.ErrNotFound)
		case revoked:
			return metadata.ErrRevoked
		}
		_, err = tx.ExecContext(ctx, `UPDATE leases SET expires_at = $1 WHERE id = $2`, expires, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// ReleaseLease implements metadata.Store.
func (s *Store) ReleaseLease(ctx context.Context, id string) error {
	err := s.leaseTx(ctx, func(tx *sql.Tx) error {
		return execOneTx(ctx, tx, `DELETE FROM leases WHERE id = $1`, id)
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
		rows, err := tx.QueryContext(ctx, `UPDATE leases SET revoked = TRUE
			WHERE resource = $1 AND expires_at > $2 AND ($3 = '' OR purpose = $3)
			RETURNING `+leaseColumns, resource, s.nowTime(), purpose)
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
	where, args := `WHERE expires_at > $1`, []any{s.nowTime()}
	if resource != "" {
		where, args = where+` AND resource = $2`, append(args, resource)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases `+where+` ORDER BY created_at, serial`, args...)
	if err != nil {
		return nil, fmt.Errorf("metadata: leases of %q: %w", resource, err)
	}
	out, err := scanLeases(rows)
	if err != nil {
		return nil, fmt.Errorf("metadata: leases of %q: %w", resource, err)
	}
	return out, nil
}

// ReclaimLeases implements metadata.Store. Owners are COLLATE "C", so
// starts_with compares the prefix byte-wise, as strings.HasPrefix would.
func (s *Store) ReclaimLeases(ctx context.Context, ownerPrefix string) ([]metadata.Lease, error) {
	var out []metadata.Lease
	err := s.leaseTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `DELETE FROM leases
			WHERE expires_at <= $1 OR ($2 <> '' AND starts_with(owner, $2))
			RETURNING `+leaseColumns, s.nowTime(), ownerPrefix)
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
