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
	// Offsite is the off-site state: "pending" until the upload queue
	// takes it, then "uploading", and "uploaded ×2" once both locations
	// hold all of it ("uploaded ×1" while only one does), or "failed"
	// (OffsiteDetail.Error says why; retried), or "unstorable" (a reason
	// that no retry changes; not retried); "off" when off-site copies are
	// disabled.
	Offsite string `json:"offsite"`
	// OffsiteDetail says, per location, what holds the checkpoint and
	// what is wrong, and how far a running upload is. Absent when off-site
	// copies are disabled.
	OffsiteDetail *OffsiteDetail `json:"offsite_detail,omitempty"`
	// Stored says where the checkpoint's disk lives: "local + off-site",
	// "local only" (no off-site location holds it yet, or off-site
	// copies are off) or "off-site only" (its local copy was dropped,
	// docs/offsite.md#the-local-tier: a restore reads it from off-site).
	Stored string `json:"stored"`
	// FromInside is true when a process inside the sandbox asked for it
	// (through /.cairn/api.sock) and the operator has not kept it (POST
	// …/checkpoints/{id}/keep makes it false): such unnamed ones may be
	// deleted beyond the sandbox's checkpoints_kept.
	FromInside bool `json:"from_inside,omitempty"`
	// PausedMS is how long the sandbox was paused to take it (only in the
	// answer to the create request).
	PausedMS float64 `json:"paused_ms,omitempty"`
}

// Where a checkpoint's disk lives (Checkpoint.Stored).
const (
	StoredLocalAndOffsite = "local + off-site"
	StoredLocalOnly       = "local only"
	StoredOffsiteOnly     = "off-site only"
	// StoredLost: neither a local copy nor an off-site one (its local
	// disk was lost before any upload).
	StoredLost = "lost"
)

// Off-site states of a checkpoint, as a whole (Checkpoint.Offsite, with
// "uploaded ×N") and per location (OffsiteLocation.State).
const (
	OffsitePending   = "pending"
	OffsiteUploading = "uploading"
	OffsiteUploaded  = "uploaded"
	OffsiteFailed    = "failed"
	OffsiteOff       = "off"
	// OffsiteUnstorable: the repository cannot store the checkpoint's tree,
	// for a reason no retry changes (OffsiteDetail.Error says which); it
	// is not tried again.
	OffsiteUnstorable = "unstorable"
)

// OffsiteDetail is the off-site state of one checkpoint in full.
type OffsiteDetail struct {
	// Manifest is the checkpoint's manifest in the repository once an
	// upload committed it; "" before.
	Manifest  string            `json:"manifest,omitempty"`
	Locations []OffsiteLocation `json:"locations"`
	// Progress is set while the checkpoint uploads.
	Progress *TransferProgress `json:"progress,omitempty"`
	// Error says why the upload failed or waits, when it does.
	Error string `json:"error,omitempty"`
}

// OffsiteLocation is the state of a checkpoint in one location.
type OffsiteLocation struct {
	Name  string `json:"name"`
	State string `json:"state"` // pending, uploading, uploaded or failed
	Error string `json:"error,omitempty"`
}

// TransferProgress is how far an upload or off-site restore is.
type TransferProgress struct {
	BytesDone   int64     `json:"bytes_done"`  // bytes read (upload) or written (restore)
	BytesTotal  int64     `json:"bytes_total"` // estimate of the bytes to go through
	BytesSent   int64     `json:"bytes_sent"`  // bytes stored in the locations (upload)
	Files       int       `json:"files"`
	StartedAt   time.Time `json:"started_at"`
	BytesPerSec float64   `json:"bytes_per_sec"`
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
	// FromOffsite rebuilds the disk, and a memory checkpoint's memory
	// image, from the off-site repository instead of the local copy (which
	// is what happens anyway when the local copy is gone); the processes
	// of a memory checkpoint resume as from a local one.
	FromOffsite bool `json:"from_offsite,omitempty"`
	// Whole fetches a disk that comes from off-site whole before the
	// sandbox starts. Without it the restore is lazy: the sandbox starts
	// at once on the checkpoint's tree and the files' data is fetched as
	// it is read, the rest in the background (docs/lazy-restore.md).
	Whole bool `json:"whole,omitempty"`
	// On restores the sandbox on that host, under its name and id, from
	// the checkpoint's off-site copy: only while the sandbox's own host is
	// down (an evacuation of one sandbox; docs/several-hosts.md). The
	// checkpoint id "latest" is then its newest checkpoint with an
	// off-site copy.
	On string `json:"on,omitempty"`
}

// SnapshotRestoreRequest is the body of POST /v1/snapshots/{ref}/restore.
type SnapshotRestoreRequest struct {
	Name        string `json:"name"` // the new sandbox
	DiskOnly    bool   `json:"disk_only,omitempty"`
	FromOffsite bool   `json:"from_offsite,omitempty"` // as in RestoreRequest
	Whole       bool   `json:"whole,omitempty"`        // as in RestoreRequest
}

// VerifyRequest is the body of POST /v1/verify.
type VerifyRequest struct {
	// Offsite verifies the off-site locations (every object read back and
	// authenticated, damage repaired from the other location) instead of
	// the local checkpoints.
	Offsite bool `json:"offsite,omitempty"`
	// Location limits an off-site verify to one location.
	Location string `json:"location,omitempty"`
	// NoRepair only reports what is wrong.
	NoRepair bool `json:"no_repair,omitempty"`
}

