package api

// Progress is the machine-readable side of a progress or info event: which
// step of the operation it is about and, when the step can count its work,
// how far it is. The event's Data keeps the same news as text for people.
//
// A progress event with counts is the current state of its phase, not an
// increment: a later event of the same phase supersedes it. See
// docs/api.md for the phases each operation goes through.
type Progress struct {
	// Phase is the step, one of the Phase constants; a client that does not
	// know a phase shows the event's text.
	Phase string `json:"phase"`
	// Done is how many units of the phase are done so far.
	Done int64 `json:"done,omitempty"`
	// Total is how many units the phase has in all; 0 when unknown.
	Total int64 `json:"total,omitempty"`
	// Unit is what Done and Total count, one of the Unit constants.
	Unit string `json:"unit,omitempty"`
	// Rate is the measured units per second since the phase began; 0
	// when not measured.
	Rate float64 `json:"rate,omitempty"`
	// Locations is the state of each off-site location the phase works
	// on (verify, repair), in the account's order.
	Locations []LocationProgress `json:"locations,omitempty"`
}

// Counted reports whether p carries counts (Done, Total, Rate or
// Locations) rather than only a phase.
func (p Progress) Counted() bool {
	return p.Done != 0 || p.Total != 0 || p.Rate != 0 || len(p.Locations) > 0
}

// LocationProgress is how far a phase is in one off-site location.
type LocationProgress struct {
	Name string `json:"name"`
	// State is one of the Location constants.
	State string `json:"state"`
	// Done and Total count the location's units, in the Progress's Unit;
	// Total is 0 when unknown.
	Done  int64 `json:"done,omitempty"`
	Total int64 `json:"total,omitempty"`
	// Error says what went wrong, with State failed or unavailable.
	Error string `json:"error,omitempty"`
}

// Phases of operations (Progress.Phase). Each is a stable identifier;
// docs/api.md lists which operation goes through which.
const (
	// PhaseImage: the image is prepared, built if it is not yet (one
	// event per line of the build).
	PhaseImage = "image"
	// PhaseCreate: a new sandbox's disk and record are made.
	PhaseCreate = "create"
	// PhaseCheckpoint: a checkpoint is taken (checkpoint create, an
	// automatic checkpoint, the checkpoint a fork starts from, the saved
	// session of stop --snapshot); its steps follow as quiesce, snapshot
	// and memory.
	PhaseCheckpoint = "checkpoint"
	// PhaseQuiesce: the sandbox's file systems are synced before the pause.
	PhaseQuiesce = "quiesce"
	// PhaseSnapshot: the sandbox is paused and its disk snapshotted
	// read-only; it stays paused through PhaseMemory if there is one.
	PhaseSnapshot = "snapshot"
	// PhaseMemory: the processes and memory are saved (a memory
	// checkpoint, stop --snapshot).
	PhaseMemory = "memory"
	// PhaseSafety: restore in place takes its safety checkpoint of the
	// current state; that checkpoint's own steps follow.
	PhaseSafety = "safety-checkpoint"
	// PhaseWait: the operation waits for something else (an image built by
	// another request, the grace period of a restore asked from inside).
	PhaseWait = "wait"
	// PhaseStop: the sandbox's processes are stopped.
	PhaseStop = "stop"
	// PhaseFetch: a checkpoint's disk is rebuilt from off-site; counts
	// bytes written.
	PhaseFetch = "fetch"
	// PhaseSwap: the checkpoint's disk is swapped in as the sandbox's root.
	PhaseSwap = "swap"
	// PhaseStart: the sandbox boots.
	PhaseStart = "start"
	// PhaseResume: the processes resume from a memory image (a memory
	// checkpoint restored, a saved session started).
	PhaseResume = "resume"
	// PhaseFork: the children of a fork are made; counts sandboxes.
	PhaseFork = "fork"
	// PhaseDelete: the sandbox's files are removed; deleting an account
	// (account.delete), the sandboxes and then the checkpoints it holds
	// are deleted, counted.
	PhaseDelete = "delete"
	// PhaseRevoke: the tokens of an account being deleted are revoked.
	PhaseRevoke = "revoke"
	// PhaseOffsite: the operation waits for the off-site copies of the
	// checkpoints it deleted to be deleted from the locations.
	PhaseOffsite = "offsite"
	// PhaseVerify: checkpoints are checked; counts checkpoints (local),
	// or objects read back with the state of each location (off-site).
	PhaseVerify = "verify"
	// PhaseRepair: a damaged off-site location is repaired from another;
	// counts and Locations as in PhaseVerify.
	PhaseRepair = "repair"
	// PhaseEvacuate: a sandbox of a host that is down is restored on this
	// one (host.evacuate, or a restore with on); counts sandboxes.
	PhaseEvacuate = "evacuate"
	// PhaseDone: the work is done; the text says what was made and the
	// complete event follows.
	PhaseDone = "done"
)

// Units of Progress.Done and Total.
const (
	UnitBytes       = "bytes"
	UnitFiles       = "files"
	UnitObjects     = "objects"
	UnitSandboxes   = "sandboxes"
	UnitCheckpoints = "checkpoints"
)

// States of a location in LocationProgress.
const (
	LocationPending     = "pending"     // not begun
	LocationRunning     = "running"     // being worked on
	LocationDone        = "done"        // finished and intact
	LocationFailed      = "failed"      // finished with problems left
	LocationUnavailable = "unavailable" // could not be reached or read
)
