package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/network"
)

// view turns a stored sandbox into its API form, with its live state.
func (c *Catalog) view(ctx context.Context, acct metadata.Account, sb metadata.Sandbox) api.Sandbox {
	out := api.Sandbox{
		ID: sb.ID, Name: sb.Name, Account: acct.Name, Image: sb.Image, State: string(sb.State),
		CPUs: sb.CPUs, MemoryBytes: sb.MemoryBytes, DiskBytes: sb.DiskBytes, CreatedAt: sb.CreatedAt,
	}
	if sb.ParentID != "" {
		if p, err := c.cfg.Store.SandboxByID(ctx, sb.ParentID); err == nil {
			out.Parent = p.Name
		} else {
			out.Parent = sb.ParentID
		}
	}
	out.Env, out.User, out.Workdir, out.Labels = sb.Settings.Env, sb.Settings.User, sb.Settings.Workdir, sb.Settings.Labels
	out.IdleSeconds = int64(sb.Settings.Idle / time.Second)
	if sb.Settings.Asleep && sb.State == metadata.SandboxStopped {
		out.State = api.StateSleeping
	}
	if set := sb.Settings; set.Timeout > 0 {
		out.TimeoutSeconds, out.OnTimeout = int64(set.Timeout/time.Second), set.OnTimeout
		if out.OnTimeout == "" {
			out.OnTimeout = metadata.OnTimeoutStop
		}
		if !set.Deadline.IsZero() && sb.State == metadata.SandboxRunning {
			out.EndsAt = &set.Deadline
		}
	}
	out.AutoCheckpointSeconds = int64(sb.AutoCheckpoint / time.Second)
	out.Inside = api.InsideSettings{Memory: sb.Inside.Memory, Names: sb.Inside.Names,
		CheckpointsPerMinute: sb.Inside.PerMinute, CheckpointsKept: sb.Inside.Keep}
	out.Restart = string(sb.Restart)
	mode := sb.Network.Mode
	if mode == "" {
		mode = metadata.NetworkNone
	}
	out.Network = &api.Network{Mode: mode, Allow: sb.Network.Allow, Deny: sb.Network.Deny}
	if sb.LastCrash.What != "" {
		out.LastCrash = &api.SandboxEvent{What: sb.LastCrash.What, At: sb.LastCrash.At}
	}
	if sb.LastOOMKill.What != "" {
		out.LastOOMKill = &api.SandboxEvent{What: sb.LastOOMKill.What, At: sb.LastOOMKill.At}
	}
	if c.cfg.Fill != nil {
		out.Fill = c.cfg.Fill(sb.ID)
	}
	if last, err := c.cfg.Store.LatestCheckpoint(ctx, sb.ID); err == nil {
		out.LastCheckpointAt = &last.CreatedAt
	}
	out.LastOffsiteAt, out.OffsiteOff = c.lastOffsite(ctx, sb)
	out.CurrentCheckpoint = c.checkpointRef(ctx, sb, sb.CurrentCheckpoint)
	out.SavedSession = c.checkpointRef(ctx, sb, sb.ResumeCheckpoint)
	out.SourceCheckpoint = c.checkpointRef(ctx, metadata.Sandbox{}, sb.SourceCheckpoint)
	if st, ok := c.busyState(ctx, sb.ID); ok {
		out.State = st
	}
	if c.cfg.Hosts != nil {
		var down bool
		if out.Host, down = c.cfg.Hosts.Where(sb.HostID); down {
			out.State = api.StateHostDown
		}
	}
	live := c.cfg.Live.Live(sb.ID)
	out.AutoCheckpointNote = live.AutoCheckpointNote
	if live.Running {
		out.AgentConnected = live.AgentConnected
		out.Pid = live.Pid
		out.Container = live.Container
		out.Network.Active = live.Network
		if live.Network == metadata.NetworkEgress {
			out.Network.Address, out.Network.Gateway = network.GuestAddr.String(), network.GatewayAddr.String()
		}
	}
	return out
}

// checkpointRef names checkpoint id for a user: its per-sandbox id when it
// is one of sb's, else SANDBOX/ID; the raw id if it is gone.
func (c *Catalog) checkpointRef(ctx context.Context, sb metadata.Sandbox, id string) string {
	if id == "" {
		return ""
	}
	ck, err := c.cfg.Store.CheckpointByID(ctx, id)
	if err != nil {
		return id
	}
	if ck.SandboxID == sb.ID {
		return ck.Seq
	}
	return ck.SandboxName + "/" + ck.Seq
}

// Info returns the sandbox called name with its disk usage.
func (c *Catalog) Info(ctx context.Context, account, name string) (api.Sandbox, error) {
	acct, sb, err := c.lookup(ctx, account, name)
	if err != nil {
		return api.Sandbox{}, err
	}
	out := c.view(ctx, acct, sb)
	if out.Disk, err = c.diskUsage(ctx, sb); err != nil {
		return out, err
	}
	return out, nil
}

// Get returns the sandbox called name.
func (c *Catalog) Get(ctx context.Context, account, name string) (api.Sandbox, error) {
	acct, sb, err := c.lookup(ctx, account, name)
	if err != nil {
		return api.Sandbox{}, err
	}
	return c.view(ctx, acct, sb), nil
}

// List returns the account's sandboxes by name; parent, if set, keeps only
// those forked from the sandbox of that name.
func (c *Catalog) List(ctx context.Context, account, parent string) ([]api.Sandbox, error) {
	acct, err := c.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return nil, err
	}
	var f metadata.SandboxFilter
	if parent != "" {
		_, p, err := c.lookup(ctx, account, parent)
		if err != nil {
			return nil, err
		}
		f.ParentID = p.ID
	}
	rows, err := c.cfg.Store.ListSandboxes(ctx, acct.ID, f)
	if err != nil {
		return nil, err
	}
	out := make([]api.Sandbox, 0, len(rows))
	for _, sb := range rows {
		out = append(out, c.view(ctx, acct, sb))
	}
	return out, nil
}

// Whoami returns the account and current name of sandbox id, for the
// management socket, which knows its sandbox by id only.
func (c *Catalog) Whoami(ctx context.Context, id string) (account, name string, err error) {
	sb, err := c.cfg.Store.SandboxByID(ctx, id)
	if errors.Is(err, metadata.ErrNotFound) {
		return "", "", errdefs.New(api.CodeNoSandbox, "this sandbox no longer exists")
	} else if err != nil {
		return "", "", err
	}
	a, err := metadata.AccountByID(ctx, c.cfg.Store, sb.AccountID)
	if err != nil {
		return "", "", fmt.Errorf("sandbox %s: %w", sb.Name, err)
	}
	return a.Name, sb.Name, nil
}

// lastOffsite returns when the newest of sb's checkpoints that both
// locations hold was taken (nil: none yet), and whether off-site copies
// are off.
func (c *Catalog) lastOffsite(ctx context.Context, sb metadata.Sandbox) (*time.Time, bool) {
	svc := c.offsiteOf(sb.AccountID)
	if svc == nil {
		return nil, true
	}
	cks, err := c.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if err != nil {
		return nil, false
	}
	for i := len(cks) - 1; i >= 0; i-- {
		if svc.Complete(cks[i]) {
			return &cks[i].CreatedAt, false
		}
	}
	return nil, false
}
