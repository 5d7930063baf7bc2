package localtier

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
)

// Disks drops local copies and says how full the pool is (disks.Disks).
type Disks interface {
	Evict(ctx context.Context, ck metadata.Checkpoint) error
	PoolSpace(ctx context.Context) (api.PoolSpace, error)
}

// Config is what a Tier needs.
type Config struct {
	Store metadata.Store
	Disks Disks
	// Complete returns how to tell, for the account with that id, whether
	// both its off-site locations hold a checkpoint; nil when its off-site
	// copies are off (ServicesComplete adapts an offsite.Set).
	Complete func(accountID int64) func(metadata.Checkpoint) bool
	// Policies are the accounts' policies by account name (the config
	// file's); an account without one has DefaultPolicy.
	Policies map[string]Policy
	Now      func() time.Time
	// Mine says whether a checkpoint naming a host has its local copy in
	// this host's pool (nil: every one has): only those are planned here.
	Mine func(hostID string) bool
}

// Tier applies the accounts' policies.
type Tier struct{ cfg Config }

// New returns the local tier of the pool.
func New(cfg Config) *Tier {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Tier{cfg: cfg}
}

// lowBatch bounds how many local copies one pass drops because the pool
// runs low: the next tick goes on if it still does.
const lowBatch = 20

// Apply drops the local copies that every account's policy lets go, then,
// while the pool runs low, the oldest of those off-site holds.
func (t *Tier) Apply(ctx context.Context) error {
	if t.cfg.Complete == nil {
		return nil
	}
	accts, err := t.cfg.Store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	var errs []error
	var spare []metadata.Checkpoint
	for _, a := range accts {
		f, err := t.facts(ctx, a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if f.Both == nil {
			continue // off-site copies are off for it
		}
		evict, ifLow := Plan(t.cfg.Policies[a.Name], f)
		for _, ck := range evict {
			if err := t.evict(ctx, ck, f.Both); err != nil {
				errs = append(errs, err)
			}
		}
		spare = append(spare, ifLow...)
	}
	sort.SliceStable(spare, func(i, j int) bool { return spare[i].CreatedAt.Before(spare[j].CreatedAt) })
	for i := 0; i < len(spare) && i < lowBatch; i++ {
		sp, err := t.cfg.Disks.PoolSpace(ctx)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if !sp.Low {
			break
		}
		slog.Info("the pool runs low: dropping the local copy of a checkpoint both off-site locations hold", "sandbox", spare[i].SandboxName, "id", spare[i].Seq)
		if err := t.evict(ctx, spare[i], nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// evict drops ck's local copy unless, looked at again now, it may not go:
// a restore or a saved session since the plan made it one a sandbox
// stands on. both is nil to ask the account's service again.
func (t *Tier) evict(ctx context.Context, ck metadata.Checkpoint, both func(metadata.Checkpoint) bool) error {
	sbs, err := t.cfg.Store.ListSandboxes(ctx, ck.AccountID, metadata.SandboxFilter{})
	if err != nil {
		return err
	}
	if both == nil {
		if both = t.cfg.Complete(ck.AccountID); both == nil {
			return nil
		}
	}
	if Refuse(ck, sbs, both) != "" {
		return nil
	}
	return t.cfg.Disks.Evict(ctx, ck)
}

// facts reads what account's plan is made from; Both is nil when its
// off-site copies are off.
func (t *Tier) facts(ctx context.Context, acct metadata.Account) (Facts, error) {
	f := Facts{Now: t.cfg.Now()}
	both := t.cfg.Complete(acct.ID)
	if both == nil {
		return f, nil
	}
	var err error
	if f.Checkpoints, err = t.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true}); err != nil {
		return f, err
	}
	if t.cfg.Mine != nil {
		f.Checkpoints = slices.DeleteFunc(f.Checkpoints, func(ck metadata.Checkpoint) bool { return !t.cfg.Mine(ck.HostID) })
	}
	if f.Sandboxes, err = t.cfg.Store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{}); err != nil {
		return f, err
	}
	f.Both = both
	return f, nil
}

// ServicesComplete tells Complete from the accounts' off-site services.
func ServicesComplete(set *offsite.Set) func(accountID int64) func(metadata.Checkpoint) bool {
	return func(accountID int64) func(metadata.Checkpoint) bool {
		svc := set.For(accountID)
		if svc == nil || !svc.Enabled() {
			return nil
		}
		return svc.Complete
	}
}