// VerifyReport is the result of a verify operation.
type VerifyReport struct {
	Checkpoints int              `json:"checkpoints"` // checkpoints checked (local verify)
	Locations   []LocationReport `json:"locations,omitempty"`
	Problems    []string         `json:"problems,omitempty"` // local verify: one line per finding
	OK          bool             `json:"ok"`                 // nothing is wrong now (after repairs)
}

// LocationReport is what an off-site verify found in one location.
type LocationReport struct {
	Name     string   `json:"name"`
	Objects  int      `json:"objects"`
	Bytes    int64    `json:"bytes"`
	Problems []string `json:"problems,omitempty"`
	Repaired []string `json:"repaired,omitempty"`
	Error    string   `json:"error,omitempty"` // the location could not be verified
	OK       bool     `json:"ok"`              // intact (after repairs)
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
	// Whole: a FromCheckpoint whose local copy is gone is fetched whole
	// from off-site before the children start; without it each child is
	// restored lazily (RestoreRequest.Whole).
	Whole bool `json:"whole,omitempty"`
}

// StopRequest is the body of POST /v1/sandboxes/{name}/stop.
type StopRequest struct {
	// Snapshot saves the session (memory and disk) so that the next start
	// resumes the processes instead of booting.
	Snapshot bool `json:"snapshot,omitempty"`
}

// DiffEntry is one difference between two states of a sandbox's disk.
type DiffEntry struct {
	// Path is the entry's absolute path inside the sandbox, its names'
	// bytes exactly when they are UTF-8 (JSON escapes a newline or an
	// escape character as \n, \u001b). A sandbox can make names that are
	// not UTF-8, which a JSON string cannot carry: then PathBytes holds the
	// exact bytes (base64 in JSON) and Path the same with each run of
	// invalid bytes replaced by U+FFFD, for display only.
	Path      string   `json:"path"`
	PathBytes []byte   `json:"path_bytes,omitempty"`
	Kind      string   `json:"kind"`           // added, removed, changed
	What      []string `json:"what,omitempty"` // for changed: content, type, mode, owner
	Mode      string   `json:"mode,omitempty"` // "0644 -> 0600" for a mode change
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
	// Used is what the sandbox's disk holds now, the image's files
	// included: what counts against its size (Sandbox.DiskBytes).
	Used int64 `json:"used"`
}

// RemoteCheckpoint is a checkpoint the account's off-site repository
// holds, as its manifest describes it (GET /v1/offsite/checkpoints): on a
// new host, what a dead one uploaded.
type RemoteCheckpoint struct {
	Manifest string `json:"manifest"` // its manifest's name in the repository
	// Known is true when a checkpoint here names the manifest; Checkpoint
	// is then its global id.
	Known      bool   `json:"known"`
	Checkpoint string `json:"checkpoint,omitempty"`
	// Locations are the locations that hold all of it.
	Locations []string `json:"locations"`
	// What the manifest says of it; absent from a manifest written before
	// manifests carried it (Error says so).
	GlobalID    string    `json:"global_id,omitempty"`
	Sandbox     string    `json:"sandbox,omitempty"`
	SandboxID   string    `json:"sandbox_id,omitempty"`
	ID          string    `json:"id,omitempty"` // per sandbox: v3, auto-…
	Name        string    `json:"name,omitempty"`
	Trigger     string    `json:"trigger,omitempty"`
	Consistency string    `json:"consistency,omitempty"`
	Comment     string    `json:"comment,omitempty"`
	Label       string    `json:"label,omitempty"`
	Image       string    `json:"image,omitempty"`
	HasMemory   bool      `json:"has_memory,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// Error says why it cannot be imported ("" when it can).
	Error string `json:"error,omitempty"`
}

// ImportRequest is the body of POST /v1/offsite/import: every checkpoint
// off-site holds that no checkpoint here names (All), or those of the
// given manifests.
type ImportRequest struct {
	All       bool     `json:"all,omitempty"`
	Manifests []string `json:"manifests,omitempty"`
}

// ImportResult answers an import: the checkpoints made (restorable from
// off-site), and what was passed over and why.
type ImportResult struct {
	Imported []Checkpoint    `json:"imported"`
	Skipped  []ImportSkipped `json:"skipped"`
	// Notes are what an import changed: a snapshot name taken here is
	// dropped.
	Notes []ImportSkipped `json:"notes,omitempty"`
}

// ImportSkipped is a manifest an import passed over, and why (or, in
// Notes, what it changed).
type ImportSkipped struct {
	Manifest string `json:"manifest"`
	Reason   string `json:"reason"`
}

// FileDiff is how one file differs between two states of a sandbox's disk
// (GET /v1/sandboxes/{name}/diff/file).
type FileDiff struct {
	Path string `json:"path"`
	// Unified is the text diff (`diff -u` form), "" when the contents are
	// the same; absent when Binary or TooLarge.
	Unified string `json:"unified,omitempty"`
	// Binary: one side is not text (a NUL byte, not UTF-8) or not a
	// regular file; TooLarge: a side is over MaxTextDiff bytes, or the
	// change too spread to compare.
	Binary   bool `json:"binary,omitempty"`
	TooLarge bool `json:"too_large,omitempty"`
}

// MaxTextDiff bounds each side of a FileDiff.
const MaxTextDiff = 1 << 20
