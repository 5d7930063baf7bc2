package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lazy"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/revert"
)

// Restore brings the sandbox called name back to one of its checkpoints:
// in place (the same sandbox, name and id), or with req.As into a new
// sandbox, leaving the source untouched.
//
// In place, it first takes a safety checkpoint of the current state
// (trigger "restore", so the restore can itself be undone) unless
// req.NoSafetyCheckpoint; then it stops the sandbox (running sessions
// end), swaps in a writable snapshot of the checkpoint, and starts it again
// if it was running. Execs that arrive meanwhile wait and then run on the
// restored sandbox.
func (m *Manager) Restore(ctx context.Context, account, name, ref string, req api.RestoreRequest) (*operation.Op, error) {
	return m.restore(ctx, account, name, ref, req, 0)
}

// InsideRestoreGrace is how long a restore in place asked for from inside
// the sandbox waits before it stops the sandbox: the caller is one of the
// processes it ends, and it has that long to get its answer out (cairn-env
// prints it, and its output travels to whoever ran it). The sandbox is
// busy meanwhile: other lifecycle operations are refused, execs wait.
const InsideRestoreGrace = time.Second

// RestoreFromInside is Restore in place, asked for by a process inside the
// sandbox (its management socket): it starts after InsideRestoreGrace.
func (m *Manager) RestoreFromInside(ctx context.Context, account, name, ref string, req api.RestoreRequest) (*operation.Op, error) {
	if req.As != "" || req.On != "" {
		return nil, errdefs.New(api.CodeInvalidArgument, "restoring into a new sandbox, or on another host, is not possible from inside a sandbox")
	}
	return m.restore(ctx, account, name, ref, req, InsideRestoreGrace)
}

