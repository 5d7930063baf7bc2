package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Accounts (migrations 0001 and 0017).

const accountColumns = `id, name, disk_limit_bytes, created_at`

// EnsureAccount implements metadata.Store.
func (s *Store) EnsureAccount(ctx context.Context, name string) (metadata.Account, error) {
	if name == "" {
		return metadata.Account{}, errors.New("metadata: ensure account: empty name")
	}
	var a metadata.Account
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO accounts (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`,
			name, formatTime(s.now())); err != nil {
			return err
		}
		var err error
		a, err = scanAccount(tx.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM accounts WHERE name = ?`, name))
		return err
	})
	if err != nil {
		return metadata.Account{}, fmt.Errorf("metadata: ensure account %q: %w", name, err)
	}
	return a, nil
}

// AccountByName implements metadata.Store.
func (s *Store) AccountByName(ctx context.Context, name string) (metadata.Account, error) {
	a, err := scanAccount(s.reader.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM accounts WHERE name = ?`, name))
	if err != nil {
		return metadata.Account{}, fmt.Errorf("metadata: account %q: %w", name, err)
	}
	return a, nil
}

// ListAccounts implements metadata.Store.
func (s *Store) ListAccounts(ctx context.Context) ([]metadata.Account, error) {
	out, err := func() ([]metadata.Account, error) {
		rows, err := s.reader.QueryContext(ctx, `SELECT `+accountColumns+` FROM accounts ORDER BY id`)
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
	a, err := scanAccount(s.writer.QueryRowContext(ctx,
		`INSERT INTO accounts (name, disk_limit_bytes, created_at) VALUES (?, ?, ?) RETURNING `+accountColumns,
		name, diskLimit, formatTime(s.now())))
	if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
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
	a, err := scanAccount(s.writer.QueryRowContext(ctx,
		`UPDATE accounts SET disk_limit_bytes = ? WHERE name = ? RETURNING `+accountColumns, bytes, name))
	if err != nil {
		return metadata.Account{}, fmt.Errorf("%s: %w", what, err)
	}
	return a, nil
}

// DeleteAccount implements metadata.Store. What the account holds is
// counted and the rows that go with it deleted in one IMMEDIATE
// transaction, so nothing can be added to it in between. The foreign
// keys (on in every connection) delete its tokens and detach its audit
// entries.
func (s *Store) DeleteAccount(ctx context.Context, name string) error {
	what := fmt.Sprintf("metadata: delete account %q", name)
	if name == metadata.DefaultAccount {
		return fmt.Errorf("%s: the default account is never deleted", what)
	}
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE name = ?`, name).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return metadata.ErrNotFound
		} else if err != nil {
			return err
		}
		var sandboxes, checkpoints, offsite, running int
		if err := tx.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM sandboxes WHERE account_id = ?),
			(SELECT COUNT(*) FROM checkpoints WHERE account_id = ?),
			(SELECT COUNT(*) FROM offsite_deletes WHERE account_id = ?),
			(SELECT COUNT(*) FROM journal WHERE account_id = ? AND state = 'running')`,
			id, id, id, id).Scan(&sandboxes, &checkpoints, &offsite, &running); err != nil {
			return err
		}
		if held := metadata.Holdings(sandboxes, checkpoints, offsite, running); held != "" {
			return fmt.Errorf("it still holds %s: %w", held, metadata.ErrConflict)
		}
		for _, q := range []string{
			`DELETE FROM journal WHERE account_id = ?`,
			`DELETE FROM port_tokens WHERE account_id = ?`,
			`DELETE FROM accounts WHERE id = ?`,
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
		created string
	)
	if err := row.Scan(&a.ID, &a.Name, &a.DiskLimit, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return metadata.Account{}, metadata.ErrNotFound
		}
		return metadata.Account{}, err
	}
	var err error
	a.CreatedAt, err = parseTime(created)
	return a, err
}
