package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/catalog"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/revert"
)

// A take-over restores on this host a sandbox whose host is down, under
// its name and id, from a checkpoint that has an off-site copy (the lost
// host's pool, which holds the sandbox's root and its checkpoints' disks,
// is out of reach): an evacuation of the lost host does it for each of its
// sandboxes, `cairn restore NAME --latest --on HOST` for one. The row
// moves to this host only once the root is laid out here
// (Store.MoveSandbox, which fails when the row no longer names the lost
// host: two hosts cannot both take it over); a crash before that leaves a
// root no row of this host names, swept at the next start. The lost host,
// when it comes back, finds the row another host's and sweeps its stale
// copy (recover.go). See docs/several-hosts.md.

// LatestOffsite is the checkpoint id that names, in a take-over, the
// sandbox's newest checkpoint with an off-site copy.
const LatestOffsite = catalog.LatestCheckpoint

// takeOverAtOnce is how many sandboxes an evacuation restores on this host
// at once: each mostly waits for its off-site reads.
const takeOverAtOnce = 3

// TakeOver restores the sandbox called name, whose host is down, on this
// host from its checkpoint ref (LatestOffsite: the newest with an off-site
// copy), keeping its name and id; H03 while its host is up.
func (m *Manager) TakeOver(ctx context.Context, account, name, ref string, whole bool) (*operation.Op, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if err := m.mayTakeOver(sb); err != nil {
		return nil, err
	}
	return m.cfg.Ops.Start(kindRestore, "sandbox/"+sb.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		out, err := m.takeOver(ctx, op, sb, ref, whole)
		if err != nil {
			return nil, err
		}
		op.Step(api.PhaseDone, "Sandbox %s restored on this host from %s", out.Name, out.Checkpoint)
		return out, nil
	}), nil
}

