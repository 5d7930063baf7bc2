package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Checkpoints (migrations 0002 to 0013, 0018).

const checkpointColumns = `id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
	comment, label, has_memory, image, size_exclusive, size_total, root_generation, created_at, offsite_manifest,
	disk_path, memory_path, from_inside, offsite_unstorable, imported_at, host_id`

// CreateCheckpoint implements metadata.Store.
//
// A manual id comes from sandboxes.next_checkpoint, read and incremented by
// one UPDATE … RETURNING in the transaction of the INSERT: the number is
// taken only if the checkpoint is stored, and the row lock makes a
// concurrent creation of the same sandbox wait (and, serializable, run
// again with the next number).
func (s *Store) CreateCheckpoint(ctx context.Context, ck metadata.Checkpoint) (metadata.Checkpoint, error) {
	if err := ck.Validate(); err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: create checkpoint: %w", err)
	}
	ck.CreatedAt = s.stamp(ck.CreatedAt)
	var stored metadata.Checkpoint
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ck := ck // a retry starts again without the Seq an earlier attempt took
		if ck.Seq == "" {
			var n int64
			err := tx.QueryRowContext(ctx, `UPDATE sandboxes SET next_checkpoint = next_checkpoint + 1
				WHERE id = $1 AND account_id = $2 RETURNING next_checkpoint - 1`,
				ck.SandboxID, ck.AccountID).Scan(&n)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sandbox %s in account %d: %w", ck.SandboxID, ck.AccountID, metadata.ErrNotFound)
			} else if err != nil {
				return fmt.Errorf("next manual id: %w", err)
			}
			ck.Seq = metadata.ManualSeq(n)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (`+checkpointColumns+`) VALUES (`+params(23)+`)`,
			ck.ID, ck.AccountID, ck.SandboxID, ck.SandboxName, ck.Seq, nullable(ck.Name), ck.Trigger, ck.Consistency,
			ck.Comment, ck.Label, ck.HasMemory, ck.Image, ck.SizeExclusive, ck.SizeTotal,
			int64(ck.RootGeneration), // at most MaxInt64: checked by Validate
			ck.CreatedAt, nullable(ck.OffsiteManifest), ck.DiskPath, ck.MemoryPath, ck.FromInside, ck.OffsiteUnstorable, nil, ck.HostID)
		if err != nil {
			return checkpointWriteError(err, ck)
		}
		// After the INSERT, so that a taken id is reported as such and
		// not as its paths being taken.
		if err := checkPathsFree(ctx, tx, ck.ID, ck.DiskPath, ck.MemoryPath); err != nil {
			return err
		}
		stored, err = scanCheckpoint(tx.QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE id = $1`, ck.ID))
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
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var deleted, foreign bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM offsite_deletes WHERE account_id = $1 AND manifest = $2),
			EXISTS (SELECT 1 FROM sandboxes WHERE id = $3 AND account_id <> $1)`,
			ck.AccountID, ck.OffsiteManifest, ck.SandboxID).Scan(&deleted, &foreign); err != nil {
			return err
		}
		if deleted {
			return fmt.Errorf("manifest %s is of a checkpoint the account deleted: %w", ck.OffsiteManifest, metadata.ErrConflict)
		}
		if foreign {
			return fmt.Errorf("sandbox id %s is another account's: %w", ck.SandboxID, metadata.ErrConflict)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (`+checkpointColumns+`) VALUES (`+params(23)+`)`,
			ck.ID, ck.AccountID, ck.SandboxID, ck.SandboxName, ck.Seq, nullable(ck.Name), ck.Trigger, ck.Consistency,
			ck.Comment, ck.Label, ck.HasMemory, ck.Image, ck.SizeExclusive, ck.SizeTotal,
			int64(ck.RootGeneration), ck.CreatedAt, ck.OffsiteManifest, "", "", ck.FromInside, ck.OffsiteUnstorable, ck.ImportedAt, ck.HostID)
		if err != nil {
			return checkpointWriteError(err, ck)
		}
		if n, ok := metadata.ManualSeqNumber(ck.Seq); ok {
			if _, err := tx.ExecContext(ctx, `UPDATE sandboxes SET next_checkpoint = GREATEST(next_checkpoint, $1)
				WHERE id = $2 AND account_id = $3`, n+1, ck.SandboxID, ck.AccountID); err != nil {
				return err
			}
		}
		stored, err = scanCheckpoint(tx.QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints WHERE id = $1`, ck.ID))
		return err
	})
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: import checkpoint %s of sandbox %s: %w", ck.ID, ck.SandboxID, err)
	}
	return stored, nil
}

// checkpointWriteError maps a constraint violation of an INSERT or UPDATE
// of ck to the sentinel errors, naming the rule broken. A serialization
// failure is returned as it is, for inTx to retry.
func checkpointWriteError(err error, ck metadata.Checkpoint) error {
	constraint, unique := violated(err)
	switch {
	case constraint == "":
		return err
	case !unique:
		return fmt.Errorf("account %d: %w", ck.AccountID, metadata.ErrNotFound)
	}
	switch constraint {
	case "checkpoints_account_id_name_key":
		return fmt.Errorf("name %q in account %d: %w", ck.Name, ck.AccountID, metadata.ErrConflict)
	case "checkpoints_sandbox_id_seq_key":
		return fmt.Errorf("seq %q of sandbox %s: %w", ck.Seq, ck.SandboxID, metadata.ErrConflict)
	case "checkpoints_id_key":
		return fmt.Errorf("id %s: %w", ck.ID, metadata.ErrConflict)
	case "checkpoints_disk_path_idx":
		return fmt.Errorf("disk path %q is another checkpoint's: %w", ck.DiskPath, metadata.ErrConflict)
	case "checkpoints_memory_path_idx":
		return fmt.Errorf("memory path %q is another checkpoint's: %w", ck.MemoryPath, metadata.ErrConflict)
	}
	return fmt.Errorf("%v: %w", err, metadata.ErrConflict)
}

// CheckpointByID implements metadata.Store.
func (s *Store) CheckpointByID(ctx context.Context, id string) (metadata.Checkpoint, error) {
	ck, err := s.oneCheckpoint(ctx, `WHERE id = $1`, id)
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: checkpoint %s: %w", id, err)
	}
	return ck, nil
}

// CheckpointBySeq implements metadata.Store.
func (s *Store) CheckpointBySeq(ctx context.Context, sandboxID, seq string) (metadata.Checkpoint, error) {
	ck, err := s.oneCheckpoint(ctx, `WHERE sandbox_id = $1 AND seq = $2`, sandboxID, seq)
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: checkpoint %s of sandbox %s: %w", seq, sandboxID, err)
	}
	return ck, nil
}

// CheckpointByName implements metadata.Store.
func (s *Store) CheckpointByName(ctx context.Context, accountID int64, name string) (metadata.Checkpoint, error) {
	ck, err := s.oneCheckpoint(ctx, `WHERE account_id = $1 AND name = $2`, accountID, name)
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: checkpoint %q in account %d: %w", name, accountID, err)
	}
	return ck, nil
}

// LatestCheckpoint implements metadata.Store. It walks
// checkpoints_sandbox_idx backwards, so it reads one row.
func (s *Store) LatestCheckpoint(ctx context.Context, sandboxID string) (metadata.Checkpoint, error) {
	ck, err := s.oneCheckpoint(ctx, `WHERE sandbox_id = $1 ORDER BY created_at DESC, serial DESC LIMIT 1`, sandboxID)
	if err != nil {
		return metadata.Checkpoint{}, fmt.Errorf("metadata: latest checkpoint of sandbox %s: %w", sandboxID, err)
	}
	return ck, nil
}

func (s *Store) oneCheckpoint(ctx context.Context, where string, args ...any) (metadata.Checkpoint, error) {
	return scanCheckpoint(s.db.QueryRowContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints `+where, args...))
}

