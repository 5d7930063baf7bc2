// Package metadata defines what cairnd remembers about accounts and sandboxes
// (and, next, their checkpoints), behind one Store interface.
//
// Implementations live in subpackages: sqlite (the embedded default) and,
// later, postgres (several hosts sharing one control plane). Both apply the
// same numbered schema migrations from package migrations and pass the one
// shared test suite in package storetest.
//
// The store is mechanism only: it keeps rows consistent (unique names per
// account, ids, references) and reports what went wrong with the sentinel
// errors below. Validating names, images and limits, locking sandboxes and
// turning errors into API codes belong to the layers above.
package metadata

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Implementations wrap them with %w and context, so test
// with errors.Is.
var (
	// ErrNotFound means the account or sandbox asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a write would break a uniqueness rule: a sandbox name
	// already used in the account, or a sandbox id already used anywhere.
	ErrConflict = errors.New("already exists")
	// ErrSchemaTooNew means the database was migrated by a newer cairnd
	// than this one; this binary refuses to touch it.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
)

// Account owns sandboxes (and checkpoints, a disk limit and a key).
type Account struct {
	ID        int64 // assigned by the store; never reused
	Name      string
	CreatedAt time.Time
}

// SandboxState is the desired (last known) state of a sandbox, persisted so a
// restarted cairnd can re-adopt what was running.
type SandboxState string

// Sandbox states.
const (
	SandboxStopped SandboxState = "stopped"
	SandboxRunning SandboxState = "running"
)

// Valid reports whether s is one of the known states.
func (s SandboxState) Valid() bool {
	return s == SandboxStopped || s == SandboxRunning
}

// Sandbox is one sandbox of an account.
type Sandbox struct {
	ID          string // random 16 hex chars, immutable, assigned by the caller
	AccountID   int64
	Name        string // unique in the account
	Image       string
	State       SandboxState
	CPUs        float64 // 0 = unlimited
	MemoryBytes int64   // 0 = default
	ParentID    string  // the sandbox this one was forked from; "" when none
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Validate checks what the store itself relies on: an id, an account, a name,
// a known state and non-negative limits. It does not judge name syntax or
// image names; the sandbox manager does.
func (sb Sandbox) Validate() error {
	switch {
	case sb.ID == "":
		return errors.New("invalid sandbox: empty id")
	case sb.AccountID == 0:
		return fmt.Errorf("invalid sandbox %s: no account", sb.ID)
	case sb.Name == "":
		return fmt.Errorf("invalid sandbox %s: empty name", sb.ID)
	case !sb.State.Valid():
		return fmt.Errorf("invalid sandbox %s: unknown state %q", sb.ID, sb.State)
	case sb.CPUs < 0:
		return fmt.Errorf("invalid sandbox %s: negative cpus %g", sb.ID, sb.CPUs)
	case sb.MemoryBytes < 0:
		return fmt.Errorf("invalid sandbox %s: negative memory %d", sb.ID, sb.MemoryBytes)
	}
	return nil
}

// SandboxFilter narrows ListSandboxes. The zero value matches every sandbox
// of the account.
type SandboxFilter struct {
	ParentID string // only sandboxes forked from this sandbox id; "" = any
}

// Store persists accounts and sandboxes.
//
// What every implementation guarantees:
//   - Each method is atomic: it is applied entirely or not at all, and a
//     method that returned nil is durable (it survives the process being
//     killed right after).
//   - Safe for concurrent use by many goroutines; concurrent writers wait
//     for each other rather than fail with "database is locked".
//   - Errors: a missing account or sandbox is reported by wrapping
//     ErrNotFound, a uniqueness violation by wrapping ErrConflict; anything
//     else (invalid input, I/O, a cancelled ctx) is a plain error.
//   - Times are returned in UTC with microsecond precision (what PostgreSQL
//     keeps); times given to the store are converted the same way. Zero
//     CreatedAt/UpdatedAt are filled in from the clock the store was opened
//     with; the store never reads the wall clock on its own.
//   - A list with no match is empty with a nil error, not ErrNotFound.
type Store interface {
	// EnsureAccount returns the account called name, creating it if it does
	// not exist. It is idempotent: calling it again, concurrently or not,
	// returns the same account.
	EnsureAccount(ctx context.Context, name string) (Account, error)
	// AccountByName returns the account called name, or ErrNotFound.
	AccountByName(ctx context.Context, name string) (Account, error)

	// CreateSandbox stores a new sandbox. sb.ID is chosen by the caller.
	// It fails with ErrConflict when the account already has a sandbox
	// named sb.Name or any sandbox has id sb.ID, and with ErrNotFound when
	// sb.AccountID is no account. A zero CreatedAt is set to now, a zero
	// UpdatedAt to CreatedAt. sb.ParentID need not name an existing sandbox:
	// a fork outlives its parent.
	CreateSandbox(ctx context.Context, sb Sandbox) error
	// SandboxByName returns the sandbox called name in the account, or
	// ErrNotFound.
	SandboxByName(ctx context.Context, accountID int64, name string) (Sandbox, error)
	// SandboxByID returns the sandbox with that id, or ErrNotFound.
	SandboxByID(ctx context.Context, id string) (Sandbox, error)
	// ListSandboxes returns the account's sandboxes that match f, ordered
	// by name (byte-wise, not by locale).
	ListSandboxes(ctx context.Context, accountID int64, f SandboxFilter) ([]Sandbox, error)
	// AllSandboxes returns the sandboxes of every account, ordered by
	// account id and then name; cairnd re-adopts them at start.
	AllSandboxes(ctx context.Context) ([]Sandbox, error)
	// SetSandboxState records st as the sandbox's state and sets UpdatedAt
	// to now, even when the state does not change. ErrNotFound if no
	// sandbox has that id.
	SetSandboxState(ctx context.Context, id string, st SandboxState) error
	// DeleteSandbox removes the sandbox, or returns ErrNotFound if no
	// sandbox has that id (so a second delete reports ErrNotFound).
	DeleteSandbox(ctx context.Context, id string) error

	// Close releases the store. No method may be called after it.
	Close() error
}
