package sqlite

import (
	"context"
	"database/sql"
	"fmt"

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
