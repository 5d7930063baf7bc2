package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	_, err = s.exec(ctx, `INSERT INTO journal (`+journalColumns+`) VALUES (`+params(12)+`)`,
		e.ID, e.Kind, e.Owner, e.AccountID, e.SandboxID, string(doc), e.Detail, string(e.State), e.Code, e.Message,
		e.CreatedAt, normTime(e.UpdatedAt))
	switch constraint, unique := violated(err); {
	case unique:
		return fmt.Errorf("%s: %w", what, metadata.ErrConflict)
	case constraint != "":
		return fmt.Errorf("%s: account %d: %w", what, e.AccountID, metadata.ErrNotFound)
	case err != nil:
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
	return s.execOne(ctx, what, `UPDATE journal SET state = $1, code = $2, message = $3, updated_at = $4 WHERE id = $5`,
		string(state), code, message, s.nowTime(), id)
}

// NoteJournal implements metadata.Store.
func (s *Store) NoteJournal(ctx context.Context, id, detail string) error {
	what := "metadata: note journal entry " + id
	res, err := s.exec(ctx, `UPDATE journal SET detail = $1, updated_at = $2 WHERE id = $3 AND state = 'running'`,
		detail, s.nowTime(), id)
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
	e, err := scanJournal(s.db.QueryRowContext(ctx, `SELECT `+journalColumns+` FROM journal WHERE id = $1`, id))
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
		rows, err := s.db.QueryContext(ctx, `SELECT `+journalColumns+` FROM journal ORDER BY created_at, serial`)
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
	res, err := s.exec(ctx, `DELETE FROM journal WHERE state <> 'running' AND updated_at < $1`, normTime(before))
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
		created, modified time.Time
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
	e.CreatedAt, e.UpdatedAt = created.UTC(), modified.UTC()
	return e, nil
}
