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
//     root's subvolume is no longer the one recorded before it began): the
//     sandbox's current checkpoint is set, and it resumes from the
//     checkpoint's memory image if the restore was to resume it, or
//     boots from the restored disk; otherwise it is undone, which is to
//     say the sandbox is left as it was (a safety checkpoint it took
//     stays) and started again if cairnd had stopped it for the swap;
//   - a delete is finished when the sandbox's row is gone (the sweep that
//     follows removes its files); otherwise it is undone: the sandbox
//     stays, and is started again if the delete had stopped it.
//
// Either way the sandbox is not marked crashed: cairnd stopped it, not a
// fault of its own.

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
	// holds them (a restore that took one).
	Stopping  bool   `json:"stopping,omitempty"`
	Container string `json:"container,omitempty"`
	Safety    string `json:"safety,omitempty"`
}

// journalledInPlace runs work, op's work on sandbox sb, between a journal
// entry begun before it with detail d and marked when it ends. work calls
// stopping just before it ends the sandbox's processes (safety: the id of
// the safety checkpoint that holds them, "" for none), and does not stop
// them if that fails. A final mark that cannot be written is only logged:
// recovery of a running entry finds the work done and marks it so.
func (m *Manager) journalledInPlace(ctx context.Context, op *operation.Op, sb metadata.Sandbox, d inPlaceDetail, work func(stopping func(safety string) error) error) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	j, err := m.beginJournalDetail(ctx, op, sb.AccountID, sb.ID, nil, string(doc))
	if err != nil {
		return err
	}
	stopping := func(safety string) error {
		d.Stopping, d.Safety = true, safety
		if inst := m.cfg.Instances.get(sb.ID); inst != nil {
			d.Container = inst.container
		}
		doc, err := json.Marshal(d)
		if err == nil {
			err = m.cfg.Store.NoteJournal(ctx, j.id, string(doc))
		}
		if err != nil {
			return fmt.Errorf("record the operation's progress (the sandbox runs on): %w", err)
		}
		return nil
	}
	if err := work(stopping); err != nil {
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
}

// settleInPlace finishes or undoes interrupted restore or delete e (see
// above) and returns what to do with its sandbox.
func (m *recovery) settleInPlace(ctx context.Context, e metadata.JournalEntry) (afterInterrupt, error) {
	var d inPlaceDetail
	if e.Detail != "" {
		if err := json.Unmarshal([]byte(e.Detail), &d); err != nil {
			return afterInterrupt{}, fmt.Errorf("journal entry %s: detail: %w", e.ID, err)
		}
	}
	at := m.cfg.Now().UTC().Format(time.RFC3339)
	sb, err := m.cfg.Store.SandboxByID(ctx, e.SandboxID)
	gone := errors.Is(err, metadata.ErrNotFound)
	if err != nil && !gone {
		return afterInterrupt{}, err
	}
	if e.Kind == kindDelete {
		if gone {
			slog.Warn("recover: finishing a delete interrupted by the restart", "operation", e.ID, "sandbox", d.Name)
			return afterInterrupt{}, m.cfg.Store.FinishJournal(ctx, e.ID, metadata.JournalDone, "",
				fmt.Sprintf("interrupted by a cairnd restart at %s, after sandbox %s was deleted: finished, its files removed at the restart", at, d.Name))
		}
		slog.Warn("recover: undoing a delete interrupted by the restart", "operation", e.ID, "sandbox", sb.Name)
		return afterInterrupt{run: sb.State == metadata.SandboxRunning, retired: d.Container}, m.cfg.Store.FinishJournal(ctx, e.ID, metadata.JournalUndone, api.CodeInterrupted,
			fmt.Sprintf("interrupted by a cairnd restart at %s; undone: sandbox %s was not deleted (its final checkpoint, if taken, stays)", at, sb.Name))
	}
	if gone {
		return afterInterrupt{}, m.cfg.Store.FinishJournal(ctx, e.ID, metadata.JournalUndone, api.CodeInterrupted,
			fmt.Sprintf("interrupted by a cairnd restart at %s; the sandbox no longer exists", at))
	}
	root, err := m.cfg.Pool.SubvolumeID(m.cfg.Pool.SandboxPath(sb.ID))
	if err != nil {
		return afterInterrupt{}, err
	}
	running := sb.State == metadata.SandboxRunning
	if root == d.OldRoot || d.OldRoot == 0 {
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
		return afterInterrupt{run: running, retired: d.Container}, m.cfg.Store.FinishJournal(ctx, e.ID, metadata.JournalUndone, api.CodeInterrupted, msg)
	}
	// The new root is in place: go forward, as the restore would have.
	slog.Warn("recover: finishing a restore in place interrupted by the restart", "operation", e.ID, "sandbox", sb.Name, "checkpoint", d.Seq)
	if err := m.cfg.Store.SetCurrentCheckpoint(ctx, sb.ID, d.Checkpoint); err != nil {
		return afterInterrupt{}, err
	}
	if sb.ResumeCheckpoint != "" {
		if err := m.cfg.Store.SetResumeCheckpoint(ctx, sb.ID, ""); err != nil {
			return afterInterrupt{}, err
		}
	}
	// Its old processes were ended before the swap.
	after := afterInterrupt{run: running, retired: d.Container}
	how := "boots from the restored disk"
	if d.Memory {
		if after.memory = m.memoryOf(ctx, d.Checkpoint); after.memory != nil {
			after.run = true
			how = "its processes resume from memory"
		} else {
			how = "boots from the restored disk (the checkpoint's memory image is gone)"
		}
	}
	return after, m.cfg.Store.FinishJournal(ctx, e.ID, metadata.JournalDone, "",
		fmt.Sprintf("interrupted by a cairnd restart at %s, after the new disk was swapped in: finished, sandbox %s restored to %s, %s", at, sb.Name, d.Seq, how))
}

// startAfterInterrupt starts sb again in the background, as an
// interrupted in-place operation left it (after), without marking it
// crashed; execs wait for it.
func (m *recovery) startAfterInterrupt(sb metadata.Sandbox, after afterInterrupt) {
	l, err := m.ex.exclusive(context.Background(), sb, api.StateStarting)
	if err != nil {
		return
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
			return
		}
		logErr("recover: mark running", m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning))
	}()
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
