package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// The audit log (migration 0017).

// auditSelect reads entries with their account's name, in the order of
// scanAudit.
const auditSelect = `SELECT e.id, e.at, COALESCE(e.account_id, 0), COALESCE(a.name, ''), e.token_id, e.token_name,
	e.remote, e.action, e.target, e.outcome, e.detail
	FROM audit_log e LEFT JOIN accounts a ON a.id = e.account_id `

// AppendAudit implements metadata.Store.
func (s *Store) AppendAudit(ctx context.Context, e metadata.AuditEntry) (metadata.AuditEntry, error) {
	what := fmt.Sprintf("metadata: audit %s %q", e.Action, e.Target)
	if err := e.Validate(); err != nil {
		return metadata.AuditEntry{}, fmt.Errorf("%s: %w", what, err)
	}
	e.At = s.stamp(e.At)
	var out metadata.AuditEntry
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var account sql.NullInt64
		if e.AccountID != 0 {
			var found bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)`, e.AccountID).Scan(&found); err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("account %d: %w", e.AccountID, metadata.ErrNotFound)
			}
			account = sql.NullInt64{Int64: e.AccountID, Valid: true}
		}
		var id int64
		err := tx.QueryRowContext(ctx, `INSERT INTO audit_log
			(at, account_id, token_id, token_name, remote, action, target, outcome, detail)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
			e.At, account, e.TokenID, e.TokenName, e.Remote, e.Action, e.Target, e.Outcome, e.Detail).Scan(&id)
		if constraint, _ := violated(err); constraint != "" { // the account was deleted meanwhile
			return fmt.Errorf("account %d: %w", e.AccountID, metadata.ErrNotFound)
		} else if err != nil {
			return err
		}
		out, err = scanAudit(tx.QueryRowContext(ctx, auditSelect+`WHERE e.id = $1`, id))
		return err
	})
	if err != nil {
		return metadata.AuditEntry{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Audit implements metadata.Store. Targets are COLLATE "C", so the prefix
// is compared byte-wise.
func (s *Store) Audit(ctx context.Context, f metadata.AuditFilter) ([]metadata.AuditEntry, error) {
	if f.Limit < 0 {
		return nil, fmt.Errorf("metadata: audit: negative limit %d", f.Limit)
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.AccountID != 0 {
		where = append(where, "e.account_id = "+arg(f.AccountID))
	}
	if !f.Since.IsZero() {
		where = append(where, "e.at >= "+arg(normTime(f.Since)))
	}
	if f.Target != "" {
		where = append(where, fmt.Sprintf("(e.target = %s OR starts_with(e.target, %s))", arg(f.Target), arg(f.Target+"/")))
	}
	q := auditSelect
	if len(where) > 0 {
		q += "WHERE " + strings.Join(where, " AND ") + " "
	}
	q += "ORDER BY e.at DESC, e.id DESC"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("metadata: audit: %w", err)
	}
	defer rows.Close()
	out := []metadata.AuditEntry{}
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("metadata: audit: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("metadata: audit: %w", err)
	}
	// Newest first from the query (for the limit): oldest first out.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// PruneAudit implements metadata.Store.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM audit_log WHERE at < $1`, normTime(before))
	if err != nil {
		return 0, fmt.Errorf("metadata: prune audit: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("metadata: prune audit: %w", err)
	}
	return n, nil
}

// scanAudit reads one row of auditSelect; no row is ErrNotFound.
func scanAudit(row scanner) (metadata.AuditEntry, error) {
	var (
		e  metadata.AuditEntry
		at time.Time
	)
	err := row.Scan(&e.ID, &at, &e.AccountID, &e.Account, &e.TokenID, &e.TokenName, &e.Remote, &e.Action, &e.Target, &e.Outcome, &e.Detail)
	if errors.Is(err, sql.ErrNoRows) {
		return metadata.AuditEntry{}, metadata.ErrNotFound
	} else if err != nil {
		return metadata.AuditEntry{}, err
	}
	e.At = at.UTC()
	return e, nil
}
