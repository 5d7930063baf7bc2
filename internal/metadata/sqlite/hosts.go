package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	sqlite3 "modernc.org/sqlite/lib"
)

// Hosts (migration 0021).

const hostColumns = `id, name, api_address, tls_fingerprint, peer_key_hash, capacity, started_at, heartbeat_at`

// RegisterHost implements metadata.Store.
func (s *Store) RegisterHost(ctx context.Context, h metadata.Host) (metadata.Host, error) {
	if err := h.Validate(); err != nil {
		return metadata.Host{}, fmt.Errorf("metadata: register host: %w", err)
	}
	now := formatTime(s.now())
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		var first bool
		if err := tx.QueryRowContext(ctx, `SELECT NOT EXISTS (SELECT 1 FROM hosts)`).Scan(&first); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO hosts (`+hostColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET name = excluded.name, api_address = excluded.api_address,
			tls_fingerprint = excluded.tls_fingerprint, peer_key_hash = excluded.peer_key_hash,
			capacity = excluded.capacity, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
			h.ID, h.Name, h.APIAddress, h.TLSFingerprint, h.PeerKeyHash, h.Capacity, now, now); err != nil {
			return err
		}
		if !first {
			return nil
		}
		for _, table := range []string{"sandboxes", "checkpoints", "disk_deletes"} {
			if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET host_id = ? WHERE host_id = ''`, h.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
		return metadata.Host{}, fmt.Errorf("metadata: register host: name %q is another host's: %w", h.Name, metadata.ErrConflict)
	} else if err != nil {
		return metadata.Host{}, fmt.Errorf("metadata: register host %s: %w", h.Name, err)
	}
	return scanHost(s.reader.QueryRowContext(ctx, `SELECT `+hostColumns+` FROM hosts WHERE id = ?`, h.ID))
}

// Heartbeat implements metadata.Store.
func (s *Store) Heartbeat(ctx context.Context, id string) error {
	res, err := s.writer.ExecContext(ctx, `UPDATE hosts SET heartbeat_at = ? WHERE id = ?`, formatTime(s.now()), id)
	if err != nil {
		return fmt.Errorf("metadata: heartbeat of host %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("metadata: heartbeat of host %s: %w", id, metadata.ErrNotFound)
	}
	return nil
}

// ListHosts implements metadata.Store.
func (s *Store) ListHosts(ctx context.Context) ([]metadata.Host, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+hostColumns+` FROM hosts ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("metadata: list hosts: %w", err)
	}
	defer rows.Close()
	out := []metadata.Host{}
	for rows.Next() {
		h, err := scanHost(rows)
		if err != nil {
			return nil, fmt.Errorf("metadata: list hosts: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func scanHost(row scanner) (metadata.Host, error) {
	var (
		h                  metadata.Host
		started, heartbeat string
	)
	err := row.Scan(&h.ID, &h.Name, &h.APIAddress, &h.TLSFingerprint, &h.PeerKeyHash, &h.Capacity, &started, &heartbeat)
	if err == sql.ErrNoRows {
		return metadata.Host{}, metadata.ErrNotFound
	} else if err != nil {
		return metadata.Host{}, err
	}
	if h.StartedAt, err = parseTime(started); err != nil {
		return metadata.Host{}, err
	}
	if h.HeartbeatAt, err = parseTime(heartbeat); err != nil {
		return metadata.Host{}, err
	}
	return h, nil
}

// MoveSandbox implements metadata.Store.
func (s *Store) MoveSandbox(ctx context.Context, id, from, to, current string, downAfter time.Duration) error {
	what := fmt.Sprintf("metadata: move sandbox %s from host %s to %s", id, from, to)
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		var host string
		err := tx.QueryRowContext(ctx, `SELECT host_id FROM sandboxes WHERE id = ?`, id).Scan(&host)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox: %w", metadata.ErrNotFound)
		} else if err != nil {
			return err
		}
		if host != from {
			return fmt.Errorf("it is host %s's now: %w", host, metadata.ErrConflict)
		}
		var beat string
		err = tx.QueryRowContext(ctx, `SELECT heartbeat_at FROM hosts WHERE id = ?`, from).Scan(&beat)
		if err == nil {
			at, perr := parseTime(beat)
			if perr != nil {
				return perr
			}
			if s.now().Sub(at) < downAfter {
				return fmt.Errorf("host %s is back (heartbeat %s): %w", from, beat, metadata.ErrConflict)
			}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var found bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE id = ? AND sandbox_id = ?)`, current, id).Scan(&found); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no checkpoint %s of it: %w", current, metadata.ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET host_id = ?, current_checkpoint = ?, resume_checkpoint = NULL, updated_at = ? WHERE id = ?`,
			to, current, formatTime(s.now()), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
