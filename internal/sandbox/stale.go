package sandbox

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// A host that was cut off from the others (its heartbeat stale: down to
// them) may have been evacuated while its sandboxes ran on: another host
// took them over (takeover.go). When it comes back without a restart, its
// copies of them are stale: RunStaleCopies stops them and removes what
// its pool and data dir hold of them, so that a sandbox never runs on two
// hosts at once for longer than staleEvery. (A restart finds them the
// same way: recovery sweeps what no row of this host names.) The rows
// are the other host's and are not touched; the checkpoints this host
// still holds of them stay, and are uploaded as before.

// staleEvery is how often a host looks at the rows of the sandboxes it
// runs.
const staleEvery = 5 * time.Second

// RunStaleCopies stops, until ctx ends, the copies this host runs of
// sandboxes another host took over.
func (m *Manager) RunStaleCopies(ctx context.Context) {
	if m.cfg.Mine == nil {
		return
	}
	t := time.NewTicker(staleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.stopStaleCopies(ctx)
		}
	}
}

// stopStaleCopies stops each sandbox running here whose row names another
// host. A row that cannot be read is left for the next round.
func (m *Manager) stopStaleCopies(ctx context.Context) {
	for _, id := range m.cfg.Instances.ids() {
		sb, err := m.cfg.Store.SandboxByID(ctx, id)
		if err != nil || m.cfg.Mine(sb.HostID) {
			continue
		}
		m.stopStaleCopy(ctx, sb)
	}
}

func (m *Manager) stopStaleCopy(ctx context.Context, sb metadata.Sandbox) {
	slog.Warn("another host took this sandbox over while this host was cut off: stopping the stale copy here",
		"sandbox", sb.Name, "id", sb.ID, "host", m.hostName(sb.HostID))
	if err := m.run.removeContainer(ctx, sb); err != nil {
		slog.Error("stop a stale copy", "sandbox", sb.Name, "err", err)
		return
	}
	logErr("stale copy: drop its lazy root", m.run.dropLazy(sb.ID), "sandbox", sb.Name)
	logErr("stale copy: delete its root", m.cfg.Pool.Delete(ctx, m.cfg.Pool.SandboxPath(sb.ID)), "sandbox", sb.Name)
	logErr("stale copy: remove its files", os.RemoveAll(m.run.sandboxDir(sb.ID)), "sandbox", sb.Name)
	logErr("stale copy: remove its browse view", m.cfg.Disks.Unpublish(sb.ID), "sandbox", sb.Name)
}
