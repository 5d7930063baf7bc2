package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// API tokens (migration 0017).

// tokenSelect reads tokens with their account's name, in the order of
// scanToken.
const tokenSelect = `SELECT t.id, t.account_id, a.name, t.name, t.role, t.secret_hash,
	t.created_at, t.expires_at, t.revoked_at, t.last_used_at
	FROM api_tokens t JOIN accounts a ON a.id = t.account_id `

// CreateToken implements metadata.Store.
func (s *Store) CreateToken(ctx context.Context, t metadata.Token) (metadata.Token, error) {
	what := fmt.Sprintf("metadata: create token %s %q", t.ID, t.Name)
	if err := t.Validate(); err != nil {
		return metadata.Token{}, fmt.Errorf("%s: %w", what, err)
	}
	t.CreatedAt = s.stamp(t.CreatedAt)
	var out metadata.Token
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		var found bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = ?)`, t.AccountID).Scan(&found); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("account %d: %w", t.AccountID, metadata.ErrNotFound)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO api_tokens
			(id, account_id, name, role, secret_hash, created_at, expires_at, revoked_at, last_used_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.AccountID, t.Name, t.Role, t.SecretHash, formatTime(t.CreatedAt),
			nullableTime(t.ExpiresAt), nullableTime(t.RevokedAt), nullableTime(t.LastUsedAt))
		switch sqliteCode(err) {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("id: %w", metadata.ErrConflict)
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return fmt.Errorf("name in account %d: %w", t.AccountID, metadata.ErrConflict)
		}
		if err != nil {
			return err
		}
		out, err = scanToken(tx.QueryRowContext(ctx, tokenSelect+`WHERE t.id = ?`, t.ID))
		return err
	})
	if err != nil {
		return metadata.Token{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Token implements metadata.Store.
func (s *Store) Token(ctx context.Context, id string) (metadata.Token, error) {
	t, err := scanToken(s.reader.QueryRowContext(ctx, tokenSelect+`WHERE t.id = ?`, id))
	if err != nil {
		return metadata.Token{}, fmt.Errorf("metadata: token %s: %w", id, err)
	}
	return t, nil
}

// Tokens implements metadata.Store.
func (s *Store) Tokens(ctx context.Context, accountID int64) ([]metadata.Token, error) {
	out, err := func() ([]metadata.Token, error) {
		rows, err := s.reader.QueryContext(ctx, tokenSelect+`WHERE ? = 0 OR t.account_id = ? ORDER BY t.created_at, t.id`,
			accountID, accountID)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []metadata.Token{}
		for rows.Next() {
			t, err := scanToken(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		return out, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("metadata: tokens of account %d: %w", accountID, err)
	}
	return out, nil
}

// RevokeToken implements metadata.Store.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) (metadata.Token, error) {
	what := "metadata: revoke token " + id
	var out metadata.Token
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`,
			formatTime(s.stamp(at)), id)
		if err != nil {
			return err
		}
		if err := oneRow(res, "token"); err != nil {
			return err
		}
		out, err = scanToken(tx.QueryRowContext(ctx, tokenSelect+`WHERE t.id = ?`, id))
		return err
	})
	if err != nil {
		return metadata.Token{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// TokenUsed implements metadata.Store. The times compare as text: their
// fixed-width form sorts in time order.
func (s *Store) TokenUsed(ctx context.Context, id string, at time.Time) error {
	what := "metadata: record a use of token " + id
	used := formatTime(s.stamp(at))
	res, err := s.writer.ExecContext(ctx, `UPDATE api_tokens SET last_used_at =
		CASE WHEN last_used_at IS NULL OR last_used_at < ? THEN ? ELSE last_used_at END
		WHERE id = ?`, used, used, id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// scanToken reads one row of tokenSelect; no row is ErrNotFound.
func scanToken(row scanner) (metadata.Token, error) {
	var (
		t                        metadata.Token
		created                  string
		expires, revoked, usedAt sql.NullString
	)
	err := row.Scan(&t.ID, &t.AccountID, &t.Account, &t.Name, &t.Role, &t.SecretHash, &created, &expires, &revoked, &usedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return metadata.Token{}, metadata.ErrNotFound
	} else if err != nil {
		return metadata.Token{}, err
	}
	if t.CreatedAt, err = parseTime(created); err != nil {
		return metadata.Token{}, err
	}
	for _, f := range []struct {
		col sql.NullString
		dst *time.Time
	}{{expires, &t.ExpiresAt}, {revoked, &t.RevokedAt}, {usedAt, &t.LastUsedAt}} {
		if !f.col.Valid {
			continue
		}
		if *f.dst, err = parseTime(f.col.String); err != nil {
			return metadata.Token{}, err
		}
	}
	return t, nil
}
