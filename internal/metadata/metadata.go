// Package metadata defines what cairnd remembers about accounts, sandboxes
// and their checkpoints, behind one Store interface.
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
	"math"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors. Implementations wrap them with %w and context, so test
// with errors.Is.
var (
	// ErrNotFound means the account, sandbox or checkpoint asked for does
	// not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a write would break a uniqueness rule: a sandbox name
	// already used in the account, a sandbox id already used anywhere (or
	// still referred to by checkpoints of a deleted sandbox), a checkpoint id
	// already used anywhere, a checkpoint Seq already used in the sandbox, or
	// a checkpoint name already used in the account.
	ErrConflict = errors.New("already exists")
	// ErrSchemaTooNew means the database was migrated by a newer cairnd
	// than this one; this binary refuses to touch it.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
)

// DefaultAccount is the account of every request on cairnd's local unix
// socket (the root administrator's channel).
const DefaultAccount = "default"

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

// DefaultAutoCheckpoint is the automatic checkpoint interval of a sandbox
// created without one (Sandbox.AutoCheckpoint 0), and of the sandboxes that
// existed before the interval was kept (schema version 3).
const DefaultAutoCheckpoint = 5 * time.Minute

// AutoCheckpointSeconds returns the whole number of seconds a store keeps
// for the automatic checkpoint interval every: 0 stands for
// DefaultAutoCheckpoint; a negative interval, or one that is not a whole
// number of seconds, is an error (the store does not round). Whether the
// interval is sensible (cairnd allows 60 s to 24 h) is the caller's to
// check, not the store's.
func AutoCheckpointSeconds(every time.Duration) (int64, error) {
	switch {
	case every < 0:
		return 0, fmt.Errorf("negative automatic checkpoint interval %v", every)
	case every == 0:
		every = DefaultAutoCheckpoint
	case every%time.Second != 0:
		return 0, fmt.Errorf("automatic checkpoint interval %v is not a whole number of seconds", every)
	}
	return int64(every / time.Second), nil
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
	// CurrentCheckpoint is the id of the checkpoint the disk was last
	// restored or forked from; "" when none. Changed by SetCurrentCheckpoint.
	CurrentCheckpoint string
	// SourceCheckpoint is the id of the checkpoint a fork or restore-as-new
	// was made from; "" when none. Set at create, never changed; like
	// ParentID it may outlive the checkpoint it names.
	SourceCheckpoint string
	// AutoCheckpoint is the interval of the sandbox's automatic checkpoints,
	// kept in whole seconds. 0 given to CreateSandbox stores
	// DefaultAutoCheckpoint, so a sandbox read back always has a positive
	// interval. Changed by SetAutoCheckpoint. The store only rejects
	// negative and sub-second intervals (see AutoCheckpointSeconds); range
	// checks are the caller's.
	AutoCheckpoint time.Duration
	// ResumeCheckpoint is the id of the memory checkpoint the stopped
	// sandbox resumes from at its next start (a saved session, taken by
	// cairn stop --snapshot); "" when none, and the sandbox cold-starts.
	// Changed by SetResumeCheckpoint; cleared by DeleteCheckpoint when it
	// deletes the checkpoint named here.
	ResumeCheckpoint string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Validate checks what the store itself relies on: an id, an account, a name,
// a known state, non-negative limits and an automatic checkpoint interval
// the store can keep (not negative, whole seconds). It does not judge name
// syntax, image names or whether the interval is in range; the sandbox
// manager does.
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
	if _, err := AutoCheckpointSeconds(sb.AutoCheckpoint); err != nil {
		return fmt.Errorf("invalid sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// SandboxFilter narrows ListSandboxes. The zero value matches every sandbox
// of the account.
type SandboxFilter struct {
	ParentID string // only sandboxes forked from this sandbox id; "" = any
}

// Checkpoint triggers: why a checkpoint was taken.
const (
	TriggerManual   = "manual"   // asked for by the user; the only trigger with v-ids
	TriggerInterval = "interval" // the sandbox's automatic interval
	TriggerStop     = "stop"
	TriggerRestart  = "restart"
	TriggerFork     = "fork"
	TriggerDelete   = "delete"
	TriggerRestore  = "restore" // before an in-place restore or rollback: its undo
)

// Checkpoint consistencies.
const (
	ConsistencyFrozen = "frozen" // file system quiesced and sandbox paused
	ConsistencyCrash  = "crash"  // taken without a completed quiesce
)

// Checkpoint is a saved state of one sandbox's disk (and memory).
// Immutable once created, except for its size fields, its name (snapshot
// name) and its off-site manifest.
type Checkpoint struct {
	// ID is the account-wide id: random 16 hex chars, assigned by the
	// caller; also the on-disk directory name. Unique across all accounts.
	ID        string
	AccountID int64
	// SandboxID is the sandbox it was taken of. Not a reference the store
	// keeps: checkpoints outlive their sandbox.
	SandboxID string
	// SandboxName is the sandbox's name when the checkpoint was taken,
	// kept for listing after the sandbox is deleted.
	SandboxName string
	// Seq is the per-sandbox id: "v0", "v1"… for manual checkpoints,
	// assigned by the store (see CreateCheckpoint); "auto-20261129T091500Z"
	// for automatic ones, given by the caller. Unique in the sandbox.
	Seq string
	// Name is the snapshot name, unique in the account; "" = unnamed.
	Name          string
	Trigger       string // one of the Trigger constants
	Consistency   string // one of the Consistency constants
	Comment       string
	Label         string
	HasMemory     bool
	Image         string // the image the sandbox was made from (to restore as new)
	SizeExclusive int64  // bytes only this checkpoint holds (what deleting it frees)
	SizeTotal     int64  // bytes it refers to in all
	// RootGeneration is the btrfs generation of the sandbox's root
	// subvolume right after the checkpoint was taken: a root still at that
	// generation has not changed since. 0 means unknown (checkpoints stored
	// before schema version 3): treat the disk as changed. Kept as a signed
	// 64-bit integer, so at most math.MaxInt64 (Validate checks).
	RootGeneration uint64
	// OffsiteManifest names the checkpoint's manifest in the account's
	// off-site repository once an upload committed it in at least one
	// location; "" until then. Which locations hold it is the
	// repository's to say. Changed by SetCheckpointOffsite.
	OffsiteManifest string
	CreatedAt       time.Time
}

// ManualSeq returns the per-sandbox id of the n-th manual checkpoint of a
// sandbox, counting from 0: "v0", "v1"… Stores use it to name what they
// assign.
func ManualSeq(n int64) string { return "v" + strconv.FormatInt(n, 10) }

// isManualSeq reports whether seq has the form of a store-assigned id:
// "v" and decimal digits.
func isManualSeq(seq string) bool {
	digits, ok := strings.CutPrefix(seq, "v")
	if !ok || digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Validate checks a checkpoint given to CreateCheckpoint for what the store
// itself relies on: an id, an account, a sandbox id and name, a known
// trigger and consistency, non-negative sizes, a RootGeneration that fits in
// an int64 (what SQL engines keep), and a Seq that is either
// empty (the store assigns the next v-id) or not of the v<N> form, which
// only the store assigns. It does not judge the syntax of names or of
// automatic ids.
func (ck Checkpoint) Validate() error {
	switch {
	case ck.ID == "":
		return errors.New("invalid checkpoint: empty id")
	case ck.AccountID == 0:
		return fmt.Errorf("invalid checkpoint %s: no account", ck.ID)
	case ck.SandboxID == "":
		return fmt.Errorf("invalid checkpoint %s: no sandbox id", ck.ID)
	case ck.SandboxName == "":
		return fmt.Errorf("invalid checkpoint %s: no sandbox name", ck.ID)
	case isManualSeq(ck.Seq):
		return fmt.Errorf("invalid checkpoint %s: seq %q: v-ids are assigned by the store, leave Seq empty", ck.ID, ck.Seq)
	case !validTrigger(ck.Trigger):
		return fmt.Errorf("invalid checkpoint %s: unknown trigger %q", ck.ID, ck.Trigger)
	case ck.Consistency != ConsistencyFrozen && ck.Consistency != ConsistencyCrash:
		return fmt.Errorf("invalid checkpoint %s: unknown consistency %q", ck.ID, ck.Consistency)
	case ck.SizeExclusive < 0 || ck.SizeTotal < 0:
		return fmt.Errorf("invalid checkpoint %s: negative size (exclusive %d, total %d)", ck.ID, ck.SizeExclusive, ck.SizeTotal)
	case ck.RootGeneration > math.MaxInt64:
		return fmt.Errorf("invalid checkpoint %s: root generation %d is past %d", ck.ID, ck.RootGeneration, int64(math.MaxInt64))
	}
	return nil
}

func validTrigger(t string) bool {
	switch t {
	case TriggerManual, TriggerInterval, TriggerStop, TriggerRestart, TriggerFork, TriggerDelete, TriggerRestore:
		return true
	}
	return false
}

// CheckpointFilter narrows ListCheckpoints. The zero value matches the
// manual and named checkpoints of every sandbox of the account, deleted
// sandboxes included.
type CheckpointFilter struct {
	SandboxID string // only checkpoints of this sandbox; "" = account-wide
	// IncludeAuto lists every checkpoint. Without it, only manual
	// (Trigger == TriggerManual) and named (Name != "") ones are listed.
	IncludeAuto bool
}

// Store persists accounts, sandboxes and checkpoints.
//
// What every implementation guarantees:
//   - Each method is atomic: it is applied entirely or not at all, and a
//     method that returned nil is durable (it survives the process being
//     killed right after).
//   - Safe for concurrent use by many goroutines; concurrent writers wait
//     for each other rather than fail with "database is locked".
//   - Errors: a missing account, sandbox or checkpoint is reported by wrapping
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
	// ListAccounts returns every account, ordered by id.
	ListAccounts(ctx context.Context) ([]Account, error)

	// CreateSandbox stores a new sandbox. sb.ID is chosen by the caller.
	// It fails with ErrConflict when the account already has a sandbox
	// named sb.Name, or any sandbox has id sb.ID, or checkpoints of a
	// deleted sandbox still carry sb.ID (a new sandbox would inherit them);
	// and with ErrNotFound when sb.AccountID is no account. A zero CreatedAt
	// is set to now, a zero UpdatedAt to CreatedAt, a zero AutoCheckpoint
	// to DefaultAutoCheckpoint. sb.ParentID,
	// sb.CurrentCheckpoint and sb.SourceCheckpoint need not name existing
	// rows: a fork outlives its parent and the checkpoint it came from.
	// sb.ResumeCheckpoint is stored as given too, unchecked: the caller
	// makes sure it names a memory checkpoint that exists (a new sandbox
	// has no checkpoints of its own, so SetResumeCheckpoint's rule cannot
	// apply here); from then on DeleteCheckpoint clears it with its
	// checkpoint. The new sandbox's manual checkpoints start at v0.
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
	// SetCurrentCheckpoint records checkpointID as the checkpoint the
	// sandbox's disk was last restored or forked from ("" for none) and
	// sets UpdatedAt to now. ErrNotFound if no sandbox has that id, or if
	// checkpointID is not "" and no checkpoint of the sandbox's account
	// has that id.
	SetCurrentCheckpoint(ctx context.Context, sandboxID, checkpointID string) error
	// SetAutoCheckpoint records every as the sandbox's automatic checkpoint
	// interval (0 for DefaultAutoCheckpoint) and sets UpdatedAt to now.
	// ErrNotFound if no sandbox has that id; an interval
	// AutoCheckpointSeconds rejects is a plain error. The store does not
	// check the interval's range (cairnd allows 60 s to 24 h): the caller
	// does.
	SetAutoCheckpoint(ctx context.Context, sandboxID string, every time.Duration) error
	// SetResumeCheckpoint records checkpointID as the memory checkpoint
	// the sandbox resumes from at its next start (a saved session; "" for
	// none: the sandbox cold-starts) and sets UpdatedAt to now, even when
	// it does not change. ErrNotFound if no sandbox has that id, or if
	// checkpointID is not "" and is no checkpoint of that sandbox (one of
	// another sandbox, even of the same account, is not found either).
	// The store does not check that the checkpoint holds memory
	// (HasMemory) nor the sandbox's state: the caller does. Deleting the
	// checkpoint with DeleteCheckpoint clears it again.
	SetResumeCheckpoint(ctx context.Context, sandboxID, checkpointID string) error
	// DeleteSandbox removes the sandbox, or returns ErrNotFound if no
	// sandbox has that id (so a second delete reports ErrNotFound). Its
	// checkpoints stay: they are deleted one by one, with DeleteCheckpoint.
	DeleteSandbox(ctx context.Context, id string) error

	// CreateCheckpoint stores a new checkpoint and returns it as stored,
	// with Seq and CreatedAt filled in. ck must pass ck.Validate; ck.ID is
	// chosen by the caller. A zero CreatedAt is set to now.
	//
	// With an empty ck.Seq the store assigns the sandbox's next manual id,
	// v<N>, from a per-sandbox counter that only goes up: N is never given
	// twice, whatever checkpoints were deleted since. The sandbox must
	// exist in ck.AccountID, or CreateCheckpoint fails with ErrNotFound.
	// A non-empty ck.Seq (an automatic id) is stored as given, takes no
	// number from the counter and needs no sandbox row.
	//
	// ErrConflict when any checkpoint has id ck.ID, the sandbox already
	// has a checkpoint with that Seq, or ck.Name is not "" and names a
	// checkpoint of the account already; ErrNotFound when ck.AccountID is
	// no account.
	CreateCheckpoint(ctx context.Context, ck Checkpoint) (Checkpoint, error)
	// CheckpointByID returns the checkpoint with that account-wide id, or
	// ErrNotFound.
	CheckpointByID(ctx context.Context, id string) (Checkpoint, error)
	// CheckpointBySeq returns the checkpoint of the sandbox with that
	// per-sandbox id ("v3", "auto-…"), or ErrNotFound. It finds checkpoints
	// of deleted sandboxes too.
	CheckpointBySeq(ctx context.Context, sandboxID, seq string) (Checkpoint, error)
	// CheckpointByName returns the checkpoint of the account with that
	// snapshot name, or ErrNotFound. An empty name finds nothing.
	CheckpointByName(ctx context.Context, accountID int64, name string) (Checkpoint, error)
	// LatestCheckpoint returns the newest checkpoint of the sandbox, of any
	// trigger: the last in ListCheckpoints order (greatest CreatedAt, and
	// of those created at the same instant the one stored last), or
	// ErrNotFound if it has none. It finds checkpoints of deleted
	// sandboxes too.
	LatestCheckpoint(ctx context.Context, sandboxID string) (Checkpoint, error)
	// ListCheckpoints returns the account's checkpoints that match f,
	// oldest first: ordered by CreatedAt, and checkpoints created at the
	// same instant in the order they were stored (so v2 before v10).
	ListCheckpoints(ctx context.Context, accountID int64, f CheckpointFilter) ([]Checkpoint, error)
	// AllCheckpoints returns every checkpoint of every account, automatic
	// ones included, ordered by account id and then as ListCheckpoints;
	// cairnd uses it at start to tell committed checkpoint snapshots from
	// orphans.
	AllCheckpoints(ctx context.Context) ([]Checkpoint, error)
	// SetCheckpointSize records the checkpoint's sizes. ErrNotFound if no
	// checkpoint has that id; negative sizes are a plain error.
	SetCheckpointSize(ctx context.Context, id string, exclusive, total int64) error
	// SetCheckpointOffsite records manifest as the checkpoint's manifest in
	// the off-site repository ("" when it has none any more). ErrNotFound
	// if no checkpoint has that id. A different manifest the checkpoint
	// named before goes on the account's OffsiteDeletes in the same
	// transaction.
	SetCheckpointOffsite(ctx context.Context, id, manifest string) error
	// OffsiteDeletes returns the manifests to delete from the account's
	// off-site repository, in no particular order: those that checkpoints
	// of the account named when they were deleted (DeleteCheckpoint) or
	// given another (SetCheckpointOffsite). Only these are the store's to
	// delete: a manifest in the repository that no checkpoint names and
	// that is not among them was never recorded here (another daemon's, or
	// this account's from before its store was lost) and must stay.
	OffsiteDeletes(ctx context.Context, accountID int64) ([]string, error)
	// ForgetOffsiteDeletes takes manifests off the account's
	// OffsiteDeletes, once they are gone from the repository; manifests
	// not on it are ignored.
	ForgetOffsiteDeletes(ctx context.Context, accountID int64, manifests []string) error
	// SetCheckpointName names the checkpoint ("" removes its name).
	// ErrNotFound if no checkpoint has that id, ErrConflict if another
	// checkpoint of the account has that name; naming a checkpoint what it
	// is already called succeeds.
	SetCheckpointName(ctx context.Context, id, name string) error
	// DeleteCheckpoint removes the checkpoint's row, or returns ErrNotFound
	// if no checkpoint has that id. A sandbox that has it as its
	// ResumeCheckpoint loses it in the same transaction (ResumeCheckpoint
	// becomes "" and UpdatedAt now), so the sandbox cold-starts instead of
	// resuming from a checkpoint that is gone; no other sandbox is touched.
	// It does not look at the other references: the caller makes sure no
	// sandbox has it as CurrentCheckpoint. A deleted manual checkpoint's
	// v-number is not given again. The checkpoint's off-site manifest, if
	// it has one, goes on the account's OffsiteDeletes in the same
	// transaction.
	DeleteCheckpoint(ctx context.Context, id string) error

	// Close releases the store. No method may be called after it.
	Close() error
}
