package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

const checkpointColumns = `id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
	comment, label, has_memory, image, size_exclusive, size_total, root_generation, created_at, offsite_manifest,
	disk_path, memory_path, from_inside, offsite_unstorable, imported_at, host_id`

// CreateCheckpoint implements metadata.Store.
//
// A manual id comes from sandboxes.next_checkpoint, read and incremented by
// one UPDATE … RETURNING in the same IMMEDIATE transaction as the INSERT:
// the number is taken only if the checkpoint is stored, and no other writer
// (in this process or another) can take it in between.
func (s *Store) CreateCheckpoint(ctx context.Context, ck metadata.Checkpoint) (metadata.Checkpoint, error) {
	if err := ck.Validate(); err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: create checkpoint: %w", err)
	}
	ck.CreatedAt = s.stamp(ck.CreatedAt)
	var stored metadata.Checkpoint
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		if ck.Seq == "" {
			var n int64
			err := tx.QueryRowContext(ctx, `UPDATE sandboxes SET next_checkpoint = next_checkpoint + 1
				WHERE id = ? AND account_id = ? RETURNING next_checkpoint - 1`,
				ck.SandboxID, ck.AccountID).Scan(&n)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sandbox %s in account %d: %w", ck.SandboxID, ck.AccountID, metadata.ErrNotFound)
			} else if err != nil {
				return fmt.Errorf("next manual id: %w", err)
			}
			ck.Seq = metadata.ManualSeq(n)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (`+checkpointColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)`,
			ck.ID, ck.AccountID, ck.SandboxID, ck.SandboxName, ck.Seq, nullable(ck.Name), ck.Trigger, ck.Consistency,
			ck.Comment, ck.Label, ck.HasMemory, ck.Image, ck.SizeExclusive, ck.SizeTotal,
			int64(ck.RootGeneration), // at most MaxInt64: checked by Validate
			formatTime(ck.CreatedAt), nullable(ck.OffsiteManifest), ck.DiskPath, ck.MemoryPath, ck.FromInside, ck.OffsiteUnstorable, ck.HostID)
		if err != nil {
			return checkpointWriteError(err, ck)
		}
		// After the INSERT, so that a taken id is reported as such and
		// not as its paths being taken.
		if err := checkPathsFree(ctx, tx, ck.ID, ck.DiskPath, ck.MemoryPath); err != nil {
			return err
		}
		stored, err = scanCheckpoint(tx.QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE id = ?`, ck.ID))
		return err
	})
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: create checkpoint %s of sandbox %s: %w", ck.ID, ck.SandboxID, err)
	}
	return stored, nil
}

// ImportCheckpoint implements metadata.Store.
func (s *Store) ImportCheckpoint(ctx context.Context, ck metadata.Checkpoint) (metadata.Checkpoint, error) {
	if err := ck.ValidateImport(); err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: import checkpoint: %w", err)
	}
	ck.CreatedAt = s.stamp(ck.CreatedAt)
	ck.ImportedAt = s.stamp(time.Time{})
	var stored metadata.Checkpoint
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		var deleted, foreign bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM offsite_deletes WHERE account_id = ? AND manifest = ?),
			EXISTS (SELECT 1 FROM sandboxes WHERE id = ? AND account_id <> ?)`,
			ck.AccountID, ck.OffsiteManifest, ck.SandboxID, ck.AccountID).Scan(&deleted, &foreign); err != nil {
			return err
		}
		if deleted {
			return fmt.Errorf("manifest %s is of a checkpoint the account deleted: %w", ck.OffsiteManifest, metadata.ErrConflict)
		}
		if foreign {
			return fmt.Errorf("sandbox id %s is another account's: %w", ck.SandboxID, metadata.ErrConflict)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (`+checkpointColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			ck.ID, ck.AccountID, ck.SandboxID, ck.SandboxName, ck.Seq, nullable(ck.Name), ck.Trigger, ck.Consistency,
			ck.Comment, ck.Label, ck.HasMemory, ck.Image, ck.SizeExclusive, ck.SizeTotal,
			int64(ck.RootGeneration), formatTime(ck.CreatedAt), ck.OffsiteManifest, "", "", ck.FromInside, ck.OffsiteUnstorable,
			formatTime(ck.ImportedAt), ck.HostID)
		if err != nil {
			return checkpointWriteError(err, ck)
		}
		if n, ok := metadata.ManualSeqNumber(ck.Seq); ok {
			if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET next_checkpoint = MAX(next_checkpoint, ?)
				WHERE id = ? AND account_id = ?`, n+1, ck.SandboxID, ck.AccountID); err != nil {
				return fmt.Errorf("raise the manual id counter: %w", err)
			}
		}
		stored, err = scanCheckpoint(tx.QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE id = ?`, ck.ID))
		return err
	})
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: import checkpoint %s of sandbox %s: %w", ck.ID, ck.SandboxID, err)
	}
	return stored, nil
}

// checkpointWriteError maps a constraint violation of an INSERT or UPDATE
// of ck to the sentinel errors, naming the rule broken.
func checkpointWriteError(err error, ck metadata.Checkpoint) error {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		// SQLite names the columns: "UNIQUE constraint failed: checkpoints.account_id, checkpoints.name".
		msg := err.Error()
		switch {
		case strings.Contains(msg, "checkpoints.name"):
			return fmt.Errorf("name %q in account %d: %w", ck.Name, ck.AccountID, metadata.ErrConflict)
		case strings.Contains(msg, "checkpoints.seq"):
			return fmt.Errorf("seq %q of sandbox %s: %w", ck.Seq, ck.SandboxID, metadata.ErrConflict)
		case strings.Contains(msg, "checkpoints.id"):
			return fmt.Errorf("id %s: %w", ck.ID, metadata.ErrConflict)
		case strings.Contains(msg, "checkpoints.disk_path"):
			return fmt.Errorf("disk path %q is another checkpoint's: %w", ck.DiskPath, metadata.ErrConflict)
		case strings.Contains(msg, "checkpoints.memory_path"):
			return fmt.Errorf("memory path %q is another checkpoint's: %w", ck.MemoryPath, metadata.ErrConflict)
		}
		return fmt.Errorf("%v: %w", err, metadata.ErrConflict)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("account %d: %w", ck.AccountID, metadata.ErrNotFound)
	}
	return err
}

// CheckpointByID implements metadata.Store.
func (s *Store) CheckpointByID(ctx context.Context, id string) (metadata.Checkpoint, error) {
	ck, err := s.oneCheckpoint(ctx, `WHERE id = ?`, id)
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: checkpoint %s: %w", id, err)
	}
	return ck, nil
}

// CheckpointBySeq implements metadata.Store.
func (s *Store) CheckpointBySeq(ctx context.Context, sandboxID, seq string) (metadata.Checkpoint, error) {
	ck, err := s.oneCheckpoint(ctx, `WHERE sandbox_id = ? AND seq = ?`, sandboxID, seq)
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: checkpoint %s of sandbox %s: %w", seq, sandboxID, err)
	}
	return ck, nil
}

// CheckpointByName implements metadata.Store.
func (s *Store) CheckpointByName(ctx context.Context, accountID int64, name string) (metadata.Checkpoint, error) {
	ck, err := s.oneCheckpoint(ctx, `WHERE account_id = ? AND name = ?`, accountID, name)
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: checkpoint %q in account %d: %w", name, accountID, err)
	}
	return ck, nil
}

// LatestCheckpoint implements metadata.Store. It walks
// checkpoints_sandbox_idx backwards, so it reads one row.
func (s *Store) LatestCheckpoint(ctx context.Context, sandboxID string) (metadata.Checkpoint, error) {
	ck, err := s.oneCheckpoint(ctx, `WHERE sandbox_id = ? ORDER BY created_at DESC, serial DESC LIMIT 1`, sandboxID)
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: latest checkpoint of sandbox %s: %w", sandboxID, err)
	}
	return ck, nil
}

func (s *Store) oneCheckpoint(ctx context.Context, where string, args ...any) (metadata.Checkpoint, error) {
	return scanCheckpoint(s.reader.QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints `+where, args...))
}

