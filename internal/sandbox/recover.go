package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/container"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/network"
)

// recovery is what cairnd does at start to take over the sandboxes it
// finds (see Recover): it sweeps, adopts, resumes and restarts through the
// runner and the sandbox leases, and keeps watch on what it adopted.
type recovery struct {
	cfg Config
	ex  *exclusion
	run *runner
	// interrupted holds the sandboxes that an in-place operation cut
	// short had in hand (journal_inplace.go), by id.
	interrupted map[string]afterInterrupt
}

// recover brings the host in line with the metadata after cairnd starts:
// it undoes the operations a crash cut short (journal.go), sweeps what no committed sandbox owns (containers, root subvolumes,
// host directories left by a crash mid-create or mid-delete), re-adopts the
// containers that kept running while cairnd was away (their cairn-init dials
// the re-opened agent socket again), resumes any left paused, and starts
// again in the background the sandboxes that should run but do not (after a
// host reboot). It blocks only for the sweep and the adoption.
func (m *recovery) recover(ctx context.Context) error {
	// Operations cut short first: their sandboxes lose their rows, and
	// the sweep below removes the rest of them.
	if err := m.undoJournal(ctx); err != nil {
		return err
	}
	rows, err := m.cfg.Store.AllSandboxes(ctx)
	if err != nil {
		return err
	}
	// This host's alone: a container of a sandbox whose row names another
	// host (moved while this one was down) is swept as unknown.
	rows = mineOnly(m.cfg, rows)
	known := map[string]bool{}
	for _, sb := range rows {
		known[sb.ID] = true
	}
	containers, err := m.run.sweep(ctx, known)
	if err != nil {
		return err
	}
	for _, sb := range rows {
		name := m.run.settleContainers(ctx, sb, containers[sb.ID])
		err := m.run.lazyRootLost(ctx, sb, name)
		if err == nil {
			err = m.recoverOne(ctx, sb, name)
		}
		if after, ok := m.interrupted[sb.ID]; ok && !after.handedOff {
			logErr("recover: mark the interrupted operation", after.finish(ctx), "sandbox", sb.Name)
		}
		if err != nil {
			// One sandbox that cannot be taken over must not keep
			// cairnd (and every other sandbox) down: its container goes,
			// and it starts again from its disk if it should run.
			slog.Error("recover: cannot take over the sandbox's container", "sandbox", sb.Name, "err", err)
			logErr("recover: delete container", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
			if sb.State != metadata.SandboxStopped {
				m.foundDead(ctx, sb, "cairnd could not take over its container when it started: "+err.Error())
			}
		}
	}
	for _, sb := range rows {
		m.run.resumeLazy(ctx, sb)
	}
	return nil
}

// recoverOne takes over sandbox sb's container, name, as it finds it:
// resumes it if a crash left it paused, adopts it if it runs, restarts it
// if it should run and does not.
func (m *recovery) recoverOne(ctx context.Context, sb metadata.Sandbox, name string) error {
	st, pid, err := m.cfg.Runtime.State(ctx, name)
	if err != nil && !errors.Is(err, container.ErrNotExist) {
		return err
	}
	to, inDoubt := m.cfg.Runtime.InDoubt(name)
	inDoubt = inDoubt && (st == container.Paused || st == container.Running)
	if inDoubt {
		// Its state file cannot be trusted: whether it runs is for its
		// cairn-init to show (checkAdopted).
		slog.Warn("recover: a pause or resume of the sandbox was cut short by the crash; waiting for its cairn-init to tell whether it runs", "sandbox", sb.Name, "was_making", to)
		st = container.Running
	} else if st == container.Paused {
		slog.Warn("recover: resuming sandbox left paused", "sandbox", sb.Name)
		if err := m.cfg.Runtime.Resume(ctx, name); err != nil {
			return err
		}
		st = container.Running
	}
	after, interrupted := m.interrupted[sb.ID]
	switch {
	case st == container.Running && !(interrupted && name == after.retired):
		return m.adopt(ctx, sb, name, pid, inDoubt)
	case interrupted:
		// Stopped by the operation a crash cut short, not dead.
		logErr("recover: delete stopped container", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
		if after.run {
			after.handedOff = m.startAfterInterrupt(sb, after)
			m.interrupted[sb.ID] = after
		}
	case sb.State == metadata.SandboxRunning:
		logErr("recover: delete stopped container", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
		m.foundDead(ctx, sb, "it was not running when cairnd started (the host restarted, or it died while cairnd was down)")
	case sb.State == metadata.SandboxCrashed:
		// It crashed before cairnd stopped; its restart policy applies
		// again, with a fresh count.
		logErr("recover: delete stopped container", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
		if sb.Restart != metadata.RestartNo {
			m.restartInBackground(sb)
		}
	default:
		logErr("recover: delete stopped container", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
	}
	return nil
}

// foundDead marks a sandbox that should run and does not crashed, for
// reason, and applies its restart policy: but for `no`, it starts again
// from its disk now (in the background), as after a host reboot.
func (m *recovery) foundDead(ctx context.Context, sb metadata.Sandbox, reason string) {
	slog.Warn("recover: the sandbox is dead", "sandbox", sb.Name, "reason", reason, "restart", sb.Restart)
	if err := m.cfg.Store.SetSandboxCrashed(ctx, sb.ID, reason, m.cfg.Now()); err != nil {
		logErr("recover: mark crashed", err, "sandbox", sb.Name)
		return
	}
	if sb.Restart != metadata.RestartNo {
		m.restartInBackground(sb)
	}
}

// adopt takes over a running container: the agent socket is opened again
// (cairn-init re-dials it within a second) and the row says running.
// inDoubt: a pause or resume of it was cut short (Runtime.InDoubt).
func (m *recovery) adopt(ctx context.Context, sb metadata.Sandbox, name string, pid int, inDoubt bool) error {
	// What it browses is published again: a crash may have come between a
	// checkpoint's row and the refresh of the view.
	if err := m.cfg.Disks.Publish(ctx, sb); err != nil {
		logErr("recover: refresh /.cairn/checkpoints", err, "sandbox", sb.Name)
	}
	inst, err := m.run.openSockets(sb)
	if err != nil {
		return err
	}
	inst.pid, inst.container, inst.network = pid, name, metadata.NetworkNone
	if m.cfg.Networks != nil && m.cfg.Networks.Exists(name) {
		// Its rules are written again and its resolver started again.
		if _, err := m.cfg.Networks.Attach(ctx, name, network.Mode(sb.Network.Mode), rulesOf(sb)); err != nil {
			logErr("recover: take over the sandbox's network", err, "sandbox", sb.Name)
		}
		inst.network = metadata.NetworkEgress
	}
	m.run.watch(sb, inst) // before put: a close once it is shared ends the watch too
	m.cfg.Instances.put(sb.ID, inst)
	if sb.State != metadata.SandboxRunning {
		if err := m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning); err != nil {
			return err
		}
	}
	slog.Info("recover: adopted running sandbox", "sandbox", sb.Name, "id", sb.ID, "container", name)
	go m.checkAdopted(sb, inst, inDoubt)
	return nil
}

// adoptWait is how long an adopted sandbox's cairn-init has to dial back:
// it re-dials every 0.5 s at most, so a live one is back well within a
// second of the socket opening again.
const adoptWait = 2500 * time.Millisecond

// adoptPoll is how often checkAdopted looks at a silent sandbox's state.
const adoptPoll = 300 * time.Millisecond

// checkAdopted makes sure an adopted container's cairn-init dials back. A
// container whose processes a crash left killed (cairnd died in the middle
// of a restore in place, after it killed the old processes) still runs as
// far as runsc can tell, but nobody will ever answer in it: it is removed
// and the sandbox starts again from its disk, as after a host reboot.
//
// A sandbox can also be paused again after Recover resumed it: cairnd died
// while the sandbox saved a memory image, and the save, which ends as it
// began (paused), finished after the resume. While it waits, it resumes a
// sandbox it finds paused.
//
// inDoubt: a pause or resume was cut short, and the state file may say
// paused of a running sandbox or the other way round. A cairn-init that
// dials back shows it runs; one silent for adoptWait, that it is paused:
// the state file is settled so, and the sandbox resumed and given
// adoptWait again. (Resuming by the file alone could never wake the first,
// and would panic the sentry of the second.)
func (m *recovery) checkAdopted(sb metadata.Sandbox, inst *instance, inDoubt bool) {
	deadline := time.Now().Add(adoptWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), adoptPoll)
		err := inst.agent.WaitConnected(ctx)
		cancel()
		if m.cfg.Instances.get(sb.ID) != inst {
			return // something else replaced it meanwhile
		}
		if err == nil {
			if inDoubt {
				m.settle(sb, inst, container.Running)
			}
			return // it answers
		}
		if time.Now().After(deadline) {
			if !inDoubt {
				break
			}
			inDoubt = false
			slog.Warn("recover: the sandbox whose pause or resume was cut short is silent: taking it as paused", "sandbox", sb.Name)
			outcome := m.settle(sb, inst, container.Paused)
			if outcome == settleGone {
				return
			}
			if outcome == settled {
				deadline = time.Now().Add(adoptWait)
				continue
			}
			break // its state file cannot be set: start it again
		}
		if !inDoubt {
			m.resumeIfPaused(sb, inst)
		}
	}
	l, err := m.ex.exclusive(context.Background(), sb, api.StateStarting)
	if err != nil {
		return // a lifecycle operation runs on it: it decides
	}
	defer m.ex.release(l)
	if m.cfg.Instances.get(sb.ID) != inst {
		return
	}
	slog.Warn("recover: the adopted sandbox's cairn-init did not dial back; starting it again from its disk", "sandbox", sb.Name, "container", inst.container)
	ctx := context.Background()
	if err := m.run.removeContainer(ctx, sb); err != nil {
		slog.Error("recover: remove the silent container", "sandbox", sb.Name, "err", err)
		return
	}
	if err := m.run.startContainer(ctx, sb, ""); err != nil {
		slog.Error("recover: start failed; marking crashed", "sandbox", sb.Name, "err", err)
		logErr("recover: mark crashed", m.cfg.Store.SetSandboxCrashed(ctx, sb.ID, "its cairn-init did not dial back after cairnd started, and starting it again failed: "+err.Error(), m.cfg.Now()))
		return
	}
	logErr("recover: mark running", m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning))
}

// restartInBackground starts a sandbox that should run; execs wait for it.
func (m *recovery) restartInBackground(sb metadata.Sandbox) {
	l, err := m.ex.exclusive(context.Background(), sb, api.StateStarting)
	if err != nil {
		return
	}
	go func() {
		defer m.ex.release(l)
		slog.Info("recover: starting sandbox that should be running", "sandbox", sb.Name)
		ctx := context.Background()
		if err := m.run.startContainer(ctx, sb, ""); err != nil {
			slog.Error("recover: start failed; marking crashed", "sandbox", sb.Name, "err", err)
			logErr("recover: mark crashed", m.cfg.Store.SetSandboxCrashed(ctx, sb.ID, "starting it again when cairnd started failed: "+err.Error(), m.cfg.Now()))
			return
		}
		logErr("recover: mark running", m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning))
	}()
}