// Evacuate takes over on this host the sandboxes with these ids, each from
// its newest checkpoint with an off-site copy, a few at a time; a sandbox
// that cannot be restored is reported with its error, and the others go
// on. Every id must name a sandbox of a host that is down.
func (m *Manager) Evacuate(ctx context.Context, op *operation.Op, ids []string, whole bool) []api.Evacuated {
	out := make([]api.Evacuated, len(ids))
	sem := make(chan struct{}, takeOverAtOnce)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sb, err := m.cfg.Store.SandboxByID(ctx, id)
			if err == nil {
				err = m.mayTakeOver(sb)
			}
			if err == nil {
				out[i], err = m.takeOver(ctx, op, sb, LatestOffsite, whole)
			}
			if err != nil {
				out[i] = m.notTakenOver(ctx, sb, id, err)
				op.Notef(api.PhaseEvacuate, "Sandbox %s was not restored: %v", out[i].Name, err)
			}
			mu.Lock()
			done++
			op.Report(api.Progress{Phase: api.PhaseEvacuate, Done: int64(done), Total: int64(len(ids)), Unit: api.UnitSandboxes},
				"%d of %d sandboxes done on this host", done, len(ids))
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// mayTakeOver fails with H03 unless sandbox sb's host is another host, and
// down.
func (m *Manager) mayTakeOver(sb metadata.Sandbox) error {
	switch {
	case m.cfg.Mine == nil || m.cfg.Mine(sb.HostID):
		return errdefs.New(api.CodeHostUp, "sandbox %s is this host's already: restore it in place (without --on)", sb.Name)
	case m.cfg.Down == nil || !m.cfg.Down(sb.HostID):
		return errdefs.New(api.CodeHostUp, "sandbox %s runs on a host that is up: restore it there (without --on); only the sandboxes of a host that is down are restored on another", sb.Name)
	}
	return nil
}

// notTakenOver is the report of a sandbox an evacuation could not restore.
func (m *Manager) notTakenOver(ctx context.Context, sb metadata.Sandbox, id string, err error) api.Evacuated {
	lostHost := sb.HostID
	// As the row is now: a sandbox restored here that did not start is
	// this host's, crashed.
	if cur, rerr := m.cfg.Store.SandboxByID(ctx, id); rerr == nil {
		sb = cur
	}
	e := api.Evacuated{State: string(sb.State), ID: id, Name: sb.Name, Host: m.hostName(sb.HostID),
		Error: &api.ErrorInfo{Code: errdefs.CodeOf(err), Message: err.Error()}}
	if e.Error.Code == "" {
		e.Error.Code = api.CodeInternal
	}
	if acct, aerr := metadata.AccountByID(ctx, m.cfg.Store, sb.AccountID); aerr == nil {
		e.Account = acct.Name
	}
	if sb.ID != "" {
		if cks, err := m.checkpointsOf(ctx, sb); err == nil {
			e.Lost = lostOf(cks, lostHost)
		}
	}
	return e
}

// downAfter is how old a host's heartbeat is when it counts as down.
func (m *Manager) downAfter() time.Duration {
	if m.cfg.HostDownAfter > 0 {
		return m.cfg.HostDownAfter
	}
	return 10 * time.Second
}

func (m *Manager) hostName(id string) string {
	if m.cfg.HostName == nil {
		return ""
	}
	return m.cfg.HostName(id)
}

// takeOver restores sandbox sb, whose host is down, on this host from its
// checkpoint ref (see TakeOver), under its lease.
func (m *Manager) takeOver(ctx context.Context, op *operation.Op, sb metadata.Sandbox, ref string, whole bool) (api.Evacuated, error) {
	from := sb.HostID
	// The lost host holds nothing any more: its lease on the sandbox (an
	// operation it had under way when it died) would keep the sandbox
	// busy for the lease's whole TTL. Only that one: the host's other
	// leases are not this take-over's to end.
	leases, err := m.cfg.Store.Leases(ctx, sandboxResource(sb.ID))
	if err != nil {
		return api.Evacuated{}, err
	}
	for _, l := range leases {
		if strings.HasPrefix(l.Owner, lease.OwnerPrefix(from)) {
			slog.Info("take-over: the lost host's lease on the sandbox is let go", "sandbox", sb.Name, "purpose", l.Purpose)
			if err := m.cfg.Store.ReleaseLease(ctx, l.ID); err != nil {
				return api.Evacuated{}, err
			}
		}
	}
	l, err := m.ex.exclusive(ctx, sb, api.StateRestoring)
	if err != nil {
		return api.Evacuated{}, err
	}
	defer m.ex.release(l)
	if sb, err = m.cfg.Store.SandboxByID(ctx, sb.ID); err != nil {
		return api.Evacuated{}, err
	}
	if sb.HostID != from {
		return api.Evacuated{}, errdefs.New(api.CodeHostUp, "sandbox %s was taken over by host %s meanwhile", sb.Name, m.hostName(sb.HostID))
	}
	acct, err := metadata.AccountByID(ctx, m.cfg.Store, sb.AccountID)
	if err != nil {
		return api.Evacuated{}, err
	}
	cks, err := m.checkpointsOf(ctx, sb)
	if err != nil {
		return api.Evacuated{}, err
	}
	ck, err := m.takeOverCheckpoint(ctx, sb, cks, ref)
	if err != nil {
		return api.Evacuated{}, err
	}
	src, err := m.sourceFor(ctx, ck, false)
	if err != nil {
		return api.Evacuated{}, err
	}
	lazily := !whole && src == disks.FromOffsite && m.lazyRemote(ck.AccountID) != nil
	run := sb.State == metadata.SandboxRunning
	out := api.Evacuated{Account: acct.Name, Name: sb.Name, ID: sb.ID, Checkpoint: ck.Seq, GlobalID: ck.ID, Lazy: lazily,
		Lost: lostOf(cks, from)}
	op.Step(api.PhaseEvacuate, "Restoring sandbox %s of host %s here from %s", sb.Name, m.hostName(from), ck.Seq)

	undo := revert.New()
	defer undo.Fail()
	root := m.cfg.Pool.SandboxPath(sb.ID)
	// Whatever this host still has of the sandbox (it ran here once, and
	// was moved away) is stale.
	if err := m.cfg.Pool.Delete(ctx, root); err != nil {
		return out, err
	}
	if err := m.run.dropLazy(sb.ID); err != nil {
		return out, err
	}
	var held *disks.Held
	if lazily {
		err = m.cfg.Disks.MaterializeLazy(ctx, ck, root, m.run.lazyDir(sb.ID), m.lazyRemote(ck.AccountID))
	} else {
		var progress func(api.Progress, string)
		if src == disks.FromOffsite {
			progress = fetchProgress(op, ck)
		}
		held, err = m.cfg.Disks.Materialize(ctx, ck, root, src, m.remote(ck.AccountID), progress)
	}
	if err != nil {
		return out, err
	}
	if held != nil {
		defer held.Release()
	}
	undo.Add(func() { logErr("undo: delete root", m.cfg.Pool.Delete(context.Background(), root), "sandbox", sb.Name) })
	undo.Add(func() { logErr("undo: drop the lazy root", m.run.dropLazy(sb.ID), "sandbox", sb.Name) })
	if err := os.MkdirAll(filepath.Join(m.run.sandboxDir(sb.ID), "dotcairn"), 0o755); err != nil {
		return out, err
	}
	mem := ""
	if run && ck.HasMemory {
		var remove func()
		mem, remove, err = m.takeOverMemory(ctx, op, ck, held)
		if err != nil {
			op.Notef(api.PhaseEvacuate, "The memory image of %s/%s cannot be read (%v): sandbox %s boots from the disk instead", sb.Name, ck.Seq, err, sb.Name)
		} else {
			defer remove()
		}
	}
	if err := m.cfg.Store.MoveSandbox(ctx, sb.ID, from, m.cfg.HostID, ck.ID, m.downAfter()); err != nil {
		if errors.Is(err, metadata.ErrConflict) {
			return out, errdefs.Wrap(api.CodeHostUp, err, "sandbox %s was not moved: another host took it over meanwhile, or its host came back", sb.Name)
		}
		return out, err
	}
	undo.Success() // the sandbox is this host's: from here on go forward
	sb.HostID, sb.CurrentCheckpoint, sb.ResumeCheckpoint = m.cfg.HostID, ck.ID, ""
	out.Host = m.hostName(m.cfg.HostID)
	slog.Info("take-over: sandbox restored on this host", "sandbox", sb.Name, "id", sb.ID, "from_host", from, "checkpoint", ck.Seq, "lazy", lazily)
	out.State = string(metadata.SandboxStopped)
	if !run {
		logErr("mark stopped", m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxStopped), "sandbox", sb.Name)
		if lazily {
			m.run.resumeLazy(context.WithoutCancel(ctx), sb)
		}
		return out, nil
	}
	if err := m.startTakenOver(ctx, op, sb, mem); err != nil {
		return out, err
	}
	out.Memory, out.State = mem != "", string(metadata.SandboxRunning)
	m.wakeLifetimes()
	return out, nil
}

