package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Sandboxes (migrations 0001 to 0014, 0019).

const sandboxColumns = `id, account_id, name, image, state, cpus, memory_bytes, parent_id,
	current_checkpoint, source_checkpoint, auto_checkpoint_seconds, resume_checkpoint, created_at, updated_at,
	restart_policy, crash_reason, crashed_at, oom_process, oom_at,
	inside_memory, inside_names, inside_per_minute, inside_keep, disk_bytes, network_mode, network_rules, settings, host_id`

// errOrphanCheckpoints is returned by CreateSandbox's transaction when
// checkpoints of a deleted sandbox carry the new sandbox's id.
var errOrphanCheckpoints = errors.New("checkpoints of a deleted sandbox carry this id")

// CreateSandbox implements metadata.Store.
func (s *Store) CreateSandbox(ctx context.Context, sb metadata.Sandbox) error {
	if err := sb.Validate(); err != nil {
		return fmt.Errorf("metadata: create sandbox: %w", err)
	}
	autoSeconds, _ := metadata.AutoCheckpointSeconds(sb.AutoCheckpoint) // checked by Validate
	sb.CreatedAt = s.stamp(sb.CreatedAt)
	if sb.Restart == "" {
		sb.Restart = metadata.RestartOnFailure
	}
	if sb.UpdatedAt.IsZero() {
		sb.UpdatedAt = sb.CreatedAt
	}
	mode, rules, err := sb.Network.Columns()
	if err != nil {
		return fmt.Errorf("metadata: create sandbox: %w", err)
	}
	settings, err := sb.Settings.Column()
	if err != nil {
		return fmt.Errorf("metadata: create sandbox: %w", err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		// A sandbox id is used once: a new sandbox with the id of a deleted
		// one would inherit its checkpoints (and its v-numbers again).
		var orphans bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE sandbox_id = $1)`,
			sb.ID).Scan(&orphans); err != nil {
			return err
		}
		if orphans {
			return errOrphanCheckpoints
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`) VALUES (`+params(28)+`)`,
			sb.ID, sb.AccountID, sb.Name, sb.Image, string(sb.State), sb.CPUs, sb.MemoryBytes, nullable(sb.ParentID),
			nullable(sb.CurrentCheckpoint), nullable(sb.SourceCheckpoint), autoSeconds, nullable(sb.ResumeCheckpoint),
			normTime(sb.CreatedAt), normTime(sb.UpdatedAt),
			string(sb.Restart), nullable(sb.LastCrash.What), nullableTime(sb.LastCrash.At),
			nullable(sb.LastOOMKill.What), nullableTime(sb.LastOOMKill.At),
			sb.Inside.Memory, sb.Inside.Names, sb.Inside.PerMinute, sb.Inside.Keep, sb.DiskBytes, mode, rules, settings, sb.HostID)
		return err
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, errOrphanCheckpoints) {
		return fmt.Errorf("metadata: create sandbox: id %s is used by checkpoints of a deleted sandbox: %w", sb.ID, metadata.ErrConflict)
	}
	switch constraint, unique := violated(err); {
	case constraint == "sandboxes_pkey":
		return fmt.Errorf("metadata: create sandbox: id %s: %w", sb.ID, metadata.ErrConflict)
	case unique:
		return fmt.Errorf("metadata: create sandbox: name %q in account %d: %w", sb.Name, sb.AccountID, metadata.ErrConflict)
	case constraint != "":
		return fmt.Errorf("metadata: create sandbox %q: account %d: %w", sb.Name, sb.AccountID, metadata.ErrNotFound)
	}
	return fmt.Errorf("metadata: create sandbox %q: %w", sb.Name, err)
}

// SandboxByName implements metadata.Store.
func (s *Store) SandboxByName(ctx context.Context, accountID int64, name string) (metadata.Sandbox, error) {
	sb, err := s.oneSandbox(ctx, `WHERE account_id = $1 AND name = $2`, accountID, name)
	if err != nil {
		return metadata.Sandbox{}, fmt.Errorf("metadata: sandbox %q in account %d: %w", name, accountID, err)
	}
	return sb, nil
}

// SandboxByID implements metadata.Store.
func (s *Store) SandboxByID(ctx context.Context, id string) (metadata.Sandbox, error) {
	sb, err := s.oneSandbox(ctx, `WHERE id = $1`, id)
	if err != nil {
		return metadata.Sandbox{}, fmt.Errorf("metadata: sandbox %s: %w", id, err)
	}
	return sb, nil
}

func (s *Store) oneSandbox(ctx context.Context, where string, args ...any) (metadata.Sandbox, error) {
	sbs, err := s.sandboxes(ctx, where, args...)
	if err != nil {
		return metadata.Sandbox{}, err
	}
	if len(sbs) == 0 {
		return metadata.Sandbox{}, metadata.ErrNotFound
	}
	return sbs[0], nil
}

// ListSandboxes implements metadata.Store. Names are COLLATE "C": the
// order is byte-wise whatever the cluster's locale.
func (s *Store) ListSandboxes(ctx context.Context, accountID int64, f metadata.SandboxFilter) ([]metadata.Sandbox, error) {
	where, args := `WHERE account_id = $1`, []any{accountID}
	if f.ParentID != "" {
		where, args = where+` AND parent_id = $2`, append(args, f.ParentID)
	}
	sbs, err := s.sandboxes(ctx, where+` ORDER BY name`, args...)
	if err != nil {
		return nil, fmt.Errorf("metadata: list sandboxes of account %d: %w", accountID, err)
	}
	return sbs, nil
}

// AllSandboxes implements metadata.Store.
func (s *Store) AllSandboxes(ctx context.Context) ([]metadata.Sandbox, error) {
	sbs, err := s.sandboxes(ctx, `ORDER BY account_id, name`)
	if err != nil {
		return nil, fmt.Errorf("metadata: list all sandboxes: %w", err)
	}
	return sbs, nil
}

// sandboxes runs SELECT … FROM sandboxes with the rest of the query given.
// The result is empty, never nil.
func (s *Store) sandboxes(ctx context.Context, rest string, args ...any) ([]metadata.Sandbox, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes `+rest, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []metadata.Sandbox{}
	for rows.Next() {
		var (
			sb                       metadata.Sandbox
			state                    string
			parent, cur, src, resume sql.NullString
			autoSeconds              int64
			created, updated         time.Time
			restart                  string
			crash, oom               sql.NullString
			crashAt, oomAt           sql.NullTime
			rules, settings          string
		)
		if err := rows.Scan(&sb.ID, &sb.AccountID, &sb.Name, &sb.Image, &state, &sb.CPUs, &sb.MemoryBytes,
			&parent, &cur, &src, &autoSeconds, &resume, &created, &updated,
			&restart, &crash, &crashAt, &oom, &oomAt,
			&sb.Inside.Memory, &sb.Inside.Names, &sb.Inside.PerMinute, &sb.Inside.Keep,
			&sb.DiskBytes, &sb.Network.Mode, &rules, &settings, &sb.HostID); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(rules), &sb.Network); err != nil {
			return nil, fmt.Errorf("sandbox %s: stored network rules: %w", sb.ID, err)
		}
		var err error
		if sb.Settings, err = metadata.ReadSettings(settings); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", sb.ID, err)
		}
		sb.Restart = metadata.RestartPolicy(restart)
		sb.LastCrash = metadata.Event{What: crash.String, At: readTime(crashAt)}
		sb.LastOOMKill = metadata.Event{What: oom.String, At: readTime(oomAt)}
		sb.State, sb.ParentID = metadata.SandboxState(state), parent.String
		sb.CurrentCheckpoint, sb.SourceCheckpoint, sb.ResumeCheckpoint = cur.String, src.String, resume.String
		if autoSeconds <= 0 || autoSeconds > math.MaxInt64/int64(time.Second) {
			return nil, fmt.Errorf("sandbox %s: stored automatic checkpoint interval %d s is out of range", sb.ID, autoSeconds)
		}
		sb.AutoCheckpoint = time.Duration(autoSeconds) * time.Second
		sb.CreatedAt, sb.UpdatedAt = created.UTC(), updated.UTC()
		out = append(out, sb)
	}
	return out, rows.Err()
}

