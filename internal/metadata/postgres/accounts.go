package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Accounts (migrations 0001 and 0017) and their API tokens (0017).

const accountColumns = `id, name, disk_limit_bytes, created_at`

// EnsureAccount implements metadata.Store. Of two transactions that insert
// the same new name at once, one fails to serialize and runs again, then
// finds the other's.
func (s *Store) EnsureAccount(ctx context.Context, name string) (metadata.Account, error) {
	if name == "" {
		return metadata.Account{}, errors.New("metadata: ensure account: empty name")
	}
	var a metadata.Account
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO accounts (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
			name, s.nowTime()); err != nil {
			return err
		}
		var err error
		a, err = scanAccount(tx.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM accounts WHERE name = $1`, name))
		return err
	})
	if err != nil {
		return metadata.Account{}, fmt.Errorf("metadata: ensure account %q: %w", name, err)
	}
	return a, nil
}

// AccountByName implements metadata.Store.
func (s *Store) AccountByName(ctx context.Context, name string) (metadata.Account, error) {
	a, err := scanAccount(s.db.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM accounts WHERE name = $1`, name))
	if err != nil {
		return metadata.Account{}, fmt.Errorf("metadata: account %q: %w", name, err)
	}
	return a, nil
}

// ListAccounts implements metadata.Store.
func (s *Store) ListAccounts(ctx context.Context) ([]metadata.Account, error) {
	out, err := func() ([]metadata.Account, error) {
		rows, err := s.db.QueryContext(ctx, `SELECT `+accountColumns+` FROM accounts ORDER BY id`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []metadata.Account{}
		for rows.Next() {
			a, err := scanAccount(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		return out, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("metadata: list accounts: %w", err)
	}
	return out, nil
}

// CreateAccount implements metadata.Store.
func (s *Store) CreateAccount(ctx context.Context, name string, diskLimit int64) (metadata.Account, error) {
	what := fmt.Sprintf("metadata: create account %q", name)
	if err := metadata.ValidateAccountName(name); err != nil {
		return metadata.Account{}, fmt.Errorf("%s: %w", what, err)
	}
	if diskLimit < 0 {
		return metadata.Account{}, fmt.Errorf("%s: negative disk limit %d", what, diskLimit)
	}
	var a metadata.Account
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = scanAccount(tx.QueryRowContext(ctx,
			`INSERT INTO accounts (name, disk_limit_bytes, created_at) VALUES ($1, $2, $3) RETURNING `+accountColumns,
			name, diskLimit, s.nowTime()))
		return err
	})
	if _, unique := violated(err); unique {
		return metadata.Account{}, fmt.Errorf("%s: name: %w", what, metadata.ErrConflict)
	}
	if err != nil {
		return metadata.Account{}, fmt.Errorf("%s: %w", what, err)
	}
	return a, nil
}

// SetAccountDiskLimit implements metadata.Store.
func (s *Store) SetAccountDiskLimit(ctx context.Context, name string, bytes int64) (metadata.Account, error) {
	what := fmt.Sprintf("metadata: set disk limit of account %q to %d", name, bytes)
	if bytes < 0 {
		return metadata.Account{}, fmt.Errorf("%s: negative limit", what)
	}
	var a metadata.Account
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		a, err = scanAccount(tx.QueryRowContext(ctx,
			`UPDATE accounts SET disk_limit_bytes = $1 WHERE name = $2 RETURNING `+accountColumns, bytes, name))
		return err
	})
	if err != nil {
		return metadata.Account{}, fmt.Errorf("%s: %w", what, err)
	}
	return a, nil
}