// startTakenOver starts a sandbox a take-over restored, resuming the
// processes of memory image mem if not ""; when they do not resume it
// boots from the disk. A sandbox that does not start is marked crashed
// (its disk is in place: `cairn start` tries again).
func (m *Manager) startTakenOver(ctx context.Context, op *operation.Op, sb metadata.Sandbox, mem string) error {
	if mem != "" {
		op.Step(api.PhaseResume, "Resuming the processes of sandbox %s", sb.Name)
		err := m.run.startContainer(ctx, sb, mem)
		if err == nil {
			return m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning)
		}
		op.Notef(api.PhaseResume, "Resuming sandbox %s from memory failed (%v); starting it from the restored disk instead", sb.Name, err)
	}
	op.Step(api.PhaseStart, "Starting sandbox %s", sb.Name)
	if err := m.run.startContainer(ctx, sb, ""); err != nil {
		logErr("mark crashed", m.cfg.Store.SetSandboxCrashed(context.WithoutCancel(ctx), sb.ID, "restored on this host after its host was lost, it did not start: "+err.Error(), m.cfg.Now()), "sandbox", sb.Name)
		return fmt.Errorf("sandbox %s is restored but did not start: %w", sb.Name, err)
	}
	return m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning)
}

// takeOverMemory returns memory checkpoint ck's image: the local copy's
// (held) or one fetched from off-site; remove deletes a fetched one once
// the sandbox runs.
func (m *Manager) takeOverMemory(ctx context.Context, op *operation.Op, ck metadata.Checkpoint, held *disks.Held) (dir string, remove func(), err error) {
	if held != nil {
		dir, err = held.MemoryImage()
		return dir, func() {}, err
	}
	return m.fetchMemory(ctx, op, ck)
}

// checkpointsOf lists every checkpoint of sb, oldest first.
func (m *Manager) checkpointsOf(ctx context.Context, sb metadata.Sandbox) ([]metadata.Checkpoint, error) {
	return m.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
}

// takeOverCheckpoint is the checkpoint of sb that ref names; for
// LatestOffsite the newest of cks (its checkpoints, oldest first) that
// has an off-site copy. A checkpoint with neither an off-site copy nor a
// local one on this host cannot be restored here: R02.
func (m *Manager) takeOverCheckpoint(ctx context.Context, sb metadata.Sandbox, cks []metadata.Checkpoint, ref string) (metadata.Checkpoint, error) {
	if ref != LatestOffsite {
		ck, err := m.cfg.Catalog.FindCheckpoint(ctx, sb, ref)
		if err != nil {
			return ck, err
		}
		if ck.OffsiteManifest == "" && !m.cfg.Disks.HasLocal(ctx, ck) {
			return ck, errdefs.New(api.CodeNotOffsite, "checkpoint %s/%s has no off-site copy: only the pool of its host, which is down, holds it", sb.Name, ck.Seq)
		}
		return ck, nil
	}
	for i := len(cks) - 1; i >= 0; i-- {
		if cks[i].OffsiteManifest != "" {
			return cks[i], nil
		}
	}
	return metadata.Checkpoint{}, errdefs.New(api.CodeNotOffsite, "sandbox %s has no checkpoint with an off-site copy: nothing of it can be restored while its host is down", sb.Name)
}

// lostOf are the checkpoints of cks whose disks only host's pool holds:
// no off-site copy.
func lostOf(cks []metadata.Checkpoint, host string) []api.LostCheckpoint {
	var lost []api.LostCheckpoint
	for _, ck := range cks {
		if ck.OffsiteManifest == "" && ck.HostID == host {
			lost = append(lost, api.LostCheckpoint{ID: ck.Seq, GlobalID: ck.ID, CreatedAt: ck.CreatedAt})
		}
	}
	return lost
}