func (m *Manager) restore(ctx context.Context, account, name, ref string, req api.RestoreRequest, grace time.Duration) (*operation.Op, error) {
	if req.On != "" && req.As != "" {
		return nil, errdefs.New(api.CodeInvalidArgument, "on and as do not go together: a restore on another host keeps the sandbox's name (restore as a new sandbox on the host that gets the request)")
	}
	if req.On != "" {
		// The server sent it to host req.On, this one: a sandbox of a
		// host that is down is taken over (H03 for one of this host, or
		// of a host that is up).
		if req.DiskOnly || req.FromOffsite || req.NoSafetyCheckpoint {
			return nil, errdefs.New(api.CodeInvalidArgument, "on takes no disk_only, from_offsite or no_safety_checkpoint: a restore on another host reads off-site, with the memory of a memory checkpoint, and there is no current state to checkpoint")
		}
		return m.TakeOver(ctx, account, name, ref, req.Whole)
	}
	if req.As != "" {
		acct, sb, err := m.lookup(ctx, account, name)
		if err != nil {
			return nil, err
		}
		if err := m.ex.refuseIfBusy(ctx, sb, api.StateDeleting); err != nil {
			return nil, err
		}
		ck, err := m.cfg.Catalog.FindCheckpoint(ctx, sb, ref)
		if err != nil {
			return nil, err
		}
		return m.restoreAsNew(ctx, acct, ck, req.As, req.DiskOnly, req.FromOffsite, !req.Whole)
	}
	sb, l, err := m.ex.acquire(ctx, account, name, api.StateRestoring)
	if err != nil {
		return nil, err
	}
	ck, err := m.cfg.Catalog.FindCheckpoint(ctx, sb, ref)
	var src disks.Source
	if err == nil {
		src, err = m.sourceFor(ctx, ck, req.FromOffsite)
	}
	diskOnly := req.DiskOnly
	if err == nil && ck.HasMemory && !diskOnly && src == disks.FromLocal {
		err = m.cfg.Disks.CheckMemory(ck) // from off-site, it is fetched with the disk
	}
	if err != nil {
		m.ex.release(l)
		return nil, err
	}
	return m.lifecycleOp(kindRestore, sb, l, func(ctx context.Context, op *operation.Op) (any, error) {
		if grace > 0 {
			op.Step(api.PhaseWait, "Restoring in %s: the caller inside the sandbox gets its answer first", grace)
			select {
			case <-time.After(grace):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		// Journalled, so that a start after a crash finishes it or puts the
		// sandbox back as it was (journal_inplace.go).
		oldRoot, err := m.cfg.Pool.SubvolumeID(m.cfg.Pool.SandboxPath(sb.ID))
		if err != nil {
			return nil, fmt.Errorf("read the sandbox's disk (nothing was restored): %w", err)
		}
		d := inPlaceDetail{Name: sb.Name, Checkpoint: ck.ID, Seq: ck.Seq, OldRoot: oldRoot, Memory: ck.HasMemory && !diskOnly}
		start := m.cfg.Now()
		err = m.journalledInPlace(ctx, op, sb, d, func(notes *inPlaceNotes) error {
			lazily := !req.Whole && src == disks.FromOffsite && m.lazyRemote(ck.AccountID) != nil
			return m.restoreInPlace(ctx, op, sb, ck, src, inPlaceOpts{safety: !req.NoSafetyCheckpoint, diskOnly: diskOnly, lazily: lazily}, notes)
		})
		m.observeRestore(restoreInPlace, src == disks.FromOffsite, start, err)
		if err != nil {
			return nil, err
		}
		op.Step(api.PhaseDone, "Sandbox %s restored to %s", name, ck.Seq)
		return m.cfg.Catalog.Get(ctx, account, name)
	}), nil
}

// inPlaceOpts are the choices of a restore in place: take a safety
// checkpoint first, restore only the disk of a memory checkpoint, lay a
// disk from off-site out lazily.
type inPlaceOpts struct {
	safety, diskOnly, lazily bool
}

// restoreInPlace swaps in a writable copy of ck's disk, made from src,
// noting in its journal entry when it ends the sandbox's processes and
// what it swaps in.
func (m *Manager) restoreInPlace(ctx context.Context, op *operation.Op, sb metadata.Sandbox, ck metadata.Checkpoint, src disks.Source, o inPlaceOpts, notes *inPlaceNotes) error {
	undo := revert.New()
	defer undo.Fail()
	safety, diskOnly := o.safety, o.diskOnly

	root := m.cfg.Pool.SandboxPath(sb.ID)
	// Built in the pool's work area, swept when the pool is opened: a
	// crash leaves nothing behind there.
	staging := m.cfg.Pool.TempPath("restore-" + sb.ID)
	if err := m.cfg.Pool.Delete(ctx, staging); err != nil {
		return err
	}
	// The new root first, while the sandbox runs on: from the local copy
	// a snapshot (its lease keeps the disk and memory image until the
	// sandbox runs again), from off-site a full read.
	var progress func(api.Progress, string)
	if src == disks.FromOffsite && !o.lazily {
		progress = fetchProgress(op, ck)
	}
	var held *disks.Held
	var err error
	// A lazy root's state is laid out beside the sandbox's own (which a
	// lazy root it runs on now still uses) and moved in just before the
	// swap; see swapInLazyState.
	nextState := m.run.lazyDir(sb.ID) + ".next"
	if o.lazily {
		op.Step(api.PhaseFetch, "Laying out the tree of %s from off-site; its files' data comes as it is read, the rest in the background", ck.Seq)
		os.RemoveAll(nextState)
		err = m.cfg.Disks.MaterializeLazy(ctx, ck, staging, nextState, m.lazyRemote(ck.AccountID))
	} else {
		held, err = m.cfg.Disks.Materialize(ctx, ck, staging, src, m.remote(ck.AccountID), progress)
	}
	if err != nil {
		return err
	}
	undo.Add(func() { logErr("undo: delete staged root", m.cfg.Pool.Delete(context.Background(), staging)) })
	if o.lazily {
		undo.Add(func() { os.RemoveAll(nextState) })
	}
	mem := ""
	switch {
	case held != nil:
		defer held.Release()
		if ck.HasMemory && !diskOnly {
			if mem, err = held.MemoryImage(); err != nil {
				return err
			}
		}
	case ck.HasMemory && !diskOnly:
		dir, remove, err := m.fetchMemory(ctx, op, ck)
		if err != nil {
			return err
		}
		defer remove()
		mem = dir
	}

	if o.lazily && lazy.HasState(m.run.lazyDir(sb.ID)) {
		// The sandbox's own root is lazy too: whole before it can go
		// (see swapInLazyState), while the sandbox still runs on it.
		if err := m.waitFilled(ctx, sb, op); err != nil {
			return err
		}
	}
	safetyID := ""
	if safety {
		op.Step(api.PhaseSafety, "Taking a safety checkpoint of the current state")
		// With memory when the sandbox runs, so the undo brings back its
		// processes too.
		safe, _, err := m.checkpoint(ctx, sb, checkpointOpts{Trigger: api.TriggerRestore, Comment: "before restore to " + ck.Seq, Memory: m.run.isLive(sb.ID)}, op)
		m.noteAuto(sb.ID, api.TriggerRestore, err)
		if err != nil {
			// Never throw away the current state without its checkpoint.
			return fmt.Errorf("safety checkpoint (nothing was restored; --no-safety-checkpoint skips it): %w", err)
		}
		op.Notef(api.PhaseSafety, "Safety checkpoint %s taken: `cairn restore %s %s` undoes this restore", safe.Seq, sb.Name, safe.Seq)
		safetyID = safe.ID
	}
	running := sb.State == metadata.SandboxRunning
	if running {
		if err := notes.stopping(ctx, safetyID); err != nil {
			return err
		}
		op.Step(api.PhaseStop, "Stopping sandbox %s", sb.Name)
		if err := m.run.retireContainer(ctx, sb); err != nil {
			return err
		}
		undo.Add(func() {
			logErr("undo: restart after failed restore", m.run.startContainer(context.Background(), sb, ""), "sandbox", sb.Name)
		})
	}

	if o.lazily {
		if err := m.swapInLazyState(ctx, op, sb, nextState); err != nil {
			return err
		}
		undo.Add(func() { logErr("undo: drop the lazy state", lazy.Remove(m.run.lazyDir(sb.ID)), "sandbox", sb.Name) })
	}
	op.Step(api.PhaseSwap, "Swapping in checkpoint %s", ck.Seq)
	// One atomic exchange: a crash leaves either the old root or the new
	// one in place; whichever is left in the work area is swept at the
	// next start.
	newRoot, err := m.cfg.Pool.SubvolumeID(staging)
	if err == nil {
		err = notes.swapping(ctx, newRoot)
	}
	if err != nil {
		return err
	}
	if err := m.cfg.Pool.Exchange(staging, root); err != nil {
		return err
	}
	undo.Success() // the new root is in place; from here on go forward
	if !o.lazily {
		// A lazy root the sandbox had went with the old root: its fill
		// and state go now, not at a later start.
		logErr("drop the replaced lazy root", m.run.dropLazy(sb.ID), "sandbox", sb.Name)
	}
	logErr("delete replaced root", m.cfg.Pool.Delete(context.WithoutCancel(ctx), staging), "sandbox", sb.Name)
	if err := m.cfg.Store.SetCurrentCheckpoint(ctx, sb.ID, ck.ID); err != nil {
		return err
	}
	if sb.ResumeCheckpoint != "" {
		logErr("clear saved session", m.cfg.Store.SetResumeCheckpoint(ctx, sb.ID, ""), "sandbox", sb.Name)
	}
	switch {
	case mem != "":
		// The processes of the checkpoint resume, whether the sandbox ran
		// before or not: that is what restoring a memory checkpoint means.
		op.Step(api.PhaseResume, "Resuming the processes of %s", ck.Seq)
		if err := m.run.startContainer(ctx, sb, mem); err != nil {
			// The disk is restored; do not leave the sandbox down.
			op.Notef(api.PhaseResume, "Resuming from memory failed (%v); starting from the restored disk instead", err)
			if serr := m.run.startContainer(ctx, sb, ""); serr != nil {
				logErr("mark stopped", m.cfg.Store.SetSandboxState(context.WithoutCancel(ctx), sb.ID, metadata.SandboxStopped))
				return serr
			}
			logErr("mark running", m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning))
			return err
		}
		if !running {
			logErr("mark running", m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning))
		}
	case running:
		op.Step(api.PhaseStart, "Starting sandbox %s", sb.Name)
		if err := m.run.startContainer(ctx, sb, ""); err != nil {
			logErr("mark stopped", m.cfg.Store.SetSandboxState(context.WithoutCancel(ctx), sb.ID, metadata.SandboxStopped))
			return err
		}
	}
	if o.lazily && !m.run.isLive(sb.ID) {
		// Stopped: the fill goes on all the same.
		m.run.resumeLazy(context.WithoutCancel(ctx), sb)
	}
	slog.Info("sandbox restored", "sandbox", sb.Name, "checkpoint", ck.Seq)
	return nil
}

