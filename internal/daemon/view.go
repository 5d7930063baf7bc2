package daemon

import (
	"context"
	"os"
	"path/filepath"

	"github.com/cairn-sandbox/cairn/internal/browse"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// browseView is the browse view (/.cairn/checkpoints of each sandbox)
// served by the browse server (package browse), a process of its own that
// outlives cairnd: its tables are written here, its mount is bound into
// each sandbox.
type browseView struct{ tables string }

var _ disks.View = browseView{}

func (v browseView) Publish(sandboxID string, entries []disks.ViewEntry) error {
	out := make([]browse.Entry, len(entries))
	for i, e := range entries {
		out[i] = browse.Entry{Name: e.Name, Path: e.Path}
	}
	return browse.Publish(v.tables, sandboxID, out)
}

func (v browseView) Unpublish(sandboxID string) error { return browse.Unpublish(v.tables, sandboxID) }

// openView makes sure the browse server runs (starting it from this
// binary when it does not) and returns the view and, for each sandbox id,
// the directory bound at its /.cairn/checkpoints.
func openView(ctx context.Context, dataDir string, pool *volume.Pool) (disks.View, func(id string) string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cfg := browse.Config{
		Binary:     self,
		Mountpoint: filepath.Join(dataDir, "browse"),
		Tables:     filepath.Join(dataDir, "browse-tables"),
		Pool:       pool.Root(),
		Log:        filepath.Join(dataDir, "browse.log"),
	}
	if err := browse.Ensure(ctx, cfg); err != nil {
		return nil, nil, err
	}
	return browseView{tables: cfg.Tables}, func(id string) string { return filepath.Join(cfg.Mountpoint, id) }, nil
}
