package sandbox

import (
	"log/slog"
	"sync/atomic"

	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// recordReads records, for a sandbox about to boot (not one resumed
// from memory, whose files are in its memory already), in which order it
// reads its files in the first minute (Config.ReadsWindow), and keeps that
// in its directory (accessorder.FileName). It starts before the container
// does, so that what cairn-init and the services it starts read first is
// in it. The off-site upload of its checkpoints carries the order, sealed
// in their manifests, and a lazy restore of one fetches those files first.
// The order of the last boot replaces the one before. discard drops the
// recording of a boot that failed.
func (m *Manager) recordReads(sb metadata.Sandbox) (discard func()) {
	if m.cfg.Reads == nil {
		return func() {}
	}
	rec, err := m.cfg.Reads.Record(m.cfg.Pool.SandboxPath(sb.ID), m.cfg.ReadsWindow, 0)
	if err != nil {
		slog.Warn("record the order of a boot's reads", "sandbox", sb.Name, "err", err)
		return func() {}
	}
	var dropped atomic.Bool
	go func() {
		<-rec.Ended()
		if dropped.Load() {
			return
		}
		order, err := rec.Stop()
		if err == nil {
			err = accessorder.Save(m.ReadOrderPath(sb.ID), order)
		}
		if err != nil {
			// Deleted meanwhile, or its root went with a restore: the
			// next boot records again.
			slog.Debug("keep the order of a boot's reads", "sandbox", sb.Name, "err", err)
			return
		}
		slog.Debug("recorded the order of a boot's reads", "sandbox", sb.Name, "files", len(order.Files), "partial", order.Partial)
	}()
	return func() {
		dropped.Store(true)
		rec.Cancel()
	}
}

// ReadOrderPath is where the order of sandbox id's last boot's reads is
// kept.
func (m *Manager) ReadOrderPath(id string) string {
	return accessorder.PathFor(m.cfg.DataDir, id)
}