// SetSandboxState implements metadata.Store.
func (s *Store) SetSandboxState(ctx context.Context, id string, st metadata.SandboxState) error {
	if !st.Valid() {
		return fmt.Errorf("metadata: set state of sandbox %s: unknown state %q", id, st)
	}
	return s.execOne(ctx, "metadata: set state of sandbox "+id,
		`UPDATE sandboxes SET state = $1, updated_at = $2 WHERE id = $3`, string(st), s.nowTime(), id)
}

// SetCurrentCheckpoint implements metadata.Store.
func (s *Store) SetCurrentCheckpoint(ctx context.Context, sandboxID, checkpointID string) error {
	what := fmt.Sprintf("metadata: set current checkpoint of sandbox %s to %q", sandboxID, checkpointID)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var account int64
		err := tx.QueryRowContext(ctx, `SELECT account_id FROM sandboxes WHERE id = $1`, sandboxID).Scan(&account)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox: %w", metadata.ErrNotFound)
		} else if err != nil {
			return err
		}
		if checkpointID != "" {
			var found bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE id = $1 AND account_id = $2)`,
				checkpointID, account).Scan(&found); err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("no checkpoint %s in account %d: %w", checkpointID, account, metadata.ErrNotFound)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET current_checkpoint = $1, updated_at = $2 WHERE id = $3`,
			nullable(checkpointID), s.nowTime(), sandboxID)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SetAutoCheckpoint implements metadata.Store.
