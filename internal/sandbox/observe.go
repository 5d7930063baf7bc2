package sandbox

import (
	"time"

	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Observer is told how checkpoints and restores went (package metrics).
// Its methods must be quick: they are called on the operation's path.
type Observer interface {
	// CheckpointTaken: a checkpoint with trigger (api.Trigger…) was taken
	// in took; a running sandbox was paused for paused.
	CheckpointTaken(trigger string, memory, running bool, took, paused time.Duration)
	// CheckpointFailed: a checkpoint with trigger failed with the error
	// code code (errdefs.CodeOf).
	CheckpointFailed(trigger, code string)
	// Restored: a restore (mode restoreInPlace or restoreAsNew, its disk
	// from source sourceLocal or sourceOffsite) ended after took, with
	// err (nil: it succeeded).
	Restored(mode, source string, took time.Duration, err error)
}

// The modes and sources of Observer.Restored.
const (
	restoreInPlace = "in_place"
	restoreAsNew   = "new"
	sourceLocal    = "local"
	sourceOffsite  = "offsite"
)

// noObserver is the Observer of a Manager given none.
type noObserver struct{}

func (noObserver) CheckpointTaken(string, bool, bool, time.Duration, time.Duration) {}
func (noObserver) CheckpointFailed(string, string)                                  {}
func (noObserver) Restored(string, string, time.Duration, error)                    {}

// observeCheckpoint tells the observer how a checkpoint went.
func (m *Manager) observeCheckpoint(opts checkpointOpts, running bool, took, paused time.Duration, err error) {
	if err != nil {
		m.cfg.Observer.CheckpointFailed(opts.Trigger, errdefs.CodeOf(err))
		return
	}
	m.cfg.Observer.CheckpointTaken(opts.Trigger, opts.Memory, running, took, paused)
}

// observeRestore tells the observer how a restore went, from start on.
func (m *Manager) observeRestore(mode string, offsite bool, start time.Time, err error) {
	source := sourceLocal
	if offsite {
		source = sourceOffsite
	}
	m.cfg.Observer.Restored(mode, source, m.cfg.Now().Sub(start), err)
}