// DeleteAccount implements metadata.Store. What the account holds is
// counted and the rows that go with it deleted in one serializable
// transaction, so nothing added to it meanwhile can be lost: such a
// write and this transaction cannot both commit. The foreign keys delete
// its tokens and detach its audit entries.
func (s *Store) DeleteAccount(ctx context.Context, name string) error {
	what := fmt.Sprintf("metadata: delete account %q", name)
	if name == metadata.DefaultAccount {
		return fmt.Errorf("%s: the default account is never deleted", what)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE name = $1`, name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return metadata.ErrNotFound
		} else if err != nil {
			return err
		}
		var sandboxes, checkpoints, offsite, running int
		if err := tx.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM sandboxes WHERE account_id = $1),
			(SELECT COUNT(*) FROM checkpoints WHERE account_id = $1),
			(SELECT COUNT(*) FROM offsite_deletes WHERE account_id = $1),
			(SELECT COUNT(*) FROM journal WHERE account_id = $1 AND state = 'running')`,
			id).Scan(&sandboxes, &checkpoints, &offsite, &running); err != nil {
			return err
		}
		if held := metadata.Holdings(sandboxes, checkpoints, offsite, running); held != "" {
			return fmt.Errorf("it still holds %s: %w", held, metadata.ErrConflict)
		}
		for _, q := range []string{
			`DELETE FROM journal WHERE account_id = $1`,
			`DELETE FROM port_tokens WHERE account_id = $1`,
			`DELETE FROM accounts WHERE id = $1`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// scanAccount reads one row of accountColumns; no row is ErrNotFound.
func scanAccount(row scanner) (metadata.Account, error) {
	var (
		a       metadata.Account
		created time.Time
	)
	if err := row.Scan(&a.ID, &a.Name, &a.DiskLimit, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return metadata.Account{}, metadata.ErrNotFound
		}
		return metadata.Account{}, err
	}
	a.CreatedAt = created.UTC()
	return a, nil
}

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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var found bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)`, t.AccountID).Scan(&found); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("account %d: %w", t.AccountID, metadata.ErrNotFound)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO api_tokens
			(id, account_id, name, role, secret_hash, created_at, expires_at, revoked_at, last_used_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			t.ID, t.AccountID, t.Name, t.Role, t.SecretHash, t.CreatedAt,
			nullableTime(t.ExpiresAt), nullableTime(t.RevokedAt), nullableTime(t.LastUsedAt))
		switch constraint, unique := violated(err); {
		case unique && constraint == "api_tokens_pkey":
			return fmt.Errorf("id: %w", metadata.ErrConflict)
		case unique:
			return fmt.Errorf("name in account %d: %w", t.AccountID, metadata.ErrConflict)
		case constraint != "": // the account was deleted meanwhile
			return fmt.Errorf("account %d: %w", t.AccountID, metadata.ErrNotFound)
		}
		if err != nil {
			return err
		}
		out, err = scanToken(tx.QueryRowContext(ctx, tokenSelect+`WHERE t.id = $1`, t.ID))
		return err
	})
	if err != nil {
		return metadata.Token{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Token implements metadata.Store.
func (s *Store) Token(ctx context.Context, id string) (metadata.Token, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, tokenSelect+`WHERE t.id = $1`, id))
	if err != nil {
		return metadata.Token{}, fmt.Errorf("metadata: token %s: %w", id, err)
	}
	return t, nil
}

// Tokens implements metadata.Store.
func (s *Store) Tokens(ctx context.Context, accountID int64) ([]metadata.Token, error) {
	out, err := func() ([]metadata.Token, error) {
		rows, err := s.db.QueryContext(ctx, tokenSelect+`WHERE $1::bigint = 0 OR t.account_id = $1 ORDER BY t.created_at, t.id`,
			accountID)
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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := execOneTx(ctx, tx, `UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`,
			s.stamp(at), id); err != nil {
			return fmt.Errorf("token: %w", err)
		}
		var err error
		out, err = scanToken(tx.QueryRowContext(ctx, tokenSelect+`WHERE t.id = $1`, id))
		return err
	})
	if err != nil {
		return metadata.Token{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// TokenUsed implements metadata.Store.
func (s *Store) TokenUsed(ctx context.Context, id string, at time.Time) error {
	return s.execOne(ctx, "metadata: record a use of token "+id, `UPDATE api_tokens SET last_used_at =
		CASE WHEN last_used_at IS NULL OR last_used_at < $1 THEN $1 ELSE last_used_at END
		WHERE id = $2`, s.stamp(at), id)
}

// scanToken reads one row of tokenSelect; no row is ErrNotFound.
func scanToken(row scanner) (metadata.Token, error) {
	var (
		t                        metadata.Token
		created                  time.Time
		expires, revoked, usedAt sql.NullTime
	)
	err := row.Scan(&t.ID, &t.AccountID, &t.Account, &t.Name, &t.Role, &t.SecretHash, &created, &expires, &revoked, &usedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return metadata.Token{}, metadata.ErrNotFound
	} else if err != nil {
		return metadata.Token{}, err
	}
	t.CreatedAt = created.UTC()
	t.ExpiresAt, t.RevokedAt, t.LastUsedAt = readTime(expires), readTime(revoked), readTime(usedAt)
	return t, nil
}
