package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// A restore in place and a delete work on one sandbox and make none, but
// they too are journalled, so that the next start knows where one that a
// crash cut short stood, and its client can learn how it ended:
//
//   - a restore in place is finished when its new root was swapped in (the
//     root's subvolume is the one noted before the swap): the sandbox's
//     current checkpoint is set, and it resumes from the checkpoint's
//     memory image if the restore was to resume it, or boots from the
//     restored disk; it is undone when the old root is still there: the
//     sandbox keeps its disk (a safety checkpoint it took stays);
//   - a delete is finished when the sandbox's row is gone (the sweep that
//     follows removes its files); otherwise it is undone: the sandbox
//     stays.
//
// A sandbox whose processes the operation had ended is started again and
// not marked crashed: cairnd stopped it, not a fault of its own. One it had
// not stopped yet goes the usual way of recovery. The entry is marked once
// the sandbox is handled (started, adopted, or left stopped), so that a
// crash during recovery settles it again at the next start.

// Kinds of the in-place operations, as the operations name themselves.
const (
	kindRestore = "sandbox.restore"
	kindDelete  = "sandbox.delete"
)

// inPlaceDetail is the journal detail of a restore in place or a delete.
type inPlaceDetail struct {
	Name string `json:"name"` // the sandbox's name, which a delete's row takes with it
	// A restore: the checkpoint restored, the subvolume id of the root it
	// replaces, and whether the processes resume from memory.
	Checkpoint string `json:"checkpoint,omitempty"`
	Seq        string `json:"seq,omitempty"`
	OldRoot    uint64 `json:"old_root,omitempty"`
	Memory     bool   `json:"memory,omitempty"`
	// Stopping is noted just before the operation ends the sandbox's
	// processes, with the container they run in (found running after
	// that, it is not the sandbox's any more: a restore that finished may
	// have started another) and the id of the safety checkpoint that
	// holds them (a restore that took one). cairnd dying between the note
	// and the kill (a few milliseconds) costs the processes: the sandbox
	// boots from its disk.
	Stopping  bool   `json:"stopping,omitempty"`
	Container string `json:"container,omitempty"`
	Safety    string `json:"safety,omitempty"`
	// NewRoot is noted just before a restore swaps its new root in: the
	// subvolume id it will have at the sandbox's root. Only a root with
	// that id is the restore's to finish; one with neither id means the
	// sandbox changed since (the entry outlived its operation).
	NewRoot uint64 `json:"new_root,omitempty"`
}

// inPlaceNotes records in a journal entry how far its operation got.
type inPlaceNotes struct {
	m  *Manager
	id string
	sb metadata.Sandbox
	d  inPlaceDetail
}

// stopping notes that the sandbox's processes are about to end (safety:
// the id of the safety checkpoint that holds them, "" for none). If it
// fails the operation must not stop them.
func (n *inPlaceNotes) stopping(ctx context.Context, safety string) error {
	n.d.Stopping, n.d.Safety = true, safety
	if inst := n.m.cfg.Instances.get(n.sb.ID); inst != nil {
		n.d.Container = inst.container
	}
	return n.note(ctx)
}

// swapping notes the subvolume id of the root about to be swapped in. If
// it fails the operation must not swap.
func (n *inPlaceNotes) swapping(ctx context.Context, newRoot uint64) error {
	n.d.NewRoot = newRoot
	return n.note(ctx)
}

func (n *inPlaceNotes) note(ctx context.Context) error {
	doc, err := json.Marshal(n.d)
	if err == nil {
		err = n.m.cfg.Store.NoteJournal(ctx, n.id, string(doc))
	}
	if err != nil {
		return fmt.Errorf("record the operation's progress (nothing more was changed): %w", err)
	}
	return nil
}

// journalledInPlace runs work, op's work on sandbox sb, between a journal
// entry begun before it with detail d and marked when it ends; work notes
// its progress through the notes it is given. A final mark that cannot be
// written is only logged: a later start finds the entry running, and
// settles it by what it finds (see settleInPlace).
func (m *Manager) journalledInPlace(ctx context.Context, op *operation.Op, sb metadata.Sandbox, d inPlaceDetail, work func(*inPlaceNotes) error) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	j, err := m.beginJournalDetail(ctx, op, sb.AccountID, sb.ID, nil, string(doc))
	if err != nil {
		return err
	}
	if err := work(&inPlaceNotes{m: m, id: j.id, sb: sb, d: d}); err != nil {
		j.failed(ctx, err)
		return err
	}
	logErr("journal: mark done", j.done(ctx), "operation", j.id)
	return nil
}

