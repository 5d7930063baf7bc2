package catalog

import (
	"context"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// SandboxStates counts every account's sandboxes by the state the API
// shows them in: the stored one (running, stopped, crashed; each present,
// 0 if none), or the state of the work in progress on it (creating,
// restoring…). It is what cairnd's metrics read at each scrape.
func (c *Catalog) SandboxStates(ctx context.Context) (map[string]int, error) {
	out := map[string]int{
		string(metadata.SandboxRunning): 0, string(metadata.SandboxStopped): 0, string(metadata.SandboxCrashed): 0,
	}
	accts, err := c.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range accts {
		rows, err := c.cfg.Store.ListSandboxes(ctx, a.ID, metadata.SandboxFilter{})
		if err != nil {
			return nil, err
		}
		for _, sb := range rows {
			state := string(sb.State)
			if busy, ok := c.busyState(ctx, sb.ID); ok {
				state = busy
			}
			out[state]++
		}
	}
	return out, nil
}
