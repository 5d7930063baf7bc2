package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// The journal of multi-step operations (migrations 0011 and 0012).

const journalColumns = `id, kind, owner, account_id, sandbox_id, children, detail, state, code, message, created_at, updated_at`

// BeginJournal implements metadata.Store.
func (s *Store) BeginJournal(ctx context.Context, e metadata.JournalEntry) error {
	what := "metadata: begin journal entry " + e.ID
	if err := e.Validate(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if e.State != metadata.JournalRunning {
		return fmt.Errorf("%s: state %q, want %q", what, e.State, metadata.JournalRunning)
	}
	children := e.Children
	if children == nil {
		children = []metadata.JournalChild{}
	}
	doc, err := json.Marshal(children)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	e.CreatedAt = s.stamp(e.CreatedAt)
	if e.UpdatedAt.IsZero() {
		e.UpdatedAt = e.CreatedAt
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO journal (`+journalColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.Kind, e.Owner, e.AccountID, e.SandboxID, string(doc), e.Detail, string(e.State), e.Code, e.Message,
		formatTime(e.CreatedAt), formatTime(e.UpdatedAt))
	switch sqliteCode(err) {
	case 0:
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return fmt.Errorf("%s: %w", what, metadata.ErrConflict)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("%s: account %d: %w", what, e.AccountID, metadata.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// FinishJournal implements metadata.Store.
func (s *Store) FinishJournal(ctx context.Context, id string, state metadata.JournalState, code, message string) error {
	what := fmt.Sprintf("metadata: finish journal entry %s as %s", id, state)
	if !state.Valid() || state == metadata.JournalRunning {
		return fmt.Errorf("%s: not a final state", what)
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE journal SET state = ?, code = ?, message = ?, updated_at = ? WHERE id = ?`,
		string(state), code, message, formatTime(s.now()), id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return oneRow(res, what)
}

// NoteJournal implements metadata.Store.
func (s *Store) NoteJournal(ctx context.Context, id, detail string) error {
	what := "metadata: note journal entry " + id
	res, err := s.writer.ExecContext(ctx, `UPDATE journal SET detail = ?, updated_at = ? WHERE id = ? AND state = 'running'`,
		detail, formatTime(s.now()), id)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	} else if n == 1 {
		return nil
	}
	if _, err := s.JournalEntry(ctx, id); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: it ended: %w", what, metadata.ErrConflict)
}

// JournalEntry implements metadata.Store.
func (s *Store) JournalEntry(ctx context.Context, id string) (metadata.JournalEntry, error) {
	e, err := scanJournal(s.reader.QueryRowContext(ctx, `SELECT `+journalColumns+` FROM journal WHERE id = ?`, id))
	if err != nil {
		return metadata.JournalEntry{}, fmt.Errorf("metadata: journal entry %s: %w", id, err)
	}
	return e, nil
}

// ListJournal implements metadata.Store.
func (s *Store) ListJournal(ctx context.Context, f metadata.JournalFilter) ([]metadata.JournalEntry, error) {
	if !f.UpdatedSince.IsZero() {
		f.UpdatedSince = normTime(f.UpdatedSince) // as the times it is compared with
	}
	out, err := func() ([]metadata.JournalEntry, error) {
		rows, err := s.reader.QueryContext(ctx, `SELECT `+journalColumns+` FROM journal ORDER BY created_at, serial`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []metadata.JournalEntry{}
		for rows.Next() {
			e, err := scanJournal(rows)
			if err != nil {
				return nil, err
			}
			if f.Matches(e) {
				out = append(out, e)
			}
		}
		return out, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("metadata: list journal: %w", err)
	}
	return out, nil
}

// PruneJournal implements metadata.Store.
func (s *Store) PruneJournal(ctx context.Context, before time.Time) (int, error) {
	res, err := s.writer.ExecContext(ctx, `DELETE FROM journal WHERE state != 'running' AND updated_at < ?`, formatTime(before))
	if err != nil {
		return 0, fmt.Errorf("metadata: prune journal: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("metadata: prune journal: %w", err)
	}
	return int(n), nil
}

// scanJournal reads one row of journalColumns; no row is ErrNotFound.
func scanJournal(row scanner) (metadata.JournalEntry, error) {
	var (
		e                 metadata.JournalEntry
		doc, st           string
		created, modified string
	)
	err := row.Scan(&e.ID, &e.Kind, &e.Owner, &e.AccountID, &e.SandboxID, &doc, &e.Detail, &st, &e.Code, &e.Message, &created, &modified)
	if errors.Is(err, sql.ErrNoRows) {
		return e, metadata.ErrNotFound
	} else if err != nil {
		return e, err
	}
	e.State = metadata.JournalState(st)
	if err := json.Unmarshal([]byte(doc), &e.Children); err != nil {
		return e, fmt.Errorf("journal entry %s: children: %w", e.ID, err)
	}
	if len(e.Children) == 0 {
		e.Children = nil
	}
	if e.CreatedAt, err = parseTime(created); err != nil {
		return e, err
	}
	e.UpdatedAt, err = parseTime(modified)
	return e, err
}
