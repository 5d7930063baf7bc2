package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Published ports and port tokens (migration 0015).

// PublishPort implements metadata.Store.
func (s *Store) PublishPort(ctx context.Context, p metadata.PublishedPort) (metadata.PublishedPort, error) {
	what := fmt.Sprintf("metadata: publish port %d of sandbox %s", p.Port, p.SandboxID)
	if err := p.Validate(); err != nil {
		return metadata.PublishedPort{}, fmt.Errorf("%s: %w", what, err)
	}
	p.CreatedAt = s.stamp(p.CreatedAt)
	var out metadata.PublishedPort
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO published_ports (sandbox_id, port, public, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (sandbox_id, port) DO UPDATE SET public = excluded.public`,
			p.SandboxID, p.Port, p.Public, formatTime(p.CreatedAt)); err != nil {
			return err
		}
		var err error
		out, err = scanPort(tx.QueryRowContext(ctx, `SELECT sandbox_id, port, public, created_at FROM published_ports
			WHERE sandbox_id = ? AND port = ?`, p.SandboxID, p.Port))
		return err
	})
	if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return metadata.PublishedPort{}, fmt.Errorf("%s: sandbox: %w", what, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.PublishedPort{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// UnpublishPort implements metadata.Store.
func (s *Store) UnpublishPort(ctx context.Context, sandboxID string, port int) error {
	what := fmt.Sprintf("metadata: unpublish port %d of sandbox %s", port, sandboxID)
	res, err := s.writer.ExecContext(ctx, `DELETE FROM published_ports WHERE sandbox_id = ? AND port = ?`, sandboxID, port)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// Port implements metadata.Store.
func (s *Store) Port(ctx context.Context, sandboxID string, port int) (metadata.PublishedPort, error) {
	p, err := scanPort(s.reader.QueryRowContext(ctx, `SELECT sandbox_id, port, public, created_at FROM published_ports
		WHERE sandbox_id = ? AND port = ?`, sandboxID, port))
	if err != nil {
		return metadata.PublishedPort{}, fmt.Errorf("metadata: port %d of sandbox %s: %w", port, sandboxID, err)
	}
	return p, nil
}

// Ports implements metadata.Store.
func (s *Store) Ports(ctx context.Context, sandboxID string) ([]metadata.PublishedPort, error) {
	out, err := func() ([]metadata.PublishedPort, error) {
		rows, err := s.reader.QueryContext(ctx, `SELECT sandbox_id, port, public, created_at FROM published_ports
			WHERE sandbox_id = ? ORDER BY port`, sandboxID)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []metadata.PublishedPort{}
		for rows.Next() {
			p, err := scanPort(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("metadata: ports of sandbox %s: %w", sandboxID, err)
	}
	return out, nil
}

// CopyPorts implements metadata.Store.
func (s *Store) CopyPorts(ctx context.Context, fromID, toID string) error {
	what := fmt.Sprintf("metadata: copy the ports of sandbox %s to %s", fromID, toID)
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		var found bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sandboxes WHERE id = ?)`, toID).Scan(&found); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("sandbox %s: %w", toID, metadata.ErrNotFound)
		}
		// The SELECT has a WHERE clause, which SQLite's parser needs to
		// tell an upsert's ON CONFLICT from a join's ON.
		_, err := tx.ExecContext(ctx, `INSERT INTO published_ports (sandbox_id, port, public, created_at)
			SELECT ?, port, public, ? FROM published_ports WHERE sandbox_id = ?
			ON CONFLICT (sandbox_id, port) DO UPDATE SET public = excluded.public`,
			toID, formatTime(s.now()), fromID)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func scanPort(row scanner) (metadata.PublishedPort, error) {
	var (
		p       metadata.PublishedPort
		created string
	)
	if err := row.Scan(&p.SandboxID, &p.Port, &p.Public, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return metadata.PublishedPort{}, metadata.ErrNotFound
		}
		return metadata.PublishedPort{}, err
	}
	var err error
	p.CreatedAt, err = parseTime(created)
	return p, err
}

// PortToken implements metadata.Store.
func (s *Store) PortToken(ctx context.Context, accountID int64) (string, error) {
	var token string
	err := s.reader.QueryRowContext(ctx, `SELECT token FROM port_tokens WHERE account_id = ?`, accountID).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		err = metadata.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("metadata: port token of account %d: %w", accountID, err)
	}
	return token, nil
}

// EnsurePortToken implements metadata.Store.
func (s *Store) EnsurePortToken(ctx context.Context, accountID int64, candidate string) (string, error) {
	what := fmt.Sprintf("metadata: ensure the port token of account %d", accountID)
	if candidate == "" {
		return "", fmt.Errorf("%s: empty token", what)
	}
	var token string
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO port_tokens (account_id, token, created_at) VALUES (?, ?, ?)
			ON CONFLICT (account_id) DO NOTHING`, accountID, candidate, formatTime(s.now())); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT token FROM port_tokens WHERE account_id = ?`, accountID).Scan(&token)
	})
	if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return "", fmt.Errorf("%s: account: %w", what, metadata.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return token, nil
}

// SetPortToken implements metadata.Store.
func (s *Store) SetPortToken(ctx context.Context, accountID int64, token string) error {
	what := fmt.Sprintf("metadata: set the port token of account %d", accountID)
	if token == "" {
		return fmt.Errorf("%s: empty token", what)
	}
	_, err := s.writer.ExecContext(ctx, `INSERT INTO port_tokens (account_id, token, created_at) VALUES (?, ?, ?)
		ON CONFLICT (account_id) DO UPDATE SET token = excluded.token, created_at = excluded.created_at`,
		accountID, token, formatTime(s.now()))
	if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return fmt.Errorf("%s: account: %w", what, metadata.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
