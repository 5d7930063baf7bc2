package sandbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// What processes inside a sandbox may create through its management socket
// is the sandbox's InsidePolicy, set by the operator. The bounds of its
// counts:
const (
	// MaxInsidePerMinute bounds checkpoints per minute from inside.
	MaxInsidePerMinute = 60
	// MaxInsideKeep bounds how many checkpoints made from inside are kept.
	MaxInsideKeep = 1000
)

// applyInsideChange returns p changed by ch (nil: p as it is). V02 for a
// count out of range.
func applyInsideChange(p metadata.InsidePolicy, ch *api.InsideChange) (metadata.InsidePolicy, error) {
	if ch == nil {
		return p, nil
	}
	if ch.Memory != nil {
		p.Memory = *ch.Memory
	}
	if ch.Names != nil {
		p.Names = *ch.Names
	}
	if n := ch.CheckpointsPerMinute; n != nil {
		if *n < 0 || *n > MaxInsidePerMinute {
			return p, errdefs.New(api.CodeInvalidArgument, "invalid --inside-rate %d: checkpoints from inside per minute, 0 (none) to %d", *n, MaxInsidePerMinute)
		}
		p.PerMinute = *n
	}
	if n := ch.CheckpointsKept; n != nil {
		if *n < 0 || *n > MaxInsideKeep {
			return p, errdefs.New(api.CodeInvalidArgument, "invalid --inside-keep %d: checkpoints made from inside to keep, 0 (all) to %d", *n, MaxInsideKeep)
		}
		p.Keep = *n
	}
	return p, nil
}

// checkInsideRequest refuses what the policy does not allow a process
// inside to ask for: V02 for a memory checkpoint or a name, L06 when no
// checkpoint at all may be made from inside.
func checkInsideRequest(name string, p metadata.InsidePolicy, req api.CreateCheckpointRequest) error {
	switch {
	case p.PerMinute == 0:
		return errdefs.New(api.CodeInsideQuota, "checkpoints from inside sandbox %s are not allowed (the operator allows them with `cairn config %s --inside-rate N`)", name, name)
	case req.Memory && !p.Memory:
		return errdefs.New(api.CodeInvalidArgument, "memory checkpoints from inside sandbox %s are not allowed (the operator allows them with `cairn config %s --inside-memory`)", name, name)
	case req.Name != "" && !p.Names:
		return errdefs.New(api.CodeInvalidArgument, "named snapshots from inside sandbox %s are not allowed (the operator allows them with `cairn config %s --inside-names`)", name, name)
	}
	return nil
}

// insideRate counts the checkpoints asked for from inside each sandbox in
// the last minute. It lives in cairnd's memory: a restart forgets it.
type insideRate struct {
	mu     sync.Mutex
	recent map[string][]time.Time // sandbox id → times of its last minute's checkpoints, oldest first
}

// take counts one checkpoint of sandbox id at now and reports true, unless
// perMinute were already counted in the minute up to now.
func (r *insideRate) take(id string, perMinute int, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recent == nil {
		r.recent = map[string][]time.Time{}
	}
	if len(r.recent) > 1024 { // forget sandboxes idle for a minute
		for k, ts := range r.recent {
			if len(ts) == 0 || now.Sub(ts[len(ts)-1]) >= time.Minute {
				delete(r.recent, k)
			}
		}
	}
	ts := r.recent[id]
	for len(ts) > 0 && now.Sub(ts[0]) >= time.Minute {
		ts = ts[1:]
	}
	if len(ts) >= perMinute {
		r.recent[id] = ts
		return false
	}
	r.recent[id] = append(ts, now)
	return true
}

// CreateCheckpointFromInside is CreateCheckpoint asked for by a process
// inside the sandbox: what the sandbox's InsidePolicy allows (V02 for a
// memory checkpoint or a name it does not allow, L06 past its rate), the
// checkpoint marked as made from inside, and once it is taken the oldest
// unnamed ones made from inside deleted beyond the policy's Keep. Every
// request the policy lets through counts toward the rate, whether the
// checkpoint succeeds or not.
func (m *Manager) CreateCheckpointFromInside(ctx context.Context, account, name string, req api.CreateCheckpointRequest) (*operation.Op, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if err := checkInsideRequest(name, sb.Inside, req); err != nil {
		return nil, err
	}
	if !m.insideRate.take(sb.ID, sb.Inside.PerMinute, m.cfg.Now()) {
		return nil, errdefs.New(api.CodeInsideQuota, "sandbox %s may make %d checkpoints a minute from inside; try again later", name, sb.Inside.PerMinute)
	}
	return m.createCheckpoint(ctx, account, name, req, true)
}

// pruneInside deletes the oldest unnamed checkpoints made from inside
// sandbox id beyond its policy's Keep, as retention deletes automatic ones:
// never a named one, one the operator kept (cairn checkpoint keep: it is
// no longer marked as made from inside), nor the sandbox's current
// checkpoint or saved session. The caller holds no lease of it.
func (m *Manager) pruneInside(ctx context.Context, id string, op *operation.Op) {
	sb, err := m.cfg.Store.SandboxByID(ctx, id)
	if err != nil || sb.Inside.Keep == 0 {
		return
	}
	all, err := m.cfg.Store.ListCheckpoints(ctx, sb.AccountID, metadata.CheckpointFilter{SandboxID: sb.ID, IncludeAuto: true})
	if err != nil {
		slog.Warn("list checkpoints made from inside", "sandbox", sb.Name, "err", err)
		return
	}
	var mine []metadata.Checkpoint // oldest first
	for _, ck := range all {
		if ck.FromInside && ck.Name == "" && ck.ID != sb.CurrentCheckpoint && ck.ID != sb.ResumeCheckpoint {
			mine = append(mine, ck)
		}
	}
	for ; len(mine) > sb.Inside.Keep; mine = mine[1:] {
		ck := mine[0]
		deleted, err := m.cfg.Catalog.PruneFromInside(ctx, ck)
		if err != nil {
			slog.Warn("delete a checkpoint made from inside", "sandbox", sb.Name, "id", ck.Seq, "err", err)
			return
		}
		if !deleted { // kept, named or deleted meanwhile
			continue
		}
		slog.Info("deleted the oldest checkpoint made from inside", "sandbox", sb.Name, "id", ck.Seq, "keep", sb.Inside.Keep)
		op.Notef(api.PhaseCheckpoint, "Deleted %s: this sandbox keeps the newest %d checkpoints made from inside", ck.Seq, sb.Inside.Keep)
	}
}
