package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Where checkpoints' disks live, and the pool's paths to delete (migration
// 0007).

// checkPathsFree fails with metadata.ErrConflict if a checkpoint other than
// id names one of paths (as its disk or its memory image), or one of them
// is on disk_deletes; "" is skipped. Run in the serializable transaction
// that then writes the paths, it keeps every path named by one checkpoint
// at most, or queued for deletion, never both: of two transactions that
// each find a path free and take it, one fails to commit and runs again.
// The terms that compare the columns with the empty string let PostgreSQL
// use the partial indexes of 0007.
func checkPathsFree(ctx context.Context, tx *sql.Tx, id string, paths ...string) error {
	for _, p := range paths {
		if p == "" {
			continue
		}
		var owner string
		err := tx.QueryRowContext(ctx, `SELECT id FROM checkpoints
			WHERE id <> $1 AND ((disk_path = $2 AND disk_path <> '') OR (memory_path = $2 AND memory_path <> ''))
			LIMIT 1`, id, p).Scan(&owner)
		if err == nil {
			return fmt.Errorf("path %q is checkpoint %s's: %w", p, owner, metadata.ErrConflict)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var queued bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM disk_deletes WHERE path = $1)`, p).Scan(&queued); err != nil {
			return err
		}
		if queued {
			return fmt.Errorf("path %q is still to be deleted (on DiskDeletes): %w", p, metadata.ErrConflict)
		}
	}
	return nil
}

// DropLocalCopy implements metadata.Store.
func (s *Store) DropLocalCopy(ctx context.Context, id string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE id = $1)`, id).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return metadata.ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO disk_deletes (path, checkpoint_id, queued_at)
			SELECT disk_path, id, $1::timestamptz FROM checkpoints WHERE id = $2 AND disk_path <> ''
			UNION ALL
			SELECT memory_path, id, $1::timestamptz FROM checkpoints WHERE id = $2 AND memory_path <> ''
			ON CONFLICT DO NOTHING`,
			s.nowTime(), id); err != nil {
			return fmt.Errorf("queue the disk deletes: %w", err)
		}
		_, err := tx.ExecContext(ctx, `UPDATE checkpoints SET disk_path = '', memory_path = '' WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("metadata: drop the local copy of checkpoint %s: %w", id, err)
	}
	return nil
}

// SetCheckpointDisk implements metadata.Store.
func (s *Store) SetCheckpointDisk(ctx context.Context, id, diskPath string) error {
	what := fmt.Sprintf("metadata: set disk path of checkpoint %s to %q", id, diskPath)
	if diskPath != "" {
		if err := metadata.ValidatePoolPath(diskPath); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var old, memory string
		err := tx.QueryRowContext(ctx, `SELECT disk_path, memory_path FROM checkpoints WHERE id = $1`, id).Scan(&old, &memory)
		if errors.Is(err, sql.ErrNoRows) {
			return metadata.ErrNotFound
		} else if err != nil {
			return err
		}
		switch {
		case diskPath == old:
			return nil
		case diskPath != "" && diskPath == memory:
			return errors.New("it is the checkpoint's own memory path")
		}
		if err := checkPathsFree(ctx, tx, id, diskPath); err != nil {
			return err
		}
		if old != "" {
			if _, err := tx.ExecContext(ctx, `INSERT INTO disk_deletes (path, checkpoint_id, queued_at, host_id)
				VALUES ($1, $2, $3, (SELECT host_id FROM checkpoints WHERE id = $2)) ON CONFLICT DO NOTHING`, old, id, s.nowTime()); err != nil {
				return fmt.Errorf("queue the disk delete of %q: %w", old, err)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE checkpoints SET disk_path = $1 WHERE id = $2`, diskPath, id)
		if _, unique := violated(err); unique {
			return fmt.Errorf("path %q is another checkpoint's: %w", diskPath, metadata.ErrConflict)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// DiskDeletes implements metadata.Store.
func (s *Store) DiskDeletes(ctx context.Context) ([]metadata.DiskDelete, error) {
	out, err := func() ([]metadata.DiskDelete, error) {
		rows, err := s.db.QueryContext(ctx, `SELECT path, checkpoint_id, queued_at, host_id FROM disk_deletes ORDER BY queued_at, serial`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []metadata.DiskDelete{}
		for rows.Next() {
			var (
				d      metadata.DiskDelete
				queued time.Time
			)
			if err := rows.Scan(&d.Path, &d.CheckpointID, &queued, &d.HostID); err != nil {
				return nil, err
			}
			if err := metadata.ValidatePoolPath(d.Path); err != nil {
				return nil, fmt.Errorf("stored %w", err)
			}
			d.QueuedAt = queued.UTC()
			out = append(out, d)
		}
		return out, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("metadata: disk deletes: %w", err)
	}
	return out, nil
}

// ForgetDiskDelete implements metadata.Store.
func (s *Store) ForgetDiskDelete(ctx context.Context, path string) error {
	if _, err := s.exec(ctx, `DELETE FROM disk_deletes WHERE path = $1`, path); err != nil {
		return fmt.Errorf("metadata: forget disk delete %q: %w", path, err)
	}
	return nil
}
