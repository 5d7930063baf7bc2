package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// Operations that make several things (a fork's children) record what
// they will make in the store's journal before they make any of it, and
// mark the entry when they end. An entry still running when cairnd starts
// again belongs to an operation its predecessor on this host was killed in
// the middle of: recovery undoes it (every sandbox it made goes, with its
// files and any checkpoint of its own; what the operation took of the
// source, a fork's checkpoint, stays as an ordinary checkpoint), marks it
// undone, and the operation's id answers, failed with O02, for as long as
// the journal keeps it (journalKeep), like every journalled operation
// that ended (ArchivedOperation). See docs/reliability.md.

// journalKeep is how long ended journal entries stay, so that the client
// of an interrupted operation can still learn how it ended.
const journalKeep = 7 * 24 * time.Hour

// journal is one journalled operation under way.
type journal struct {
	m  *Manager
	id string
}

// beginJournal records that op is about to make children (sandboxes of
// account acct), working on sandbox sandboxID ("" for none). Nothing may
// be made before it returns nil.
func (m *Manager) beginJournal(ctx context.Context, op *operation.Op, acct metadata.Account, sandboxID string, children []metadata.Sandbox) (*journal, error) {
	return m.beginJournalDetail(ctx, op, acct.ID, sandboxID, children, "")
}

// beginJournalDetail is beginJournal with the detail recovery needs of
// op's kind (JSON; "" for none).
func (m *Manager) beginJournalDetail(ctx context.Context, op *operation.Op, accountID int64, sandboxID string, children []metadata.Sandbox, detail string) (*journal, error) {
	info := op.Info()
	e := metadata.JournalEntry{
		ID: info.ID, Kind: info.Kind, Owner: m.cfg.Leases.Owner(), AccountID: accountID,
		SandboxID: sandboxID, Detail: detail, State: metadata.JournalRunning,
	}
	for _, c := range children {
		e.Children = append(e.Children, metadata.JournalChild{ID: c.ID, Name: c.Name})
	}
	if err := m.cfg.Store.BeginJournal(ctx, e); err != nil {
		return nil, fmt.Errorf("record the operation before it starts (nothing was made): %w", err)
	}
	return &journal{m: m, id: info.ID}, nil
}

// journalled runs work, the work of op, which makes the sandboxes
// children (their ids and names set; sandboxID is the sandbox it works
// on, "" for none), between a journal entry begun before it and marked
// when it ends. work must undo what it made when it fails. If the entry
// cannot be marked done, the children are removed and op fails: the next
// start would undo them anyway.
func (m *Manager) journalled(ctx context.Context, op *operation.Op, acct metadata.Account, sandboxID string, children []metadata.Sandbox, work func() (any, error)) (any, error) {
	j, err := m.beginJournal(ctx, op, acct, sandboxID, children)
	if err != nil {
		return nil, err
	}
	out, err := work()
	if err == nil {
		if err = j.done(ctx); err != nil {
			m.destroyAll(ctx, children)
			out, err = nil, fmt.Errorf("record the operation as done (what it made was removed): %w", err)
		}
	}
	if err != nil {
		j.failed(ctx, err)
		return nil, err
	}
	return out, nil
}

// done marks the operation done. If that cannot be recorded, the caller
// must undo what it made and fail: a start would undo it anyway.
func (j *journal) done(ctx context.Context) error {
	return j.m.cfg.Store.FinishJournal(context.WithoutCancel(ctx), j.id, metadata.JournalDone, "", "")
}

// failed marks the operation failed, once it has undone what it made.
func (j *journal) failed(ctx context.Context, err error) {
	logErr("journal: mark failed", j.m.cfg.Store.FinishJournal(context.WithoutCancel(ctx), j.id, metadata.JournalFailed, errdefs.CodeOf(err), err.Error()), "operation", j.id)
}

// undoJournal undoes the operations this host's earlier instances left
// running in the journal (they died in the middle), before the sweep: it
// deletes the rows of the sandboxes each made, and their own checkpoints,
// so that the sweep that follows removes their containers, roots, host
// directories and browse views as those of sandboxes never committed. It
// also forgets the entries older than journalKeep.
func (m *recovery) undoJournal(ctx context.Context) error {
	if m.cfg.HostID == "" {
		return nil
	}
	entries, err := m.cfg.Store.ListJournal(ctx, metadata.JournalFilter{State: metadata.JournalRunning, OwnerPrefix: lease.OwnerPrefix(m.cfg.HostID)})
	if err != nil {
		return err
	}
	for _, e := range entries {
		if m.takenOver(ctx, e) {
			continue
		}
		// One that cannot be undone now must not keep cairnd down: it
		// stays running in the journal, and the next start tries again.
		var err error
		switch e.Kind {
		case kindRestore, kindDelete:
			var after afterInterrupt
			var ok bool
			if after, ok, err = m.settleInPlace(ctx, e); err == nil && ok {
				m.interrupted[e.SandboxID] = after
			}
		default:
			err = m.undoEntry(ctx, e)
		}
		if err != nil {
			slog.Error("recover: cannot settle an interrupted operation", "operation", e.ID, "kind", e.Kind, "err", err)
		}
	}
	now := m.cfg.Now()
	if n, err := m.cfg.Store.PruneJournal(ctx, now.Add(-journalKeep)); err != nil {
		logErr("journal: prune", err)
	} else if n > 0 {
		slog.Info("journal: forgot old entries", "count", n)
	}
	return nil
}