// ListCheckpoints implements metadata.Store.
func (s *Store) ListCheckpoints(ctx context.Context, accountID int64, f metadata.CheckpointFilter) ([]metadata.Checkpoint, error) {
	where, args := `WHERE account_id = ?`, []any{accountID}
	if f.SandboxID != "" {
		where, args = where+` AND sandbox_id = ?`, append(args, f.SandboxID)
	}
	if !f.IncludeAuto {
		where, args = where+` AND (trigger = ? OR name IS NOT NULL)`, append(args, metadata.TriggerManual)
	}
	out, err := s.checkpoints(ctx, where+` ORDER BY created_at, serial`, args...)
	if err != nil {
		return nil, fmt.Errorf("metadata: list checkpoints of account %d: %w", accountID, err)
	}
	return out, nil
}

// AllCheckpoints implements metadata.Store.
func (s *Store) AllCheckpoints(ctx context.Context) ([]metadata.Checkpoint, error) {
	out, err := s.checkpoints(ctx, `ORDER BY account_id, created_at, serial`)
	if err != nil {
		return nil, fmt.Errorf("metadata: list all checkpoints: %w", err)
	}
	return out, nil
}

// checkpoints runs SELECT … FROM checkpoints with the rest of the query
// given. The result is empty, never nil.
func (s *Store) checkpoints(ctx context.Context, rest string, args ...any) ([]metadata.Checkpoint, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints `+rest, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []metadata.Checkpoint{}
	for rows.Next() {
		ck, err := scanCheckpoint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ck)
	}
	return out, rows.Err()
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanCheckpoint reads one row of checkpointColumns; no row is ErrNotFound.
func scanCheckpoint(row scanner) (metadata.Checkpoint, error) {
	var (
		ck      metadata.Checkpoint
		name    sql.NullString
		gen     int64
		created string
		offsite sql.NullString
		import_ sql.NullString
	)
	err := row.Scan(&ck.ID, &ck.AccountID, &ck.SandboxID, &ck.SandboxName, &ck.Seq, &name, &ck.Trigger, &ck.Consistency,
		&ck.Comment, &ck.Label, &ck.HasMemory, &ck.Image, &ck.SizeExclusive, &ck.SizeTotal, &gen, &created, &offsite,
		&ck.DiskPath, &ck.MemoryPath, &ck.FromInside, &ck.OffsiteUnstorable, &import_, &ck.HostID)
	if errors.Is(err, sql.ErrNoRows) {
		return metadata.Checkpoint{}, metadata.ErrNotFound
	} else if err != nil {
		return metadata.Checkpoint{}, err
	}
	if gen < 0 { // CHECK (root_generation >= 0) forbids it
		return metadata.Checkpoint{}, fmt.Errorf("checkpoint %s: stored root generation %d is negative", ck.ID, gen)
	}
	// The store writes only paths that pass; a row edited by hand (or
	// migrated from a bad id) must still not lead cairnd out of the pool.
	for _, p := range []string{ck.DiskPath, ck.MemoryPath} {
		if p == "" {
			continue
		}
		if err := metadata.ValidatePoolPath(p); err != nil {
			return metadata.Checkpoint{}, fmt.Errorf("checkpoint %s: stored %w", ck.ID, err)
		}
	}
	ck.Name, ck.RootGeneration, ck.OffsiteManifest = name.String, uint64(gen), offsite.String
	if import_.Valid {
		if ck.ImportedAt, err = parseTime(import_.String); err != nil {
			return metadata.Checkpoint{}, err
		}
	}
	ck.CreatedAt, err = parseTime(created)
	return ck, err
}

// SetCheckpointSize implements metadata.Store.
func (s *Store) SetCheckpointSize(ctx context.Context, id string, exclusive, total int64) error {
	what := "metadata: set size of checkpoint " + id
	if exclusive < 0 || total < 0 {
		return fmt.Errorf("%s: negative size (exclusive %d, total %d)", what, exclusive, total)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE checkpoints SET size_exclusive = ?, size_total = ? WHERE id = ?`,
		exclusive, total, id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// SetCheckpointOffsite implements metadata.Store.
func (s *Store) SetCheckpointOffsite(ctx context.Context, id, manifest string) error {
	what := "metadata: set off-site manifest of checkpoint " + id
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		if err := queueOffsiteDelete(ctx, tx, id, manifest); err != nil {
			return err
		}
		return execOne(ctx, tx, `UPDATE checkpoints SET offsite_manifest = ? WHERE id = ?`, nullable(manifest), id)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SetCheckpointUnstorable implements metadata.Store.
func (s *Store) SetCheckpointUnstorable(ctx context.Context, id, reason string) error {
	what := "metadata: mark checkpoint " + id + " unstorable off-site"
	res, err := s.writer.ExecContext(ctx, `UPDATE checkpoints SET offsite_unstorable = ? WHERE id = ?`, reason, id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// execOne runs a statement in tx that must change one row: none is
// metadata.ErrNotFound.
func execOne(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return metadata.ErrNotFound
	}
	return nil
}

// queueOffsiteDelete puts the off-site manifest checkpoint id names, if
// any and unless it is keep, on its account's off-site deletes.
func queueOffsiteDelete(ctx context.Context, tx *sql.Tx, id, keep string) error {
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO offsite_deletes (account_id, manifest)
		SELECT account_id, offsite_manifest FROM checkpoints
		WHERE id = ? AND offsite_manifest IS NOT NULL AND offsite_manifest != ?`, id, keep)
	if err != nil {
		return fmt.Errorf("queue the off-site delete: %w", err)
	}
	return nil
}

// OffsiteDeletes implements metadata.Store.
func (s *Store) OffsiteDeletes(ctx context.Context, accountID int64) ([]string, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT manifest FROM offsite_deletes WHERE account_id = ?`, accountID)
	if err != nil {
		return nil, fmt.Errorf("metadata: off-site deletes: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, fmt.Errorf("metadata: off-site deletes: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("metadata: off-site deletes: %w", err)
	}
	return out, nil
}

// ForgetOffsiteDeletes implements metadata.Store.
func (s *Store) ForgetOffsiteDeletes(ctx context.Context, accountID int64, manifests []string) error {
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		for _, m := range manifests {
			if _, err := tx.ExecContext(ctx, `DELETE FROM offsite_deletes WHERE account_id = ? AND manifest = ?`, accountID, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("metadata: forget off-site deletes: %w", err)
	}
	return nil
}

// SetCheckpointName implements metadata.Store.
func (s *Store) SetCheckpointName(ctx context.Context, id, name string) error {
	what := fmt.Sprintf("metadata: name checkpoint %s %q", id, name)
	res, err := s.writer.ExecContext(ctx, `UPDATE checkpoints SET name = ? WHERE id = ?`, nullable(name), id)
	if err != nil {
		if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
			return fmt.Errorf("%s: name taken in the account: %w", what, metadata.ErrConflict)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// KeepCheckpoint implements metadata.Store.
func (s *Store) KeepCheckpoint(ctx context.Context, id string) error {
	what := "metadata: keep checkpoint " + id
	res, err := s.writer.ExecContext(ctx, `UPDATE checkpoints SET from_inside = 0 WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// DeleteCheckpoint implements metadata.Store. The sandbox's counter is left
// as it is, so the checkpoint's v-number is not given again. The sandboxes
// that would resume from the checkpoint lose it in the same IMMEDIATE
// transaction (found through sandboxes_resume_idx), so no committed state
// has a resume checkpoint that is gone; its off-site manifest and its
// paths in the pool are queued for deletion in it too, so none is left
// that nothing names and nothing will delete.
func (s *Store) DeleteCheckpoint(ctx context.Context, id string) error {
	what := "metadata: delete checkpoint " + id
	err := inTx(ctx, s.writer, func(tx *sql.Tx) error {
		if err := queueOffsiteDelete(ctx, tx, id, ""); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO disk_deletes (path, checkpoint_id, queued_at, host_id)
			SELECT disk_path, id, ?1, host_id FROM checkpoints WHERE id = ?2 AND disk_path != ''
			UNION ALL
			SELECT memory_path, id, ?1, host_id FROM checkpoints WHERE id = ?2 AND memory_path != ''`,
			formatTime(s.now()), id); err != nil {
			return fmt.Errorf("queue the disk deletes: %w", err)
		}
		if err := execOne(ctx, tx, `DELETE FROM checkpoints WHERE id = ?`, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE sandboxes SET resume_checkpoint = NULL, updated_at = ?
			WHERE resume_checkpoint = ?`, formatTime(s.now()), id)
		if err != nil {
			return fmt.Errorf("clear resume checkpoint: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