// Recover brings the host in line with the metadata after cairnd starts
// (see recovery.recover). Call it once, before serving requests.
func (m *Manager) Recover(ctx context.Context) error {
	return (&recovery{cfg: m.cfg, ex: m.ex, run: m.run, interrupted: map[string]afterInterrupt{}}).recover(ctx)
}

// settleOutcome is what settle did.
type settleOutcome int

const (
	settled      settleOutcome = iota
	settleGone                 // the container is no longer the sandbox's
	settleFailed               // the state file could not be set
)

// settle records, under the sandbox's lease, that its container whose
// pause or resume was in doubt is in fact status, and resumes it if that
// is paused; while the lease is held, it waits.
func (m *recovery) settle(sb metadata.Sandbox, inst *instance, status container.Status) settleOutcome {
	ctx := context.Background()
	var l *lease.Lease
	for {
		var err error
		if l, err = m.cfg.Leases.Acquire(ctx, sandboxResource(sb.ID), lease.Options{Exclusive: true, Purpose: api.StateStarting}); err == nil {
			break
		}
		// Held: an operation began meanwhile. Its pauses and resumes
		// are refused until this is settled (runsc.ErrInDoubt), so it
		// ends soon; settle after it.
		if m.cfg.Instances.get(sb.ID) != inst {
			return settleGone
		}
		time.Sleep(adoptPoll)
	}
	defer m.ex.release(l)
	if m.cfg.Instances.get(sb.ID) != inst {
		return settleGone
	}
	var err error
	for try := range 3 {
		if err = m.cfg.Runtime.Settle(ctx, inst.container, status); err == nil {
			break
		}
		time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
	}
	if err != nil {
		logErr("recover: record whether the sandbox runs", err, "sandbox", sb.Name)
		return settleFailed
	}
	slog.Info("recover: the cut-short pause or resume is settled", "sandbox", sb.Name, "status", status)
	if status == container.Paused {
		logErr("recover: resume", m.cfg.Runtime.Resume(ctx, inst.container), "sandbox", sb.Name)
	}
	return settled
}

// resumeIfPaused resumes an adopted sandbox found paused, under its lease:
// a checkpoint that holds the lease paused it on purpose, and is left alone.
func (m *recovery) resumeIfPaused(sb metadata.Sandbox, inst *instance) {
	ctx := context.Background()
	// Looked at without the lease first: taken at every poll, it would
	// show the sandbox busy (starting) and refuse lifecycle operations
	// while a live cairn-init is merely slow to dial back.
	if st, _, err := m.cfg.Runtime.State(ctx, inst.container); err != nil || st != container.Paused {
		return
	}
	l, err := m.cfg.Leases.Acquire(ctx, sandboxResource(sb.ID), lease.Options{Exclusive: true, Purpose: api.StateStarting})
	if err != nil {
		return // held: whoever holds it resumes it
	}
	defer m.ex.release(l)
	if st, _, err := m.cfg.Runtime.State(ctx, inst.container); err == nil && st == container.Paused {
		slog.Warn("recover: resuming an adopted sandbox found paused again", "sandbox", sb.Name)
		logErr("recover: resume", m.cfg.Runtime.Resume(ctx, inst.container), "sandbox", sb.Name)
	}
}