// takenOver reports whether entry e's sandbox is another host's now (it
// was evacuated while this host was down): its operation is not settled
// here, where nothing of the sandbox is any longer this host's to change,
// but ended as interrupted.
func (m *recovery) takenOver(ctx context.Context, e metadata.JournalEntry) bool {
	if m.cfg.Mine == nil || e.SandboxID == "" {
		return false
	}
	sb, err := m.cfg.Store.SandboxByID(ctx, e.SandboxID)
	if err != nil || m.cfg.Mine(sb.HostID) {
		return false
	}
	slog.Warn("recover: the interrupted operation's sandbox was taken over by another host meanwhile; not settled here", "operation", e.ID, "sandbox", sb.Name)
	logErr("journal: mark taken over", m.cfg.Store.FinishJournal(ctx, e.ID, metadata.JournalUndone, api.CodeInterrupted,
		"interrupted when its host stopped; the sandbox was restored on another host meanwhile"), "operation", e.ID)
	return true
}

// ArchivedOperation answers for an operation an earlier cairnd ran, as
// the journal says it ended (an operation.Archive): done is a success
// (without its result), failed and undone failures with their code
// (undone: O02). One still running is not answered here: it is another
// host's, or this one's from before a start that has not undone it yet.
func (m *Manager) ArchivedOperation(id string) (api.Operation, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := m.cfg.Store.JournalEntry(ctx, id)
	if err != nil || e.State == metadata.JournalRunning {
		return api.Operation{}, false
	}
	// As the operation named it: the sandbox it made (a create, a
	// restore as new), or the one it forked.
	resource := ""
	if len(e.Children) == 1 {
		resource = "sandbox/" + e.Children[0].Name
	} else if sb, err := m.cfg.Store.SandboxByID(ctx, e.SandboxID); err == nil {
		resource = "sandbox/" + sb.Name
	} else if d := (inPlaceDetail{}); json.Unmarshal([]byte(e.Detail), &d) == nil && d.Name != "" {
		resource = "sandbox/" + d.Name // a deleted one
	}
	op := api.Operation{ID: e.ID, Kind: e.Kind, Resource: resource, Status: api.OpSuccess, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if e.State != metadata.JournalDone {
		op.Status = api.OpFailure
		code := e.Code
		if code == "" {
			code = api.CodeInternal
		}
		op.Error = &api.ErrorInfo{Code: code, Message: e.Message}
	}
	return op, true
}

// undoEntry removes what interrupted operation e made and marks it undone.
func (m *recovery) undoEntry(ctx context.Context, e metadata.JournalEntry) error {
	slog.Warn("recover: undoing an operation interrupted by the restart", "operation", e.ID, "kind", e.Kind, "children", len(e.Children))
	removed := 0
	for _, c := range e.Children {
		err := m.cfg.Store.DeleteSandbox(ctx, c.ID)
		switch {
		case err == nil:
			removed++
		case !errors.Is(err, metadata.ErrNotFound):
			return err
		}
		// A checkpoint of its own (an interval one taken meanwhile) goes
		// with it: it was never the user's.
		cks, err := m.cfg.Store.ListCheckpoints(ctx, e.AccountID, metadata.CheckpointFilter{SandboxID: c.ID, IncludeAuto: true})
		if err != nil {
			return err
		}
		for _, ck := range cks {
			if err := m.cfg.Disks.Delete(ctx, ck); err != nil {
				return fmt.Errorf("checkpoint %s of %s: %w", ck.Seq, c.Name, err)
			}
		}
	}
	msg := fmt.Sprintf("interrupted by a cairnd restart at %s; undone: no copy was kept", m.cfg.Now().UTC().Format(time.RFC3339))
	if removed > 0 {
		msg += fmt.Sprintf(" (%d of the %d sandboxes it was making existed, and were removed)", removed, len(e.Children))
	}
	return m.cfg.Store.FinishJournal(ctx, e.ID, metadata.JournalUndone, api.CodeInterrupted, msg)
}
