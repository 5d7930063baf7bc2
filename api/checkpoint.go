package api

import "time"

// Checkpoint triggers: why a checkpoint exists.
const (
	TriggerManual   = "manual"
	TriggerInterval = "interval"
	TriggerStop     = "stop"
	TriggerRestart  = "restart"
	TriggerFork     = "fork"
	TriggerDelete   = "delete"
	TriggerRestore  = "restore"
)

// Checkpoint is a saved state of one sandbox's disk.
type Checkpoint struct {
	ID       string `json:"id"`        // per sandbox: v3, auto-20261129T091500Z
	GlobalID string `json:"global_id"` // account-wide id, accepted wherever a snapshot is named
	Sandbox  string `json:"sandbox"`   // name of the sandbox it was taken of
	// SandboxDeleted is true when that sandbox no longer exists (the
	// checkpoint can still be restored as a new sandbox).
	SandboxDeleted bool      `json:"sandbox_deleted,omitempty"`
	Name           string    `json:"name,omitempty"`
	Trigger        string    `json:"trigger"`
	Consistency    string    `json:"consistency"` // frozen or crash
	Comment        string    `json:"comment,omitempty"`
	Label          string    `json:"label,omitempty"`
	HasMemory      bool      `json:"has_memory"`
	Image          string    `json:"image"`
	CreatedAt      time.Time `json:"created_at"`
	// SizeExclusive is what only this checkpoint holds: what deleting it
	// frees. Sizes are 0 in the answer to a create (measuring them would
	// slow the checkpoint down); list and info have them.
	SizeExclusive int64 `json:"size_exclusive"`
	// SizeTotal is all the data it refers to (its full tree, image included).
	SizeTotal int64 `json:"size_total"`
	// Current is true for the checkpoint the sandbox's disk was last
	// restored or forked from; it cannot be deleted.
	Current bool `json:"current"`
	// Offsite is the off-site state: "pending" until the repository
	// uploads it, then "uploading", "uploaded ×1", "uploaded ×2", "failed".
	Offsite string `json:"offsite"`
	// PausedMS is how long the sandbox was paused to take it (only in the
	// answer to the create request).
	PausedMS float64 `json:"paused_ms,omitempty"`
}

// CreateCheckpointRequest is the body of POST /v1/sandboxes/{name}/checkpoint.
type CreateCheckpointRequest struct {
	Comment string `json:"comment,omitempty"`
	Label   string `json:"label,omitempty"`
	Name    string `json:"name,omitempty"` // make it a named snapshot
	// Memory asks for a memory checkpoint (processes and memory too).
	Memory bool `json:"memory,omitempty"`
}

// RestoreRequest is the body of POST /v1/sandboxes/{name}/checkpoints/{id}/restore.
type RestoreRequest struct {
	// As restores into a new sandbox of that name instead of in place.
	As string `json:"as,omitempty"`
	// NoSafetyCheckpoint skips the checkpoint of the current state that an
	// in-place restore takes first (so the restore can be undone).
	NoSafetyCheckpoint bool `json:"no_safety_checkpoint,omitempty"`
	// DiskOnly restores only the disk of a memory checkpoint: the sandbox
	// boots instead of resuming the checkpoint's processes.
	DiskOnly bool `json:"disk_only,omitempty"`
}

// SnapshotRestoreRequest is the body of POST /v1/snapshots/{ref}/restore.
type SnapshotRestoreRequest struct {
	Name     string `json:"name"` // the new sandbox
	DiskOnly bool   `json:"disk_only,omitempty"`
}

// ForkRequest is the body of POST /v1/sandboxes/{name}/fork.
type ForkRequest struct {
	FromCheckpoint string `json:"from_checkpoint,omitempty"` // default: a new checkpoint of the current state
	Count          int    `json:"count,omitempty"`           // default 1
	NamePrefix     string `json:"name_prefix,omitempty"`     // children are PREFIX-1…PREFIX-N; default NAME-fork
	// Memory forks the running processes too: without FromCheckpoint, a
	// memory checkpoint of the live sandbox is taken first. A memory
	// FromCheckpoint always forks its processes unless DiskOnly.
	Memory   bool `json:"memory,omitempty"`
	DiskOnly bool `json:"disk_only,omitempty"`
}

// StopRequest is the body of POST /v1/sandboxes/{name}/stop.
type StopRequest struct {
	// Snapshot saves the session (memory and disk) so that the next start
	// resumes the processes instead of booting.
	Snapshot bool `json:"snapshot,omitempty"`
}

// DiffEntry is one difference between two states of a sandbox's disk.
type DiffEntry struct {
	Path string   `json:"path"`
	Kind string   `json:"kind"`           // added, removed, changed
	What []string `json:"what,omitempty"` // for changed: content, type, mode, owner
	Mode string   `json:"mode,omitempty"` // "0644 -> 0600" for a mode change
}

// DiskUsage is the space a sandbox or an account uses in the pool.
type DiskUsage struct {
	// Sandbox is what the writable layer of the live root alone holds.
	Sandbox int64 `json:"sandbox"`
	// Checkpoints is what the checkpoints alone hold (sum of their
	// exclusive sizes).
	Checkpoints int64 `json:"checkpoints"`
	// CheckpointCount is how many checkpoints there are.
	CheckpointCount int `json:"checkpoint_count"`
}
