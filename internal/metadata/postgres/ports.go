package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Published ports and port tokens (migration 0015).

const portColumns = `sandbox_id, port, public, created_at`

// PublishPort implements metadata.Store.
func (s *Store) PublishPort(ctx context.Context, p metadata.PublishedPort) (metadata.PublishedPort, error) {
	what := fmt.Sprintf("metadata: publish port %d of sandbox %s", p.Port, p.SandboxID)
	if err := p.Validate(); err != nil {
		return metadata.PublishedPort{}, fmt.Errorf("%s: %w", what, err)
	}
	p.CreatedAt = s.stamp(p.CreatedAt)
	var out metadata.PublishedPort
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanPort(tx.QueryRowContext(ctx, `INSERT INTO published_ports (`+portColumns+`) VALUES ($1, $2, $3, $4)
			ON CONFLICT (sandbox_id, port) DO UPDATE SET public = excluded.public
			RETURNING `+portColumns, p.SandboxID, p.Port, p.Public, p.CreatedAt))
		return err
	})
	if constraint, unique := violated(err); constraint != "" && !unique {
		return metadata.PublishedPort{}, fmt.Errorf("%s: sandbox: %w", what, metadata.ErrNotFound)
	}
	if err != nil {
		return metadata.PublishedPort{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// UnpublishPort implements metadata.Store.
func (s *Store) UnpublishPort(ctx context.Context, sandboxID string, port int) error {
	return s.execOne(ctx, fmt.Sprintf("metadata: unpublish port %d of sandbox %s", port, sandboxID),
		`DELETE FROM published_ports WHERE sandbox_id = $1 AND port = $2`, sandboxID, port)
}

// Port implements metadata.Store.
func (s *Store) Port(ctx context.Context, sandboxID string, port int) (metadata.PublishedPort, error) {
	p, err := scanPort(s.db.QueryRowContext(ctx, `SELECT `+portColumns+` FROM published_ports
		WHERE sandbox_id = $1 AND port = $2`, sandboxID, port))
	if err != nil {
		return metadata.PublishedPort{}, fmt.Errorf("metadata: port %d of sandbox %s: %w", port, sandboxID, err)
	}
	return p, nil
}

// Ports implements metadata.Store.
func (s *Store) Ports(ctx context.Context, sandboxID string) ([]metadata.PublishedPort, error) {
	out, err := func() ([]metadata.PublishedPort, error) {
		rows, err := s.db.QueryContext(ctx, `SELECT `+portColumns+` FROM published_ports
			WHERE sandbox_id = $1 ORDER BY port`, sandboxID)
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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var found bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)`, toID).Scan(&found); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("sandbox %s: %w", toID, metadata.ErrNotFound)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO published_ports (`+portColumns+`)
			SELECT $1::text, port, public, $2::timestamptz FROM published_ports WHERE sandbox_id = $3
			ON CONFLICT (sandbox_id, port) DO UPDATE SET public = excluded.public`,
			toID, s.nowTime(), fromID)
		if constraint, unique := violated(err); constraint != "" && !unique { // toID deleted meanwhile
			return fmt.Errorf("sandbox %s: %w", toID, metadata.ErrNotFound)
		}
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
		created time.Time
	)
	if err := row.Scan(&p.SandboxID, &p.Port, &p.Public, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return metadata.PublishedPort{}, metadata.ErrNotFound
		}
		return metadata.PublishedPort{}, err
	}
	p.CreatedAt = created.UTC()
	return p, nil
}

// PortToken implements metadata.Store.
func (s *Store) PortToken(ctx context.Context, accountID int64) (string, error) {
	var token string
	err := s.db.QueryRowContext(ctx, `SELECT token FROM port_tokens WHERE account_id = $1`, accountID).Scan(&token)
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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO port_tokens (account_id, token, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (account_id) DO NOTHING`, accountID, candidate, s.nowTime()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT token FROM port_tokens WHERE account_id = $1`, accountID).Scan(&token)
	})
	if constraint, unique := violated(err); constraint != "" && !unique {
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
	_, err := s.exec(ctx, `INSERT INTO port_tokens (account_id, token, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (account_id) DO UPDATE SET token = excluded.token, created_at = excluded.created_at`,
		accountID, token, s.nowTime())
	if constraint, unique := violated(err); constraint != "" && !unique {
		return fmt.Errorf("%s: account: %w", what, metadata.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
