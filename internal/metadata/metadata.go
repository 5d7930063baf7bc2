// Package metadata defines what cairnd remembers about accounts, sandboxes
// and their checkpoints, behind one Store interface.
//
// Implementations live in subpackages: sqlite (the embedded default) and
// postgres (several hosts sharing one control plane; cairnd --database).
// Both apply the same numbered schema migrations from package migrations
// and pass the one shared test suite in package storetest.
//
// The store is mechanism only: it keeps rows consistent (unique names per
// account, ids, references) and reports what went wrong with the sentinel
// errors below. Validating names, images and limits, locking sandboxes and
// turning errors into API codes belong to the layers above.
package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Implementations wrap them with %w and context, so test
// with errors.Is.
var (
	// ErrNotFound means the account, sandbox, checkpoint, live lease,
	// image or API token asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a write would break a uniqueness rule: a sandbox name
	// already used in the account, a sandbox id already used anywhere (or
	// still referred to by checkpoints of a deleted sandbox), a checkpoint id
	// already used anywhere, a checkpoint Seq already used in the sandbox, a
	// checkpoint name already used in the account, a pool path another
	// checkpoint names or that awaits deletion, a lease id already used,
	// an image name already used, an account name already used, or a
	// token id or a token name in the account already used.
	// It also means that a lease cannot be acquired because a live lease
	// of its resource conflicts with it, and that an account cannot be
	// deleted because it still holds something.
	ErrConflict = errors.New("already exists")
	// ErrSchemaTooNew means the database was migrated by a newer cairnd
	// than this one; this binary refuses to touch it.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrRevoked means a lease was revoked (RevokeLeases): its holder must
	// stop what it holds the lease for and release it.
	ErrRevoked = errors.New("lease revoked")
)

// DefaultAccount is the name of the account of requests that come in on
// cairnd's local unix socket, the root administrator's channel: they carry
// no credential, and act on this account.
const DefaultAccount = "default"

// Account owns sandboxes (and checkpoints, API tokens, a disk limit and
// a key).
type Account struct {
	ID        int64 // assigned by the store; never reused
	Name      string
	DiskLimit int64 // bytes; 0: the host's default (cairnd --disk-limit)
	CreatedAt time.Time
}

// SandboxState is the desired (last known) state of a sandbox, persisted so a
// restarted cairnd can re-adopt what was running.
type SandboxState string

// Sandbox states.
const (
	SandboxStopped SandboxState = "stopped"
	SandboxRunning SandboxState = "running"
	// SandboxCrashed: it should run, but its processes died without cairnd
	// stopping it (Sandbox.LastCrash says why); its restart policy decides
	// whether cairnd starts it again.
	SandboxCrashed SandboxState = "crashed"
)

// Valid reports whether s is one of the known states.
func (s SandboxState) Valid() bool {
	return s == SandboxStopped || s == SandboxRunning || s == SandboxCrashed
}

// RestartPolicy says what cairnd does when a sandbox dies.
type RestartPolicy string

// Restart policies.
const (
	// RestartOnFailure (the default) starts a sandbox that crashed again
	// from its disk, with backoff and a limit.
	RestartOnFailure RestartPolicy = "on-failure"
	// RestartAlways does the same, also when the sandbox ended by itself
	// (its cairn-init exited, e.g. `kill 1` inside).
	RestartAlways RestartPolicy = "always"
	// RestartNo leaves a sandbox that died crashed.
	RestartNo RestartPolicy = "no"
)

// Valid reports whether p is one of the known policies ("" is not).
func (p RestartPolicy) Valid() bool {
	return p == RestartOnFailure || p == RestartAlways || p == RestartNo
}

