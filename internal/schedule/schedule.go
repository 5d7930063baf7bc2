// Package schedule runs cairn's clock-driven work: every TickEvery it takes
// the interval checkpoints that are due (the interval passed and the disk
// changed since the newest checkpoint) and applies the retention policy
// (package checkpoint's Retain, a pure function) to automatic checkpoints,
// deleting those of sandboxes deleted more than 14 days ago, and has the
// local tier drop the local copies off-site holds that its policy lets go. It decides;
// the sandbox manager takes the checkpoints and the catalog deletes them.
// Everything it decides is derived from the stored checkpoints and the
// clock, so a restarted cairnd neither misses nor doubles a checkpoint.
package schedule

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/checkpoint"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// TickEvery is how often the scheduler looks at every sandbox.
const TickEvery = 10 * time.Second

// Checkpointer takes a sandbox's interval checkpoint once it is due
// (sandbox.Manager): it skips a sandbox that another operation holds.
type Checkpointer interface {
	IntervalCheckpoint(ctx context.Context, sb metadata.Sandbox) error
}

// Expirer deletes a checkpoint retention gave up (catalog.Catalog).
type Expirer interface {
	Expire(ctx context.Context, ck metadata.Checkpoint) error
}

// Collector frees the disks of deleted checkpoints once no live lease
// holds them (disks.Disks): a holder elsewhere that died without releasing
// its lease lets go when the lease expires.
type Collector interface {
	Collect(ctx context.Context) error
}

// PoolWatch says when the pool starts and stops running low
// (disks.PoolWatch).
type PoolWatch interface {
	Check(ctx context.Context)
}

// LocalTier drops the local copies of checkpoints off-site holds, by the
// accounts' policies and when the pool runs low (localtier.Tier).
type LocalTier interface {
	Apply(ctx context.Context) error
}

// Config is what a Scheduler needs.
type Config struct {
	// Mine says whether a row naming a host (a sandbox, a checkpoint) is
	// this host's (nil: every row is): interval checkpoints and retention
	// run on the host whose pool holds the disks. Leader and Down (nil:
	// this host leads, none is down) let the leader thin the checkpoints
	// of deleted sandboxes whose host is down.
	Mine        func(hostID string) bool
	Leader      func() bool
	Down        func(hostID string) bool
	LocalTier   LocalTier // nil: every local copy is kept
	PoolWatch   PoolWatch // nil: nobody watches
	Disks       Collector // nil: nothing to collect
	Store       metadata.Store
	Pool        *volume.Pool // the roots' and images' change markers
	Checkpoints Checkpointer
	Expirer     Expirer
	Now         func() time.Time
}

// Scheduler is the clock-driven work of one cairnd.
type Scheduler struct{ cfg Config }

// New returns a scheduler.
func New(cfg Config) *Scheduler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{cfg: cfg}
}

