package sandbox

import (
	"context"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// CreateSnapshot takes a named checkpoint (a snapshot) of the sandbox
// called name; without a name it is called <sandbox>-YYYYMMDD-HHMMSS (UTC).
func (m *Manager) CreateSnapshot(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
	if req.Name == "" {
		req.Name = name + "-" + m.cfg.Now().UTC().Format("20060102-150405")
	}
	return m.CreateCheckpoint(ctx, account, name, req)
}

// Configure changes settings of the sandbox called name.
func (m *Manager) Configure(ctx context.Context, account, name string, req api.ConfigureSandboxRequest) (api.Sandbox, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return api.Sandbox{}, err
	}
	if req.AutoCheckpoint == "" && req.Restart == "" {
		return api.Sandbox{}, errdefs.New(api.CodeInvalidArgument, "nothing to change: give --auto-checkpoint or --restart")
	}
	if req.AutoCheckpoint != "" {
		every, err := parseInterval(req.AutoCheckpoint)
		if err != nil {
			return api.Sandbox{}, err
		}
		if err := m.cfg.Store.SetAutoCheckpoint(ctx, sb.ID, every); err != nil {
			return api.Sandbox{}, err
		}
	}
	if req.Restart != "" {
		p, err := parseRestart(req.Restart)
		if err != nil {
			return api.Sandbox{}, err
		}
		if err := m.cfg.Store.SetRestartPolicy(ctx, sb.ID, p); err != nil {
			return api.Sandbox{}, err
		}
	}
	return m.cfg.Catalog.Get(ctx, account, name)
}
