package sandbox

import (
	"context"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
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

// Configure changes settings of the sandbox called name: its automatic
// checkpoint interval, what processes inside may create, or both.
func (m *Manager) Configure(ctx context.Context, account, name string, req api.ConfigureSandboxRequest) (api.Sandbox, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return api.Sandbox{}, err
	}
	if req.AutoCheckpoint == "" && req.Inside == nil && req.Restart == "" && req.Network == nil && !settingsChange(req) {
		return api.Sandbox{}, errdefs.New(api.CodeInvalidArgument, "nothing to change: give --auto-checkpoint, --restart, an --inside-… setting, a network setting, --env, --user, --workdir or a label")
	}
	// Everything is checked before anything is changed.
	var every time.Duration
	if req.AutoCheckpoint != "" {
		if every, err = parseInterval(req.AutoCheckpoint); err != nil {
			return api.Sandbox{}, err
		}
	}
	inside, err := applyInsideChange(sb.Inside, req.Inside)
	if err != nil {
		return api.Sandbox{}, err
	}
	net, err := applyNetworkChange(sb.Network, req.Network)
	if err != nil {
		return api.Sandbox{}, err
	}
	_, err = applySettingsChange(sb.Settings, req, m.cfg.Now()) // checked before anything changes; applied below to the row as it is then
	if err != nil {
		return api.Sandbox{}, err
	}
	var restart metadata.RestartPolicy
	if req.Restart != "" {
		if restart, err = parseRestart(req.Restart); err != nil {
			return api.Sandbox{}, err
		}
	}
	if req.AutoCheckpoint != "" {
		if err := m.cfg.Store.SetAutoCheckpoint(ctx, sb.ID, every); err != nil {
			return api.Sandbox{}, err
		}
	}
	if req.Restart != "" {
		if err := m.cfg.Store.SetRestartPolicy(ctx, sb.ID, restart); err != nil {
			return api.Sandbox{}, err
		}
	}
	if req.Inside != nil {
		if err := m.cfg.Store.SetInsidePolicy(ctx, sb.ID, inside); err != nil {
			return api.Sandbox{}, err
		}
	}
	if settingsChange(req) {
		now := m.cfg.Now()
		if _, err := m.changeSettings(ctx, sb.ID, func(cur metadata.SandboxSettings) (metadata.SandboxSettings, error) {
			return applySettingsChange(cur, req, now)
		}); err != nil {
			return api.Sandbox{}, err
		}
		m.wakeLifetimes()
	}
	if req.Network != nil {
		if err := m.cfg.Store.SetSandboxNetwork(ctx, sb.ID, net); err != nil {
			return api.Sandbox{}, err
		}
		sb.Network = net
		if err := m.updateNetwork(sb); err != nil {
			return api.Sandbox{}, err
		}
	}
	return m.cfg.Catalog.Get(ctx, account, name)
}