// Run takes interval checkpoints and applies retention every
// TickEvery until ctx ends. Everything it decides is derived from the
// stored checkpoints and the clock, so a restarted cairnd neither misses
// nor doubles a checkpoint.
func (m *Scheduler) Run(ctx context.Context) {
	t := time.NewTicker(TickEvery)
	defer t.Stop()
	for {
		if err := m.Tick(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("scheduler", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick runs one pass at the scheduler's clock's now.
func (m *Scheduler) Tick(ctx context.Context) error {
	now := m.cfg.Now()
	sandboxes, err := m.cfg.Store.AllSandboxes(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, sb := range sandboxes {
		live[sb.ID] = true
		if !m.mine(sb.HostID) {
			continue // another host's to check
		}
		if err := m.intervalCheckpoint(ctx, sb, now); err != nil {
			slog.Warn("interval checkpoint", "sandbox", sb.Name, "err", err)
		}
	}
	if err := m.applyRetention(ctx, sandboxes, live, now); err != nil {
		return err
	}
	if m.cfg.LocalTier != nil {
		if err := m.cfg.LocalTier.Apply(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("local tier", "err", err)
		}
	}
	if m.cfg.PoolWatch != nil {
		m.cfg.PoolWatch.Check(ctx)
	}
	if m.cfg.Disks != nil {
		return m.cfg.Disks.Collect(ctx)
	}
	return nil
}

// IntervalDue reports whether an interval checkpoint is due: the interval
// has passed since the newest checkpoint (or since the sandbox was made, if
// it has none) and the disk changed since that checkpoint.
func IntervalDue(last time.Time, every time.Duration, now time.Time, changed bool) bool {
	return changed && !now.Before(last.Add(every))
}

// intervalCheckpoint takes sb's interval checkpoint if it is due.
func (m *Scheduler) intervalCheckpoint(ctx context.Context, sb metadata.Sandbox, now time.Time) error {
	last := sb.CreatedAt
	latest, err := m.cfg.Store.LatestCheckpoint(ctx, sb.ID)
	if err == nil {
		last = latest.CreatedAt
	} else if !errors.Is(err, metadata.ErrNotFound) {
		return err
	}
	if now.Before(last.Add(sb.AutoCheckpoint)) {
		return nil // cheap exit before touching the disk
	}
	base, err := m.baselineMarker(ctx, sb, latest)
	if err != nil {
		return err
	}
	cur, err := volume.ChangeMarker(m.cfg.Pool.SandboxPath(sb.ID))
	if err != nil {
		return err
	}
	if !IntervalDue(last, sb.AutoCheckpoint, now, cur != base) {
		return nil
	}
	return m.cfg.Checkpoints.IntervalCheckpoint(ctx, sb)
}

// baselineMarker is the change marker of the state sb's disk is compared
// with: its newest checkpoint, else the checkpoint it was made from, else
// its image. A sandbox nobody wrote to has the same marker as its source
// (cairn itself writes nothing into a new root).
func (m *Scheduler) baselineMarker(ctx context.Context, sb metadata.Sandbox, latest metadata.Checkpoint) (uint64, error) {
	if latest.ID != "" {
		return latest.RootGeneration, nil
	}
	if sb.SourceCheckpoint != "" {
		if src, err := m.cfg.Store.CheckpointByID(ctx, sb.SourceCheckpoint); err == nil {
			return src.RootGeneration, nil
		}
	}
	return volume.ChangeMarker(m.cfg.Pool.ImagePath(sb.Image))
}

// applyRetention thins the automatic checkpoints of every sandbox with
// checkpoint.Retain, and deletes the unnamed checkpoints (automatic and
// manual) of sandboxes deleted more than 14 days ago. Named checkpoints,
// the manual ones of a sandbox that exists, and current ones are never
// deleted.
func (m *Scheduler) applyRetention(ctx context.Context, sandboxes []metadata.Sandbox, live map[string]bool, now time.Time) error {
	accounts, err := m.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	current := map[string]bool{}
	for _, sb := range sandboxes {
		if sb.CurrentCheckpoint != "" {
			current[sb.CurrentCheckpoint] = true
		}
	}
	for _, acct := range accounts {
		all, err := m.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true})
		if err != nil {
			return err
		}
		bySandbox := map[string][]metadata.Checkpoint{}
		for _, ck := range all {
			if ck.Name != "" {
				continue // a named snapshot stays until it is deleted
			}
			bySandbox[ck.SandboxID] = append(bySandbox[ck.SandboxID], ck)
		}
		for sbID, cks := range bySandbox {
			if !m.retains(cks, live[sbID]) {
				continue
			}
			if live[sbID] {
				cks = automatic(cks) // a live sandbox keeps its manual ones
			}
			if len(cks) == 0 {
				continue
			}
			remove := m.retentionVictims(sbID, cks, live[sbID], now)
			for _, ck := range remove {
				if current[ck.ID] {
					continue
				}
				if err := m.expire(ctx, ck); err != nil {
					slog.Warn("retention: delete checkpoint", "sandbox", ck.SandboxName, "id", ck.Seq, "err", err)
				}
			}
		}
	}
	return nil
}

func (m *Scheduler) mine(hostID string) bool { return m.cfg.Mine == nil || m.cfg.Mine(hostID) }

// retains reports whether this host applies retention to one sandbox's
// checkpoints: those of its pool (the newest one's host: where the
// sandbox last ran), and, on the leader, a deleted sandbox's whose host is
// down.
func (m *Scheduler) retains(cks []metadata.Checkpoint, alive bool) bool {
	host := cks[len(cks)-1].HostID
	if m.mine(host) {
		return true
	}
	return !alive && m.cfg.Leader != nil && m.cfg.Leader() && m.cfg.Down != nil && m.cfg.Down(host)
}

// automatic returns the checkpoints of cks that cairn took by itself.
func automatic(cks []metadata.Checkpoint) []metadata.Checkpoint {
	var out []metadata.Checkpoint
	for _, ck := range cks {
		if ck.Trigger != api.TriggerManual {
			out = append(out, ck)
		}
	}
	return out
}

// retentionVictims returns the unnamed checkpoints of one sandbox that
// retention removes: for a live sandbox, the automatic ones that
// checkpoint.Retain gives up; for a deleted one, all of them (manual ones
// included) once 14 days have passed since its final checkpoint, none
// before.
func (m *Scheduler) retentionVictims(sbID string, cks []metadata.Checkpoint, alive bool, now time.Time) []metadata.Checkpoint {
	if !alive {
		deletedAt := cks[len(cks)-1].CreatedAt
		for _, ck := range cks {
			if ck.Trigger == api.TriggerDelete {
				deletedAt = ck.CreatedAt
			}
		}
		if !checkpoint.ExpiredAfterDelete(deletedAt, now) {
			return nil
		}
		// A lost host's checkpoints, imported from off-site, are often the
		// only copies left (and a repository may be another host's too):
		// they go only when the user deletes them.
		var out []metadata.Checkpoint
		for _, ck := range cks {
			if ck.ImportedAt.IsZero() {
				out = append(out, ck)
			}
		}
		return out
	}
	cands := make([]checkpoint.Candidate, len(cks))
	for i, ck := range cks {
		cands[i] = checkpoint.Candidate{ID: ck.ID, CreatedAt: ck.CreatedAt}
	}
	var out []metadata.Checkpoint
	for i, d := range checkpoint.Retain(cands, now) {
		if !d.Keep {
			out = append(out, cks[i])
		}
	}
	return out
}

// expire deletes a checkpoint retention gave up.
func (m *Scheduler) expire(ctx context.Context, ck metadata.Checkpoint) error {
	slog.Info("retention: deleting checkpoint", "sandbox", ck.SandboxName, "id", ck.Seq, "created", ck.CreatedAt)
	return m.cfg.Expirer.Expire(ctx, ck)
}
