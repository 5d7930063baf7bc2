// Package checkpoint holds the checkpoint protocol (quiesce, pause,
// snapshot, resume: Take), the comparison of two file trees (Diff), and,
// as pure functions, the policies about checkpoints. It drives the sandbox
// runtime, its agent and the pool through small interfaces and keeps no
// state; the sandbox manager decides when to call it and records the result.
package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Consistency of a checkpoint.
const (
	// Frozen: file systems synced and the sandbox paused for the snapshot.
	Frozen = "frozen"
	// Crash: taken without a completed quiesce; every flushed write is in
	// it, as after a power cut.
	Crash = "crash"
)

// Phases Take reports (the same identifiers as api's progress phases).
const (
	PhaseQuiesce = "quiesce"
	PhaseMemory  = "memory"
)

// DefaultQuiesceTimeout bounds the sync inside the sandbox.
const DefaultQuiesceTimeout = 2 * time.Second

// Quiescer flushes a running sandbox's file systems (cairn-init's sync).
type Quiescer interface {
	Sync(ctx context.Context) error
}

// Pauser freezes and thaws every process of a sandbox.
type Pauser interface {
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
}

// Checkpointer writes the memory image of a sandbox (runsc checkpoint).
// With leaveRunning the sandbox carries on as it was (paused stays
// paused); without, it stops.
type Checkpointer interface {
	Checkpoint(ctx context.Context, id, imageDir string, leaveRunning bool) error
}

// Snapshotter makes a read-only snapshot of a subvolume.
type Snapshotter interface {
	Snapshot(ctx context.Context, src, dst string, readOnly bool) error
}

// Request is one checkpoint to take.
type Request struct {
	Container string // the sandbox's runsc container
	Root      string // the sandbox's root subvolume
	Dest      string // where the read-only snapshot goes
	Running   bool   // a stopped sandbox is snapshotted as is, without pause
	Agent     Quiescer
	Runtime   Pauser
	Pool      Snapshotter
	// QuiesceTimeout bounds the sync; past it the checkpoint is taken
	// anyway and marked Crash. Default DefaultQuiesceTimeout.
	QuiesceTimeout time.Duration
	// Progress reports each phase ("quiesce", "memory") with a line for
	// people; nil for none.
	Progress func(phase, msg string)

	// Memory also saves the processes and their memory into MemoryDir,
	// at the same instant as the disk snapshot. Needs Running.
	Memory       bool
	MemoryDir    string
	Checkpointer Checkpointer
	// SaveAgentKeys, if set, writes into MemoryDir what the agent of a
	// copy resumed from the image needs to prove itself (its keys). It is
	// called while the sandbox is paused, just before its memory is
	// saved, so the keys are those the frozen agent holds.
	SaveAgentKeys func(memoryDir string) error
	// StopAfter ends the sandbox once its memory is saved instead of
	// resuming it (a saved session).
	StopAfter bool
}

// Result says how a checkpoint was taken.
type Result struct {
	Consistency string
	Paused      time.Duration // how long the sandbox's processes were frozen
	Quiesce     time.Duration // how long the sync took
	MemorySave  time.Duration // how long writing the memory image took
}

// Take runs the protocol: sync the sandbox's file systems (bounded by the
// quiesce deadline), pause it, snapshot its root read-only, resume it. The
// sandbox is resumed whatever fails after the pause.
func Take(ctx context.Context, r Request) (res Result, err error) {
	progress := r.Progress
	if progress == nil {
		progress = func(string, string) {}
	}
	if !r.Running {
		if err := r.Pool.Snapshot(ctx, r.Root, r.Dest, true); err != nil {
			return res, err
		}
		return Result{Consistency: Frozen}, nil
	}
	timeout := r.QuiesceTimeout
	if timeout <= 0 {
		timeout = DefaultQuiesceTimeout
	}
	res.Consistency = Frozen
	progress(PhaseQuiesce, "Quiescing file systems")
	t0 := time.Now()
	qctx, cancel := context.WithTimeout(ctx, timeout)
	qerr := r.Agent.Sync(qctx)
	cancel()
	res.Quiesce = time.Since(t0)
	if qerr != nil {
		slog.Warn("checkpoint: quiesce did not finish; taking a crash-consistent checkpoint", "container", r.Container, "err", qerr)
		progress(PhaseQuiesce, fmt.Sprintf("Quiesce did not finish within %s (%v): checkpoint will be crash-consistent", timeout, qerr))
		res.Consistency = Crash
	}

	if err := r.Runtime.Pause(ctx, r.Container); err != nil {
		// A failed pause may still have frozen part of it.
		resume(r)
		return res, fmt.Errorf("pause: %w", err)
	}
	paused := time.Now()
	stopped := false
	defer func() {
		if !stopped {
			if rerr := resume(r); rerr != nil && err == nil {
				err = rerr
			}
		}
		res.Paused = time.Since(paused)
	}()
	// The disk first, then the memory, both of the paused instant: a
	// paused sandbox stays paused while runsc saves it.
	if err := r.Pool.Snapshot(ctx, r.Root, r.Dest, true); err != nil {
		return res, err
	}
	if r.Memory {
		progress(PhaseMemory, "Saving memory")
		t := time.Now()
		if r.SaveAgentKeys != nil {
			if err := r.SaveAgentKeys(r.MemoryDir); err != nil {
				return res, fmt.Errorf("memory checkpoint: %w", err)
			}
		}
		if err := r.Checkpointer.Checkpoint(ctx, r.Container, r.MemoryDir, !r.StopAfter); err != nil {
			return res, fmt.Errorf("memory checkpoint: %w", err)
		}
		stopped = r.StopAfter
		res.MemorySave = time.Since(t)
	}
	return res, nil
}

// resume thaws the sandbox, retrying: a sandbox must never stay paused.
func resume(r Request) error {
	var err error
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = r.Runtime.Resume(ctx, r.Container)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(time.Duration(i+1) * 50 * time.Millisecond)
	}
	slog.Error("checkpoint: could not resume sandbox", "container", r.Container, "err", err)
	return fmt.Errorf("resume: %w", err)
}
