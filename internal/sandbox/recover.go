package sandbox

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/container"
	"github.com/cairn-sandbox/cairn/internal/metadata"
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
	containers, err := m.run.sweep(ctx, known)
	if err != nil {
		return err
	}
	for _, sb := range rows {
		name := m.run.settleContainers(ctx, sb, containers[sb.ID])
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

// recoverOne takes over sandbox sb's container, name, as it finds it:
// resumes it if a crash left it paused, adopts it if it runs, restarts it
// if it should run and does not.
func (m *Manager) recoverOne(ctx context.Context, sb metadata.Sandbox, name string) error {
	st, pid, err := m.cfg.Runtime.State(ctx, name)
	if err != nil && !errors.Is(err, container.ErrNotExist) {
		return err
	}
	if st == container.Paused {
		slog.Warn("recover: resuming sandbox left paused", "sandbox", sb.Name)
		if err := m.cfg.Runtime.Resume(ctx, name); err != nil {
			return err
		}
		st = container.Running
	}
	switch {
	case st == container.Running:
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
	inst, err := m.run.openSockets(sb)
	if err != nil {
		return err
	}
	inst.pid, inst.container = pid, name
	m.cfg.Instances.put(sb.ID, inst)
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
	l, err := m.ex.exclusive(context.Background(), sb, api.StateStarting)
	if err != nil {
		return
	}
	go func() {
		defer m.ex.release(l)
		slog.Info("recover: starting sandbox that should be running", "sandbox", sb.Name)
		if err := m.run.startContainer(context.Background(), sb, ""); err != nil {
			slog.Error("recover: start failed; marking stopped", "sandbox", sb.Name, "err", err)
			logErr("recover: mark stopped", m.cfg.Store.SetSandboxState(context.Background(), sb.ID, metadata.SandboxStopped))
		}
	}()
}