// ListCheckpoints implements metadata.Store.
func (s *Store) ListCheckpoints(ctx context.Context, accountID int64, f metadata.CheckpointFilter) ([]metadata.Checkpoint, error) {
	where, args := `WHERE account_id = $1`, []any{accountID}
	if f.SandboxID != "" {
		args = append(args, f.SandboxID)
		where += fmt.Sprintf(` AND sandbox_id = $%d`, len(args))
	}
	if !f.IncludeAuto {
		args = append(args, metadata.TriggerManual)
		where += fmt.Sprintf(` AND (trigger = $%d OR name IS NOT NULL)`, len(args))
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
	rows, err := s.db.QueryContext(ctx, `SELECT `+checkpointColumns+` FROM checkpoints `+rest, args...)
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

// scanCheckpoint reads one row of checkpointColumns; no row is ErrNotFound.
func scanCheckpoint(row scanner) (metadata.Checkpoint, error) {
	var (
		ck      metadata.Checkpoint
		name    sql.NullString
		gen     int64
		created time.Time
		offsite sql.NullString
		import_ sql.NullTime
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
	ck.CreatedAt = created.UTC()
	if import_.Valid {
		ck.ImportedAt = import_.Time.UTC()
	}
	return ck, nil
}

// SetCheckpointSize implements metadata.Store.
func (s *Store) SetCheckpointSize(ctx context.Context, id string, exclusive, total int64) error {
	what := "metadata: set size of checkpoint " + id
	if exclusive < 0 || total < 0 {
		return fmt.Errorf("%s: negative size (exclusive %d, total %d)", what, exclusive, total)
	}
	return s.execOne(ctx, what, `UPDATE checkpoints SET size_exclusive = $1, size_total = $2 WHERE id = $3`,
		exclusive, total, id)
}

// SetCheckpointOffsite implements metadata.Store.
func (s *Store) SetCheckpointOffsite(ctx context.Context, id, manifest string) error {
	what := "metadata: set off-site manifest of checkpoint " + id
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := queueOffsiteDelete(ctx, tx, id, manifest); err != nil {
			return err
		}
		return execOneTx(ctx, tx, `UPDATE checkpoints SET offsite_manifest = $1 WHERE id = $2`, nullable(manifest), id)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SetCheckpointUnstorable implements metadata.Store.
func (s *Store) SetCheckpointUnstorable(ctx context.Context, id, reason string) error {
	return s.execOne(ctx, "metadata: mark checkpoint "+id+" unstorable off-site",
		`UPDATE checkpoints SET offsite_unstorable = $1 WHERE id = $2`, reason, id)
}

// queueOffsiteDelete puts the off-site manifest checkpoint id names, if
// any and unless it is keep, on its account's off-site deletes.
func queueOffsiteDelete(ctx context.Context, tx *sql.Tx, id, keep string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO offsite_deletes (account_id, manifest)
		SELECT account_id, offsite_manifest FROM checkpoints
		WHERE id = $1 AND offsite_manifest IS NOT NULL AND offsite_manifest <> $2
		ON CONFLICT DO NOTHING`, id, keep)
	if err != nil {
		return fmt.Errorf("queue the off-site delete: %w", err)
	}
	return nil
}

// OffsiteDeletes implements metadata.Store.
func (s *Store) OffsiteDeletes(ctx context.Context, accountID int64) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT manifest FROM offsite_deletes WHERE account_id = $1`, accountID)
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
	if len(manifests) == 0 {
		return nil
	}
	if _, err := s.exec(ctx, `DELETE FROM offsite_deletes WHERE account_id = $1 AND manifest = ANY($2)`,
		accountID, manifests); err != nil {
		return fmt.Errorf("metadata: forget off-site deletes: %w", err)
	}
	return nil
}

// SetCheckpointName implements metadata.Store.
func (s *Store) SetCheckpointName(ctx context.Context, id, name string) error {
	what := fmt.Sprintf("metadata: name checkpoint %s %q", id, name)
	res, err := s.exec(ctx, `UPDATE checkpoints SET name = $1 WHERE id = $2`, nullable(name), id)
	if err != nil {
		if _, unique := violated(err); unique {
			return fmt.Errorf("%s: name taken in the account: %w", what, metadata.ErrConflict)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// KeepCheckpoint implements metadata.Store.
func (s *Store) KeepCheckpoint(ctx context.Context, id string) error {
	return s.execOne(ctx, "metadata: keep checkpoint "+id, `UPDATE checkpoints SET from_inside = FALSE WHERE id = $1`, id)
}

// DeleteCheckpoint implements metadata.Store. The sandbox's counter is left
// as it is, so the checkpoint's v-number is not given again. The sandboxes
// that would resume from the checkpoint lose it in the same transaction
// (found through sandboxes_resume_idx), so no committed state has a
// resume checkpoint that is gone; its off-site manifest and its paths in
// the pool are queued for deletion in it too, so none is left that
// nothing names and nothing will delete.
func (s *Store) DeleteCheckpoint(ctx context.Context, id string) error {
	what := "metadata: delete checkpoint " + id
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := queueOffsiteDelete(ctx, tx, id, ""); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO disk_deletes (path, checkpoint_id, queued_at, host_id)
			SELECT disk_path, id, $1::timestamptz, host_id FROM checkpoints WHERE id = $2 AND disk_path <> ''
			UNION ALL
			SELECT memory_path, id, $1::timestamptz, host_id FROM checkpoints WHERE id = $2 AND memory_path <> ''
			ON CONFLICT DO NOTHING`,
			s.nowTime(), id); err != nil {
			return fmt.Errorf("queue the disk deletes: %w", err)
		}
		if err := execOneTx(ctx, tx, `DELETE FROM checkpoints WHERE id = $1`, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE sandboxes SET resume_checkpoint = NULL, updated_at = $1
			WHERE resume_checkpoint = $2`, s.nowTime(), id)
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