// afterInterrupt is what recovery does with a sandbox an interrupted
// in-place operation had in hand, once its container is known not to run.
type afterInterrupt struct {
	run    bool                 // start it again: it should run
	memory *metadata.Checkpoint // resume from this checkpoint's memory image; nil: boot from the disk
	// retired: the container whose processes the operation ended; found
	// running, it is removed (any other is adopted).
	retired string
	// finish marks the entry once the sandbox is handled: a crash before
	// that leaves it running, and the next start settles it again (each
	// outcome is found again from the same root and rows).
	finish func(context.Context) error
	// handedOff: a start in the background calls finish when it ends.
	handedOff bool
}

// settleInPlace decides how interrupted restore or delete e ends (see
// above). With a sandbox to handle it returns what to do with it, and
// marks the entry only through its finish; without one (the sandbox is
// gone, or the entry outlived its operation), it marks the entry now and
// returns ok false.
func (m *recovery) settleInPlace(ctx context.Context, e metadata.JournalEntry) (after afterInterrupt, ok bool, err error) {
	var d inPlaceDetail
	if e.Detail != "" {
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			return afterInterrupt{}, false, fmt.Errorf("journal entry %s: detail: %w", e.ID, err)
		}
	}
	at := m.cfg.Now().UTC().Format(time.RFC3339)
	mark := func(state metadata.JournalState, msg string) func(context.Context) error {
		code := ""
		if state != metadata.JournalDone {
			code = api.CodeInterrupted
		}
		return func(ctx context.Context) error { return m.cfg.Store.FinishJournal(ctx, e.ID, state, code, msg) }
	}
	sb, err := m.cfg.Store.SandboxByID(ctx, e.SandboxID)
	gone := errors.Is(err, metadata.ErrNotFound)
	if err != nil && !gone {
		return afterInterrupt{}, false, err
	}
	// Stopped by the operation: started again, not marked crashed. One
	// that was not stopped goes the usual way (adopted, or crashed and
	// restarted by its policy).
	handled := func(run bool, finish func(context.Context) error) (afterInterrupt, bool, error) {
		if !d.Stopping {
			return afterInterrupt{}, false, finish(ctx)
		}
		return afterInterrupt{run: run, retired: d.Container, finish: finish}, true, nil
	}
	if e.Kind == kindDelete {
		if gone {
			slog.Warn("recover: finishing a delete interrupted by the restart", "operation", e.ID, "sandbox", d.Name)
			return afterInterrupt{}, false, mark(metadata.JournalDone,
				fmt.Sprintf("interrupted by a cairnd restart at %s, after sandbox %s was deleted: finished, its files removed at the restart", at, d.Name))(ctx)
		}
		slog.Warn("recover: undoing a delete interrupted by the restart", "operation", e.ID, "sandbox", sb.Name)
		return handled(sb.State == metadata.SandboxRunning, mark(metadata.JournalUndone,
			fmt.Sprintf("interrupted by a cairnd restart at %s; undone: sandbox %s was not deleted (its final checkpoint, if taken, stays)", at, sb.Name)))
	}
	if gone {
		return afterInterrupt{}, false, mark(metadata.JournalUndone, fmt.Sprintf("interrupted by a cairnd restart at %s; the sandbox no longer exists", at))(ctx)
	}
	root, err := m.cfg.Pool.SubvolumeID(m.cfg.Pool.SandboxPath(sb.ID))
	if err != nil {
		return afterInterrupt{}, false, err
	}
	running := sb.State == metadata.SandboxRunning
	switch {
	case root == d.OldRoot:
		slog.Warn("recover: undoing a restore in place interrupted by the restart", "operation", e.ID, "sandbox", sb.Name)
		msg := fmt.Sprintf("interrupted by a cairnd restart at %s; undone: sandbox %s has the disk it had before the restore to %s", at, sb.Name, d.Seq)
		if d.Stopping {
			// Its processes were ended: it boots from that disk. Resuming
			// the safety checkpoint's processes on a disk that moved on
			// since would not be safe; a restore to it does both.
			msg += ", and boots from it: its processes had been ended"
			if safe, err := m.cfg.Store.CheckpointByID(ctx, d.Safety); err == nil {
				msg += fmt.Sprintf(" (`cairn restore %s %s` brings back the state of its safety checkpoint, processes included)", sb.Name, safe.Seq)
			}
		}
		return handled(running, mark(metadata.JournalUndone, msg))
	case d.NewRoot == 0 || root != d.NewRoot:
		// Neither root: the sandbox changed after the operation ended
		// without its mark. Left as it is.
		slog.Warn("recover: an interrupted restore's sandbox changed since; leaving it as it is", "operation", e.ID, "sandbox", sb.Name)
		return afterInterrupt{}, false, mark(metadata.JournalUndone,
			fmt.Sprintf("ended at an unknown point; found at a cairnd restart at %s with sandbox %s changed since, and left as it is", at, sb.Name))(ctx)
	}
	// The new root is in place: go forward, as the restore would have.
	slog.Warn("recover: finishing a restore in place interrupted by the restart", "operation", e.ID, "sandbox", sb.Name, "checkpoint", d.Seq)
	if err := m.cfg.Store.SetCurrentCheckpoint(ctx, sb.ID, d.Checkpoint); err != nil {
		return afterInterrupt{}, false, err
	}
	if sb.ResumeCheckpoint != "" {
		if err := m.cfg.Store.SetResumeCheckpoint(ctx, sb.ID, ""); err != nil {
			return afterInterrupt{}, false, err
		}
	}
	// Its old processes, if it ran, were ended before the swap.
	after = afterInterrupt{run: running, retired: d.Container}
	how := "boots from the restored disk"
	if d.Memory {
		// Restoring a memory checkpoint runs the sandbox, whether it ran
		// before or not: from its memory, or its disk if that is gone.
		after.run = true
		if after.memory = m.memoryOf(ctx, d.Checkpoint); after.memory != nil {
			how = "its processes resume from memory"
		} else {
			how = "boots from the restored disk (the checkpoint's memory image is gone)"
		}
	}
	after.finish = mark(metadata.JournalDone,
		fmt.Sprintf("interrupted by a cairnd restart at %s, after the new disk was swapped in: finished, sandbox %s restored to %s, %s", at, sb.Name, d.Seq, how))
	return after, true, nil
}

