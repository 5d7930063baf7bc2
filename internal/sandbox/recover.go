package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/sandbox/runsc"
)

// Recover brings the host in line with the metadata after cairnd starts:
// it sweeps what no committed sandbox owns (containers, root subvolumes,
// host directories left by a crash mid-create or mid-delete), re-adopts the
// containers that kept running while cairnd was away (their cairn-init dials
// the re-opened agent socket again), resumes any left paused, and starts
// again in the background the sandboxes that should run but do not (after a
// host reboot). It blocks only for the sweep and the adoption.
func (m *Manager) Recover(ctx context.Context) error {
	rows, err := m.cfg.Store.AllSandboxes(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, sb := range rows {
		known[sb.ID] = true
	}
	containers, err := m.sweep(ctx, known)
	if err != nil {
		return err
	}
	for _, sb := range rows {
		name := m.settleContainers(ctx, sb, containers[sb.ID])
		if err := m.recoverOne(ctx, sb, name); err != nil {
			// One sandbox that cannot be taken over must not keep
			// cairnd (and every other sandbox) down: its container goes,
			// and it starts again from its disk if it should run.
			slog.Error("recover: cannot take over the sandbox's container; starting it again from its disk", "sandbox", sb.Name, "err", err)
			logErr("recover: delete container", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
			if sb.State == metadata.SandboxRunning {
				m.restartInBackground(sb)
			}
		}
	}
	return nil
}

// settleContainers returns the container of sandbox sb to take over, of
// those named after it (see container.go): the newest that runs or is
// paused, the others deleted (a crash in the middle of a restore in place
// leaves the killed one). With none, the sandbox id.
func (m *Manager) settleContainers(ctx context.Context, sb metadata.Sandbox, names []string) string {
	if len(names) <= 1 {
		if len(names) == 1 {
			return names[0]
		}
		return sb.ID
	}
	keep, keepGen := "", int64(-1)
	for _, name := range names {
		st, _, err := m.cfg.Runtime.State(ctx, name)
		if _, gen := sandboxOfContainer(name); err == nil && (st == "running" || st == "paused") && gen > keepGen {
			keep, keepGen = name, gen
		}
	}
	for _, name := range names {
		if name != keep {
			slog.Info("recover: deleting a replaced container", "sandbox", sb.Name, "container", name)
			logErr("recover: delete replaced container", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
		}
	}
	if keep == "" {
		return sb.ID
	}
	return keep
}

// recoverOne takes over sandbox sb's container, name, as it finds it:
// resumes it if a crash left it paused, adopts it if it runs, restarts it
// if it should run and does not.
func (m *Manager) recoverOne(ctx context.Context, sb metadata.Sandbox, name string) error {
	st, pid, err := m.cfg.Runtime.State(ctx, name)
	if err != nil && !errors.Is(err, runsc.ErrNotExist) {
		return err
	}
	if st == "paused" {
		slog.Warn("recover: resuming sandbox left paused", "sandbox", sb.Name)
		if err := m.cfg.Runtime.Resume(ctx, name); err != nil {
			return err
		}
		st = "running"
	}
	switch {
	case st == "running":
		return m.adopt(ctx, sb, name, pid)
	case sb.State == metadata.SandboxRunning:
		m.restartInBackground(sb)
	default:
		logErr("recover: delete stopped container", m.cfg.Runtime.Delete(ctx, name), "sandbox", sb.Name)
	}
	return nil
}

// adopt takes over a running container: the agent socket is opened again
// (cairn-init re-dials it within a second) and the row says running.
func (m *Manager) adopt(ctx context.Context, sb metadata.Sandbox, name string, pid int) error {
	inst, err := m.openSockets(sb)
	if err != nil {
		return err
	}
	inst.pid, inst.container = pid, name
	m.mu.Lock()
	m.live[sb.ID] = inst
	m.notifyLocked()
	m.mu.Unlock()
	if sb.State != metadata.SandboxRunning {
		if err := m.cfg.Store.SetSandboxState(ctx, sb.ID, metadata.SandboxRunning); err != nil {
			return err
		}
	}
	slog.Info("recover: adopted running sandbox", "sandbox", sb.Name, "id", sb.ID, "container", name)
	return nil
}

// restartInBackground starts a sandbox that should run; execs wait for it.
func (m *Manager) restartInBackground(sb metadata.Sandbox) {
	l, err := m.exclusive(context.Background(), sb, api.StateStarting)
	if err != nil {
		return
	}
	go func() {
		defer m.release(l)
		slog.Info("recover: starting sandbox that should be running", "sandbox", sb.Name)
		if err := m.startContainer(context.Background(), sb, ""); err != nil {
			slog.Error("recover: start failed; marking stopped", "sandbox", sb.Name, "err", err)
			logErr("recover: mark stopped", m.cfg.Store.SetSandboxState(context.Background(), sb.ID, metadata.SandboxStopped))
		}
	}()
}

// sweep removes containers, root subvolumes and host directories of
// sandboxes, and checkpoint snapshots, that have no committed row (and a
// half-done restore's staging subvolume). It returns the names of the
// remaining containers by sandbox id.
func (m *Manager) sweep(ctx context.Context, known map[string]bool) (map[string][]string, error) {
	names, err := m.cfg.Runtime.List(ctx)
	if err != nil {
		return nil, err
	}
	containers := map[string][]string{}
	for _, name := range names {
		if id, _ := sandboxOfContainer(name); known[id] {
			containers[id] = append(containers[id], name)
			continue
		}
		slog.Info("recover: deleting orphan container", "id", name)
		if err := m.cfg.Runtime.Delete(ctx, name); err != nil {
			return nil, err
		}
	}
	// Checkpoint disks and memory images are the disks component's to
	// sweep (disks.Sweep, before Recover); here the sandboxes' own.
	for _, dir := range []string{filepath.Dir(m.cfg.Pool.SandboxPath("x")), filepath.Join(m.cfg.DataDir, "sandboxes")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if known[e.Name()] {
				continue
			}
			slog.Info("recover: removing orphan sandbox files", "path", filepath.Join(dir, e.Name()))
			if err := m.cfg.Pool.Delete(ctx, filepath.Join(dir, e.Name())); err != nil {
				return nil, err
			}
			logErr("recover: remove an orphan browse view", m.cfg.Disks.Unpublish(e.Name()))
		}
	}
	return containers, nil
}
