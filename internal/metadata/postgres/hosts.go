package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Hosts (migration 0021).

const hostColumns = `id, name, api_address, tls_fingerprint, peer_key_hash, capacity, started_at, heartbeat_at`

// RegisterHost implements metadata.Store.
func (s *Store) RegisterHost(ctx context.Context, h metadata.Host) (metadata.Host, error) {
	if err := h.Validate(); err != nil {
		return metadata.Host{}, fmt.Errorf("metadata: register host: %w", err)
	}
	var stored metadata.Host
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.nowTime()
		var first bool
		if err := tx.QueryRowContext(ctx, `SELECT NOT EXISTS (SELECT 1 FROM hosts)`).Scan(&first); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO hosts (`+hostColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
			ON CONFLICT (id) DO UPDATE SET name = excluded.name, api_address = excluded.api_address,
			tls_fingerprint = excluded.tls_fingerprint, peer_key_hash = excluded.peer_key_hash,
			capacity = excluded.capacity, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
			h.ID, h.Name, h.APIAddress, h.TLSFingerprint, h.PeerKeyHash, h.Capacity, now); err != nil {
			return err
		}
		if first {
			for _, table := range []string{"sandboxes", "checkpoints", "disk_deletes"} {
				if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET host_id = $1 WHERE host_id = ''`, h.ID); err != nil {
					return err
				}
			}
		}
		var err error
		stored, err = scanHost(tx.QueryRowContext(ctx, `SELECT `+hostColumns+` FROM hosts WHERE id = $1`, h.ID))
		return err
	})
	if _, unique := violated(err); unique {
		return metadata.Host{}, fmt.Errorf("metadata: register host: name %q is another host's: %w", h.Name, metadata.ErrConflict)
	} else if err != nil {
		return metadata.Host{}, fmt.Errorf("metadata: register host %s: %w", h.Name, err)
	}
	return stored, nil
}

// Heartbeat implements metadata.Store.
func (s *Store) Heartbeat(ctx context.Context, id string) error {
	return s.execOne(ctx, "metadata: heartbeat of host "+id, `UPDATE hosts SET heartbeat_at = $1 WHERE id = $2`, s.nowTime(), id)
}

// ListHosts implements metadata.Store.
func (s *Store) ListHosts(ctx context.Context) ([]metadata.Host, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+hostColumns+` FROM hosts ORDER BY name`)
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
		started, heartbeat time.Time
	)
	err := row.Scan(&h.ID, &h.Name, &h.APIAddress, &h.TLSFingerprint, &h.PeerKeyHash, &h.Capacity, &started, &heartbeat)
	if errors.Is(err, sql.ErrNoRows) {
		return metadata.Host{}, metadata.ErrNotFound
	} else if err != nil {
		return metadata.Host{}, err
	}
	h.StartedAt, h.HeartbeatAt = started.UTC(), heartbeat.UTC()
	return h, nil
}

// MoveSandbox implements metadata.Store.
func (s *Store) MoveSandbox(ctx context.Context, id, from, to, current string, downAfter time.Duration) error {
	what := fmt.Sprintf("metadata: move sandbox %s from host %s to %s", id, from, to)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var host string
		err := tx.QueryRowContext(ctx, `SELECT host_id FROM sandboxes WHERE id = $1 FOR UPDATE`, id).Scan(&host)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox: %w", metadata.ErrNotFound)
		} else if err != nil {
			return err
		}
		if host != from {
			return fmt.Errorf("it is host %s's now: %w", host, metadata.ErrConflict)
		}
		var beat time.Time
		err = tx.QueryRowContext(ctx, `SELECT heartbeat_at FROM hosts WHERE id = $1`, from).Scan(&beat)
		if err == nil {
			if s.nowTime().Sub(beat) < downAfter {
				return fmt.Errorf("host %s is back (heartbeat %s): %w", from, beat.UTC().Format(time.RFC3339), metadata.ErrConflict)
			}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var found bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE id = $1 AND sandbox_id = $2)`, current, id).Scan(&found); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no checkpoint %s of it: %w", current, metadata.ErrNotFound)
		}
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET host_id = $1, current_checkpoint = $2, resume_checkpoint = NULL, updated_at = $3 WHERE id = $4`,
			to, current, s.nowTime(), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
