package metadata

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// JournalState is how far a journalled operation got.
type JournalState string

// Journal states.
const (
	// JournalRunning: the operation started and has not ended; found at
	// start, it was interrupted by the death of the cairnd running it.
	JournalRunning JournalState = "running"
	// JournalDone: it did all it set out to do.
	JournalDone JournalState = "done"
	// JournalFailed: it failed and undid what it had made.
	JournalFailed JournalState = "failed"
	// JournalUndone: it was interrupted, and the next start of cairnd
	// undid what it had made (JournalEntry.Message says so).
	JournalUndone JournalState = "undone"
)

// Valid reports whether s is one of the known states.
func (s JournalState) Valid() bool {
	return s == JournalRunning || s == JournalDone || s == JournalFailed || s == JournalUndone
}

// JournalChild is a sandbox a journalled operation makes.
type JournalChild struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// JournalEntry records a multi-step operation (a fork making several
// sandboxes) before it changes anything, so that if the cairnd running it
// dies the next start knows what to undo, and the operation's client can
// learn how it ended.
type JournalEntry struct {
	ID        string // the operation's id, unique; chosen by the caller
	Kind      string // the operation's kind, "sandbox.fork"
	Owner     string // lease owner of the cairnd instance running it
	AccountID int64
	SandboxID string         // the sandbox it works on; "" for none
	Children  []JournalChild // the sandboxes it makes, known before the first exists
	// Detail is what recovery needs to know of an operation of this kind
	// beyond its children, as the kind encodes it (JSON); "" for none.
	Detail string
	State  JournalState
	// Code and Message say why it failed or what was undone (an API
	// error code and text); "" while running or done.
	Code      string
	Message   string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Validate checks what the store relies on: an id, a kind, an owner, an
// account, a known state, and children with ids.
func (e JournalEntry) Validate() error {
	switch {
	case e.ID == "":
		return errors.New("invalid journal entry: empty id")
	case e.Kind == "":
		return fmt.Errorf("invalid journal entry %s: empty kind", e.ID)
	case e.Owner == "":
		return fmt.Errorf("invalid journal entry %s: empty owner", e.ID)
	case e.AccountID == 0:
		return fmt.Errorf("invalid journal entry %s: no account", e.ID)
	case !e.State.Valid():
		return fmt.Errorf("invalid journal entry %s: unknown state %q", e.ID, e.State)
	}
	for _, c := range e.Children {
		if c.ID == "" {
			return fmt.Errorf("invalid journal entry %s: a child without an id", e.ID)
		}
	}
	return nil
}

// JournalFilter narrows ListJournal; the zero value matches every entry.
type JournalFilter struct {
	State       JournalState // only entries in this state; "" = any
	OwnerPrefix string       // only entries whose Owner begins with it
	// UpdatedSince keeps entries last changed at or after it (in the
	// store's precision: microseconds); zero = any.
	UpdatedSince time.Time
}

// Matches reports whether e passes f (what stores filter by).
func (f JournalFilter) Matches(e JournalEntry) bool {
	return (f.State == "" || e.State == f.State) &&
		strings.HasPrefix(e.Owner, f.OwnerPrefix) &&
		(f.UpdatedSince.IsZero() || !e.UpdatedAt.Before(f.UpdatedSince))
}