// swapInLazyState makes next, the lazy state of the tree about to be
// swapped in, sandbox sb's, once its container is gone. A lazy root the
// sandbox had was filled before (a failed restore leaves the old root,
// which must then be whole) and is removed.
// A crash between this and the swap leaves a state whose plan names
// another tree than the root: it is removed at the next start
// (hasLazyRoot).
func (m *Manager) swapInLazyState(ctx context.Context, op *operation.Op, sb metadata.Sandbox, next string) error {
	if lazy.HasState(m.run.lazyDir(sb.ID)) {
		if err := m.waitFilled(ctx, sb, op); err != nil { // filled before the stop: at once
			return err
		}
		if err := m.run.dropLazy(sb.ID); err != nil {
			return err
		}
	}
	return os.Rename(next, m.run.lazyDir(sb.ID))
}

// RestoreSnapshot restores a checkpoint named account-wide (global id,
// snapshot name, or SANDBOX/ID) as a new sandbox.
func (m *Manager) RestoreSnapshot(ctx context.Context, account, ref string, req api.SnapshotRestoreRequest) (*operation.Op, error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	ck, err := m.cfg.Catalog.ResolveSnapshot(ctx, acct, ref)
	if err != nil {
		return nil, err
	}
	return m.restoreAsNew(ctx, acct, ck, req.Name, req.DiskOnly, req.FromOffsite, !req.Whole)
}