// Event is something that happened to a sandbox, and when; the zero value
// is none.
type Event struct {
	What string
	At   time.Time
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
	// Restart is its restart policy; "" given to CreateSandbox stores
	// RestartOnFailure. Changed by SetRestartPolicy.
	Restart RestartPolicy
	// LastCrash is why and when the sandbox last died (set with the state
	// by SetSandboxCrashed; kept after it runs again). LastOOMKill is the
	// last process its memory limit killed inside it (SetLastOOMKill).
	LastCrash   Event
	LastOOMKill Event
	// Inside is what processes inside may create through the sandbox's
	// management socket: an operator's setting, changed by SetInsidePolicy.
	// Stored as given (the zero value allows no checkpoint from inside);
	// the sandbox manager fills in DefaultInsidePolicy.
	Inside InsidePolicy
	// DiskBytes is the size of the sandbox's disk: the most its root may
	// refer to, the image's files included (a btrfs quota-group limit);
	// 0: no limit.
	DiskBytes int64
	// Network is its network mode and rules; changed by
	// SetSandboxNetwork. A Mode of "" given to CreateSandbox stores
	// NetworkNone.
	Network NetworkSettings
	// Settings are the defaults of its processes and its labels; changed
	// by SetSandboxSettings.
	Settings SandboxSettings
	// HostID is the host whose pool holds its root and which runs it
	// (Host.ID); "" for a sandbox made before hosts existed. Set at
	// create; SetSandboxHost moves it.
	HostID    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NetworkSettings are a sandbox's network mode and its allow and deny
// rules, as the user gave them (package network checks them).
type NetworkSettings struct {
	Mode  string   `json:"-"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Columns returns what a store keeps of n: its mode ("" is stored as
// NetworkNone) and its rules as a JSON object ({"allow":[…],"deny":[…]},
// read back with json.Unmarshal into a NetworkSettings). An unknown mode
// is an error.
func (n NetworkSettings) Columns() (mode, rules string, err error) {
	mode = n.Mode
	if mode == "" {
		mode = NetworkNone
	}
	if mode != NetworkNone && mode != NetworkEgress {
		return "", "", fmt.Errorf("unknown network mode %q", mode)
	}
	b, err := json.Marshal(n)
	if err != nil {
		return "", "", fmt.Errorf("network rules: %w", err)
	}
	return mode, string(b), nil
}

// Network modes as stored.
const (
	NetworkNone   = "none"
	NetworkEgress = "egress"
)

// InsidePolicy is what processes inside a sandbox may create through its
// management socket (/.cairn/api.sock).
type InsidePolicy struct {
	Memory bool // memory checkpoints
	Names  bool // named checkpoints (snapshots)
	// PerMinute is how many checkpoints may be made from inside in any
	// minute; 0: none.
	PerMinute int
	// Keep is how many unnamed checkpoints made from inside are kept;
	// beyond it the oldest are deleted (those not current). 0: no bound.
	Keep int
}

// DefaultInsidePolicy is the policy of a sandbox created without one, and
// of the sandboxes that existed before it was kept (schema version 8).
var DefaultInsidePolicy = InsidePolicy{PerMinute: 10, Keep: 20}

// Validate checks what the store relies on: no negative count.
func (p InsidePolicy) Validate() error {
	if p.PerMinute < 0 || p.Keep < 0 {
		return fmt.Errorf("negative inside policy count (per minute %d, keep %d)", p.PerMinute, p.Keep)
	}
	return nil
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
	case sb.DiskBytes < 0:
		return fmt.Errorf("invalid sandbox %s: negative disk size %d", sb.ID, sb.DiskBytes)
	case sb.Restart != "" && !sb.Restart.Valid():
		return fmt.Errorf("invalid sandbox %s: unknown restart policy %q", sb.ID, sb.Restart)
	case sb.Network.Mode != "" && sb.Network.Mode != NetworkNone && sb.Network.Mode != NetworkEgress:
		return fmt.Errorf("invalid sandbox %s: unknown network mode %q", sb.ID, sb.Network.Mode)
	}
	if _, err := AutoCheckpointSeconds(sb.AutoCheckpoint); err != nil {
		return fmt.Errorf("invalid sandbox %s: %w", sb.ID, err)
	}
	if err := sb.Inside.Validate(); err != nil {
		return fmt.Errorf("invalid sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// SandboxFilter narrows ListSandboxes. The zero value matches every sandbox
// of the account.
type SandboxFilter struct {
	ParentID string // only sandboxes forked from this sandbox id; "" = any
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

// DiskDelete is a path in the pool (a checkpoint's disk or memory image)
// that no checkpoint names any more and that is to be deleted: put on the
// store's DiskDeletes by DeleteCheckpoint or SetCheckpointDisk, taken off
// by ForgetDiskDelete once it is gone.
type DiskDelete struct {
	Path         string // relative to the pool's root; passes ValidatePoolPath
	CheckpointID string // the checkpoint that named it
	QueuedAt     time.Time
	// HostID is the host whose pool holds the path (the checkpoint's
	// HostID); only that host deletes it.
	HostID string
}

// Store persists accounts with their API tokens, sandboxes, checkpoints
// (with where their disks live, and the disks to delete), leases, the
// journal of multi-step operations, published ports with each account's
// port token, images, and the audit log.
//
// What every implementation guarantees:
//   - Each method is atomic: it is applied entirely or not at all, and a
//     method that returned nil is durable (it survives the process being
//     killed right after, and a power cut or kernel crash too). Except
//     the writes of the lease methods (AcquireLease, RenewLease,
//     ReleaseLease, RevokeLeases, ReclaimLeases), which a power cut or
//     kernel crash, but not the process being killed, may undo: every
//     holder of a lease dies with its host, and the restarted cairnd
//     reclaims what it held anyway, so they need not cost a flush to
//     stable storage each. What such a crash loses is a suffix: lease
//     writes made after the last other write returned, never another
//     write, and never a lease write older than one that survives.
//   - Safe for concurrent use by many goroutines; concurrent writers wait
//     for each other rather than fail with "database is locked".
//   - Errors: a missing account, sandbox, checkpoint, lease, image or
//     token is reported by wrapping ErrNotFound, a uniqueness violation,
//     a lease conflict or an account that still holds something by
//     wrapping ErrConflict, a revoked lease by wrapping ErrRevoked;
//     anything else (invalid input, I/O, a cancelled ctx) is a plain
//     error.
//   - Times are returned in UTC with microsecond precision (what PostgreSQL
//     keeps); times given to the store are converted the same way. Zero
//     CreatedAt/UpdatedAt (and the other zero times the methods say) are
//     filled in from the clock the store was opened with; the store never
//     reads the wall clock on its own.
//   - A list with no match is empty with a nil error, not ErrNotFound.
type Store interface {
	// Accounts (see AccountStore) and their API tokens (TokenStore).
	AccountStore
	TokenStore
	// The hosts that share the store (HostStore).
	HostStore

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
	// SetInsidePolicy records p as what processes inside the sandbox may
	// create and sets UpdatedAt to now. ErrNotFound if no sandbox has that
	// id; a p that fails Validate is a plain error.
	SetInsidePolicy(ctx context.Context, sandboxID string, p InsidePolicy) error
	// SetSandboxCrashed records that the sandbox died: state
	// SandboxCrashed, LastCrash {reason, at}, UpdatedAt now. ErrNotFound if
	// no sandbox has that id.
	SetSandboxCrashed(ctx context.Context, id, reason string, at time.Time) error
	// SetSandboxNetwork records the sandbox's network settings.
	// ErrNotFound if it does not exist.
	SetSandboxNetwork(ctx context.Context, id string, n NetworkSettings) error
	// SetSandboxSettings records the defaults of the sandbox's processes
	// and its labels. ErrNotFound if it does not exist.
	SetSandboxSettings(ctx context.Context, id string, s SandboxSettings) error
	// SetRestartPolicy records p as the sandbox's restart policy and sets
	// UpdatedAt to now; a policy that is not Valid is a plain error,
	// ErrNotFound if no sandbox has that id.
	SetRestartPolicy(ctx context.Context, id string, p RestartPolicy) error
	// SetLastOOMKill records what the sandbox's memory limit last killed
	// inside it, and when (LastOOMKill); it does not change UpdatedAt (it
	// is no change of the sandbox's settings). ErrNotFound if no sandbox
	// has that id.
	SetLastOOMKill(ctx context.Context, id, process string, at time.Time) error
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
	// has a checkpoint with that Seq, ck.Name is not "" and names a
	// checkpoint of the account already, or ck.DiskPath or ck.MemoryPath
	// is not "" and is named by another checkpoint (as its DiskPath or
	// MemoryPath) or is on DiskDeletes; ErrNotFound when ck.AccountID is
	// no account.
	CreateCheckpoint(ctx context.Context, ck Checkpoint) (Checkpoint, error)
	// ImportCheckpoint stores a checkpoint read from the account's
	// off-site repository (a host that knew it is gone): as
	// CreateCheckpoint, but ck must name its OffsiteManifest and have no
	// DiskPath nor MemoryPath, its Seq is kept as given (a v-id too, which
	// then takes no number from a counter), and it needs no sandbox row.
	// When a sandbox with ck.SandboxID exists in the account, its counter
	// is raised past a v-id, so that it never gives the same one. It must
	// pass ValidateImport; the same ErrConflict and ErrNotFound cases, and
	// ErrConflict too when the manifest is queued for deletion
	// (OffsiteDeletes: the account deleted that checkpoint) or a sandbox
	// of another account has ck.SandboxID.
	ImportCheckpoint(ctx context.Context, ck Checkpoint) (Checkpoint, error)
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
	// SetCheckpointUnstorable records why the off-site repository cannot
	// store the checkpoint ("" clears it). ErrNotFound if no checkpoint
	// has that id.
	SetCheckpointUnstorable(ctx context.Context, id, reason string) error
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
	// KeepCheckpoint takes the mark "made from inside" (FromInside) off
	// the checkpoint: it is then one the operator keeps, which no longer
	// counts toward its sandbox's InsidePolicy.Keep and is never pruned
	// for it. Nothing else of it changes. ErrNotFound if no checkpoint has
	// that id; keeping one that is not marked succeeds and changes
	// nothing.
	KeepCheckpoint(ctx context.Context, id string) error
	// DeleteCheckpoint removes the checkpoint's row, or returns ErrNotFound
	// if no checkpoint has that id. A sandbox that has it as its
	// ResumeCheckpoint loses it in the same transaction (ResumeCheckpoint
	// becomes "" and UpdatedAt now), so the sandbox cold-starts instead of
	// resuming from a checkpoint that is gone; no other sandbox is touched.
	// It does not look at the other references: the caller makes sure no
	// sandbox has it as CurrentCheckpoint. A deleted manual checkpoint's
	// v-number is not given again. In the same transaction the
	// checkpoint's off-site manifest, if it has one, goes on the account's
	// OffsiteDeletes, and its DiskPath and MemoryPath, those that are not
	// "", go on DiskDeletes. It does not look at leases: the caller makes
	// sure nothing holds the checkpoint any more.
	DeleteCheckpoint(ctx context.Context, id string) error

	// SetCheckpointDisk records diskPath as where the checkpoint's disk
	// lives ("" when it has no local copy any more: it was lost, or let go
	// once off-site). ErrNotFound if no checkpoint has that id; a diskPath
	// that is not "" and fails ValidatePoolPath is a plain error;
	// ErrConflict if another checkpoint names diskPath (as its DiskPath or
	// MemoryPath) or diskPath is on DiskDeletes (its deletion may be under
	// way: wait until it is forgotten). The path the checkpoint named
	// before, if it was not "" and is not diskPath, goes on DiskDeletes in
	// the same transaction. Setting the path the checkpoint has already
	// succeeds and changes nothing.
	SetCheckpointDisk(ctx context.Context, id, diskPath string) error
	// DropLocalCopy records that the checkpoint has no local copy any
	// more (it was let go once off-site): its DiskPath and MemoryPath
	// become "" and those that were not "" go on DiskDeletes, in one
	// transaction. HasMemory stays: the memory image is off-site.
	// ErrNotFound if no checkpoint has that id; a checkpoint without a
	// local copy is left as it is.
	DropLocalCopy(ctx context.Context, id string) error
	// DiskDeletes returns the paths in the pool that are to be deleted,
	// oldest first (by QueuedAt, then in the order they were queued): the
	// disks and memory images that checkpoints named when they were
	// deleted (DeleteCheckpoint) or given another disk path
	// (SetCheckpointDisk). A path is either named by one checkpoint or on
	// DiskDeletes, never both (CreateCheckpoint and SetCheckpointDisk
	// refuse a path on it), so deleting what is listed never deletes a
	// disk a checkpoint names. Only these are the store's to delete:
	// something in the pool that no checkpoint names and that is not
	// listed was never recorded here (left by a crash before its row was
	// committed) and is the caller's to judge.
	DiskDeletes(ctx context.Context) ([]DiskDelete, error)
	// ForgetDiskDelete takes path off DiskDeletes, once it is gone from
	// the pool; a path not on it is no error.
	ForgetDiskDelete(ctx context.Context, path string) error

	// AcquireLease stores l unless a live lease of the same resource
	// conflicts with it, and returns it as stored. In one transaction it
	// first deletes the leases of l.Resource that expired (Expires not
	// after now, by the store's clock), then looks for a conflict: when l
	// is exclusive, any live lease of the resource; when l is shared, a
	// live exclusive one. Revoked leases still conflict until they are
	// released or expire. On a conflict it stores nothing and returns the
	// oldest conflicting lease (in Leases order) with an error wrapping
	// ErrConflict; an l.ID that a stored lease has already (live, or
	// expired and not yet deleted) is ErrConflict too, returned with the
	// lease that has it. l must pass l.Validate and its Expires must be
	// after now, or the error is a plain one. A zero CreatedAt is set to
	// now. Not durable against a power cut (see above).
	AcquireLease(ctx context.Context, l Lease) (Lease, error)
	// RenewLease sets the expiry of the lease with that id to expires,
	// which must be after now (else a plain error); it may be earlier
	// than the lease's expiry was. ErrNotFound if there is no such live
	// lease: never acquired, released, reclaimed, or expired (an expired
	// lease is not renewed: another holder may have taken the resource);
	// an error wrapping ErrRevoked, with the expiry unchanged, if it was
	// revoked. Not durable against a power cut (see above).
	RenewLease(ctx context.Context, id string, expires time.Time) error
	// ReleaseLease deletes the lease with that id, expired or not.
	// ErrNotFound if there is none, so that a second release (or one of a
	// lease reclaimed meanwhile) can be told apart with errors.Is. Not
	// durable against a power cut (see above).
	ReleaseLease(ctx context.Context, id string) error
	// RevokeLeases marks every live lease of resource whose Purpose is
	// purpose ("" = of any purpose) revoked, and returns them as they are
	// now, oldest first; revoking one already revoked is no error. Their
	// holders learn it when they renew (ErrRevoked); whoever revoked them
	// waits for them to be released or to expire. An empty resource is a
	// plain error. Not durable against a power cut (see above).
	RevokeLeases(ctx context.Context, resource, purpose string) ([]Lease, error)
	// Leases returns the live leases (Expires after now) of resource, of
	// every resource when resource is "", oldest first: by CreatedAt,
	// then in the order they were acquired.
	Leases(ctx context.Context, resource string) ([]Lease, error)
	// ReclaimLeases deletes every expired lease, and when ownerPrefix is
	// not "" every lease whose Owner begins with ownerPrefix, live or not
	// (a restarted cairnd reclaims what its dead predecessor on the same
	// host held), and returns what it deleted, oldest first. Not durable
	// against a power cut (see above): what a crash brings back is
	// reclaimed again at the next start.
	ReclaimLeases(ctx context.Context, ownerPrefix string) ([]Lease, error)

	// BeginJournal stores e, a multi-step operation about to start (see
	// JournalEntry). e must pass e.Validate and be JournalRunning (else a
	// plain error); ErrConflict if an entry has e.ID already, ErrNotFound
	// if e.AccountID is no account. Zero CreatedAt and UpdatedAt are set
	// to now. Durable once it returns, like every write but the leases'.
	BeginJournal(ctx context.Context, e JournalEntry) error
	// FinishJournal records that the operation with that id ended in
	// state (done, failed or undone; running is a plain error), with an
	// error code and message, and sets UpdatedAt to now. ErrNotFound if there is no such
	// entry. Finishing an entry again replaces its state and message.
	FinishJournal(ctx context.Context, id string, state JournalState, code, message string) error
	// NoteJournal replaces the detail of the running entry with that id
	// (how far the operation got, for recovery) and sets UpdatedAt to now.
	// ErrNotFound if there is no such entry, ErrConflict if it ended.
	NoteJournal(ctx context.Context, id, detail string) error
	// JournalEntry returns the entry with that id, or ErrNotFound.
	JournalEntry(ctx context.Context, id string) (JournalEntry, error)
	// ListJournal returns the entries that match f, oldest first (by
	// CreatedAt, then in the order they were begun).
	ListJournal(ctx context.Context, f JournalFilter) ([]JournalEntry, error)
	// PruneJournal deletes the entries that ended (any state but running)
	// and were last changed before before, and returns how many it
	// deleted. Running entries are never pruned.
	PruneJournal(ctx context.Context, before time.Time) (int, error)

	// Published ports and port tokens (see PortStore).
	PortStore
	// Pulled, imported and built images (see ImageStore).
	ImageStore
	// The changes made through the API (see AuditStore).
	AuditStore

	// Close releases the store. No method may be called after it.
	Close() error
}
