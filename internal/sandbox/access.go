package sandbox

import (
	"log/slog"

	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// recordReads records, for a sandbox that just booted (not one resumed
// from memory, whose files are in its memory already), in which order it
// reads its files in the first minute (Config.ReadsWindow), and keeps that in its directory
// (accessorder.FileName). The off-site upload of its checkpoints carries
// the order, sealed in their manifests, and a lazy restore of one fetches
// those files first. The order of the last boot replaces the one before.
func (m *Manager) recordReads(sb metadata.Sandbox) {
	if m.cfg.Reads == nil {
		return
	}
	rec, err := m.cfg.Reads.Record(m.cfg.Pool.SandboxPath(sb.ID), m.cfg.ReadsWindow, 0)
	if err != nil {
		slog.Warn("record the order of a boot's reads", "sandbox", sb.Name, "err", err)
		return
	}
	go func() {
		<-rec.Ended()
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
}

// ReadOrderPath is where the order of sandbox id's last boot's reads is
// kept.
func (m *Manager) ReadOrderPath(id string) string {
	return accessorder.PathFor(m.cfg.DataDir, id)
}