// startAfterInterrupt starts sb again in the background, as an
// interrupted in-place operation left it (after), without marking it
// crashed, and marks the operation when the start ends; execs wait for
// it. It reports whether the start was handed off.
func (m *recovery) startAfterInterrupt(sb metadata.Sandbox, after afterInterrupt) bool {
	l, err := m.ex.exclusive(context.Background(), sb, api.StateStarting)
	if err != nil {
		return false
	}
	go func() {
		defer m.ex.release(l)
		ctx := context.Background()
		err := errors.New("no memory image")
		if after.memory != nil {
			slog.Info("recover: resuming sandbox from the memory image of its restored checkpoint", "sandbox", sb.Name, "checkpoint", after.memory.Seq)
			err = m.resumeFrom(ctx, sb, *after.memory)
			if err != nil {
				slog.Warn("recover: resuming from memory failed; booting from the restored disk", "sandbox", sb.Name, "err", err)
			}
		}
		if err != nil {
			slog.Info("recover: starting sandbox stopped by an interrupted operation", "sandbox", sb.Name)
			err = m.run.startContainer(ctx, sb, "")
		}
		if err != nil {
			slog.Error("recover: start failed; marking crashed", "sandbox", sb.Name, "err", err)
			logErr("recover: mark crashed", m.cfg.Store.SetSandboxCrashed(ctx, sb.ID, "starting it again after an operation a cairnd restart interrupted failed: "+err.Error(), m.cfg.Now()))
		} else {
			logErr("recover: mark running", m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning))
		}
		logErr("recover: mark the interrupted operation", after.finish(ctx), "sandbox", sb.Name)
	}()
	return true
}

// memoryOf returns the checkpoint with that id if its memory image can be
// resumed from, else nil (and logs why).
func (m *recovery) memoryOf(ctx context.Context, id string) *metadata.Checkpoint {
	ck, err := m.cfg.Store.CheckpointByID(ctx, id)
	if err == nil && !ck.HasMemory {
		return nil
	}
	if err == nil {
		err = m.cfg.Disks.CheckMemory(ck)
	}
	if err != nil {
		slog.Warn("recover: the memory image to resume from is gone", "checkpoint", id, "err", err)
		return nil
	}
	return &ck
}

// resumeFrom starts sb from the memory image of checkpoint ck, held for as
// long as the start reads it.
func (m *recovery) resumeFrom(ctx context.Context, sb metadata.Sandbox, ck metadata.Checkpoint) error {
	held, err := m.cfg.Disks.Open(ctx, ck, disks.PurposeRestore)
	if err != nil {
		return err
	}
	defer held.Release()
	mem, err := held.MemoryImage()
	if err != nil {
		return err
	}
	return m.run.startContainer(ctx, sb, mem)
}