func (s *Store) SetAutoCheckpoint(ctx context.Context, sandboxID string, every time.Duration) error {
	what := fmt.Sprintf("metadata: set automatic checkpoint interval of sandbox %s to %v", sandboxID, every)
	seconds, err := metadata.AutoCheckpointSeconds(every)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.execOne(ctx, what, `UPDATE sandboxes SET auto_checkpoint_seconds = $1, updated_at = $2 WHERE id = $3`,
		seconds, s.nowTime(), sandboxID)
}

// SetResumeCheckpoint implements metadata.Store.
func (s *Store) SetResumeCheckpoint(ctx context.Context, sandboxID, checkpointID string) error {
	what := fmt.Sprintf("metadata: set resume checkpoint of sandbox %s to %q", sandboxID, checkpointID)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var account int64
		err := tx.QueryRowContext(ctx, `SELECT account_id FROM sandboxes WHERE id = $1`, sandboxID).Scan(&account)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox: %w", metadata.ErrNotFound)
		} else if err != nil {
			return err
		}
		if checkpointID != "" {
			// The account too: an automatic checkpoint needs no sandbox
			// row, so one of another account could carry this sandbox id.
			var found bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints
				WHERE id = $1 AND sandbox_id = $2 AND account_id = $3)`,
				checkpointID, sandboxID, account).Scan(&found); err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("no checkpoint %s of the sandbox: %w", checkpointID, metadata.ErrNotFound)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET resume_checkpoint = $1, updated_at = $2 WHERE id = $3`,
			nullable(checkpointID), s.nowTime(), sandboxID)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SetInsidePolicy implements metadata.Store.
func (s *Store) SetInsidePolicy(ctx context.Context, sandboxID string, p metadata.InsidePolicy) error {
	what := fmt.Sprintf("metadata: set inside policy of sandbox %s to %+v", sandboxID, p)
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.execOne(ctx, what, `UPDATE sandboxes SET inside_memory = $1, inside_names = $2,
		inside_per_minute = $3, inside_keep = $4, updated_at = $5 WHERE id = $6`,
		p.Memory, p.Names, p.PerMinute, p.Keep, s.nowTime(), sandboxID)
}

// SetSandboxCrashed implements metadata.Store.
func (s *Store) SetSandboxCrashed(ctx context.Context, id, reason string, at time.Time) error {
	return s.execOne(ctx, "metadata: mark sandbox "+id+" crashed",
		`UPDATE sandboxes SET state = $1, crash_reason = $2, crashed_at = $3, updated_at = $4 WHERE id = $5`,
		string(metadata.SandboxCrashed), reason, s.stamp(at), s.nowTime(), id)
}

// SetRestartPolicy implements metadata.Store.
func (s *Store) SetRestartPolicy(ctx context.Context, id string, p metadata.RestartPolicy) error {
	what := fmt.Sprintf("metadata: set restart policy of sandbox %s to %q", id, p)
	if !p.Valid() {
		return fmt.Errorf("%s: unknown policy", what)
	}
	return s.execOne(ctx, what, `UPDATE sandboxes SET restart_policy = $1, updated_at = $2 WHERE id = $3`,
		string(p), s.nowTime(), id)
}

// SetSandboxNetwork implements metadata.Store.
func (s *Store) SetSandboxNetwork(ctx context.Context, id string, n metadata.NetworkSettings) error {
	what := "metadata: set network of sandbox " + id
	mode, rules, err := n.Columns()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.execOne(ctx, what, `UPDATE sandboxes SET network_mode = $1, network_rules = $2, updated_at = $3 WHERE id = $4`,
		mode, rules, s.nowTime(), id)
}

// SetSandboxSettings implements metadata.Store.
func (s *Store) SetSandboxSettings(ctx context.Context, id string, set metadata.SandboxSettings) error {
	what := "metadata: set settings of sandbox " + id
	v, err := set.Column()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return s.execOne(ctx, what, `UPDATE sandboxes SET settings = $1, updated_at = $2 WHERE id = $3`, v, s.nowTime(), id)
}

// SetLastOOMKill implements metadata.Store.
func (s *Store) SetLastOOMKill(ctx context.Context, id, process string, at time.Time) error {
	return s.execOne(ctx, "metadata: record an OOM kill in sandbox "+id,
		`UPDATE sandboxes SET oom_process = $1, oom_at = $2 WHERE id = $3`, process, s.stamp(at), id)
}

// DeleteSandbox implements metadata.Store. Its published ports go with it
// (ON DELETE CASCADE).
func (s *Store) DeleteSandbox(ctx context.Context, id string) error {
	return s.execOne(ctx, "metadata: delete sandbox "+id, `DELETE FROM sandboxes WHERE id = $1`, id)
}