// restoreAsNew makes and starts a new independent sandbox from ck; a
// memory checkpoint's processes resume in it unless diskOnly. The disk
// comes from off-site with fromOffsite, or when the local copy is gone;
// from off-site with lazyFill, lazily (docs/lazy-restore.md), else whole.
func (m *Manager) restoreAsNew(ctx context.Context, acct metadata.Account, ck metadata.Checkpoint, newName string, diskOnly, fromOffsite, lazyFill bool) (*operation.Op, error) {
	if err := ValidateName(newName); err != nil {
		return nil, err
	}
	src, err := m.sourceFor(ctx, ck, fromOffsite)
	if err != nil {
		return nil, err
	}
	lazyFill = lazyFill && src == disks.FromOffsite
	if lazyFill && m.lazyRemote(ck.AccountID) == nil {
		return nil, errdefs.New(api.CodeOffsiteUnavailable, "off-site copies are disabled in cairnd's config")
	}
	if ck.HasMemory && !diskOnly && src == disks.FromLocal {
		// From off-site, the memory image is fetched after the disk.
		if err := m.cfg.Disks.CheckMemory(ck); err != nil {
			return nil, err
		}
	}
	if err := m.cfg.Disks.CheckLimit(ctx, acct.ID); err != nil {
		return nil, err
	}
	_, release, err := m.ex.reserveName(ctx, acct.Name, newName)
	if err != nil {
		return nil, err
	}
	sb := m.childOf(acct, ck, newName, "")
	return m.cfg.Ops.Start("sandbox.create", "sandbox/"+newName, func(ctx context.Context, op *operation.Op) (out any, err error) {
		defer release()
		start := m.cfg.Now()
		defer func() { m.observeRestore(restoreAsNew, src == disks.FromOffsite, start, err) }()
		op.Step(api.PhaseCreate, "Creating %s from checkpoint %s/%s", newName, ck.SandboxName, ck.Seq)
		var progress func(api.Progress, string)
		if src == disks.FromOffsite {
			progress = fetchProgress(op, ck)
		}
		var held *disks.Held
		makeRoot := func(root string) error {
			if lazyFill {
				op.Step(api.PhaseFetch, "Laying out the tree of %s from off-site; its files' data comes as it is read, the rest in the background", ck.Seq)
				return m.cfg.Disks.MaterializeLazy(ctx, ck, root, m.run.lazyDir(sb.ID), m.lazyRemote(ck.AccountID))
			}
			var err error
			held, err = m.cfg.Disks.Materialize(ctx, ck, root, src, m.remote(ck.AccountID), progress)
			return err
		}
		removeMemory := func() {}
		memory := func() (string, error) {
			switch {
			case diskOnly || !ck.HasMemory:
				return "", nil
			case held != nil:
				return held.MemoryImage()
			}
			dir, remove, err := m.fetchMemory(ctx, op, ck)
			if err == nil {
				removeMemory = remove
			}
			return dir, err
		}
		return m.journalled(ctx, op, acct, ck.SandboxID, []metadata.Sandbox{sb}, func() (any, error) {
			err := m.create(ctx, op, sb, makeRoot, memory)
			if held != nil {
				held.Release()
			}
			removeMemory()
			if err != nil {
				logErr("undo: drop the lazy root", m.run.dropLazy(sb.ID), "sandbox", sb.Name)
				return nil, err
			}
			out, err := m.cfg.Catalog.Get(ctx, acct.Name, newName)
			if err != nil {
				m.destroy(context.WithoutCancel(ctx), sb)
			}
			return out, err
		})
	}), nil
}

// childOf is the row of a new sandbox made from checkpoint ck.
func (m *Manager) childOf(acct metadata.Account, ck metadata.Checkpoint, name, parentID string) metadata.Sandbox {
	sb := metadata.Sandbox{
		ID: newID(), AccountID: acct.ID, Name: name, Image: ck.Image, State: metadata.SandboxStopped,
		ParentID: parentID, SourceCheckpoint: ck.ID, CurrentCheckpoint: ck.ID,
		Inside: metadata.DefaultInsidePolicy, DiskBytes: m.cfg.DefaultDisk,
		Network: metadata.NetworkSettings{Mode: metadata.NetworkEgress},
	}
	// Keep the source's limits, interval and inside policy when it still
	// exists; of a deleted one, the disk size its checkpoint was taken
	// with (the checkpoint's quota group inherited it from the root).
	src, err := m.cfg.Store.SandboxByID(context.Background(), ck.SandboxID)
	switch {
	case err == nil:
		sb.CPUs, sb.MemoryBytes, sb.AutoCheckpoint, sb.Inside = src.CPUs, src.MemoryBytes, src.AutoCheckpoint, src.Inside
		sb.DiskBytes, sb.Restart, sb.Network, sb.Settings = src.DiskBytes, src.Restart, src.Network, src.Settings
		sb.Settings.Asleep, sb.Settings.Deadline = false, time.Time{} // its own: armed at its start
	case errors.Is(err, metadata.ErrNotFound):
		if size := m.cfg.Disks.DiskSizeOf(context.Background(), ck); size > 0 {
			sb.DiskBytes = size
		} else if sb.DiskBytes > 0 && 2*ck.SizeTotal > sb.DiskBytes {
			// Size unknown (no local copy to read it from, or taken before
			// sizes): the default, but never less than twice what the
			// checkpoint holds, so the copy is not born full.
			sb.DiskBytes = 2 * ck.SizeTotal
		}
	default:
		slog.Warn("read source sandbox", "err", err)
	}
	return sb
}
