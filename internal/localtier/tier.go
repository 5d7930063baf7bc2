package localtier

import (
	"context"
	"errors"
	"log/slog"
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
	Store   metadata.Store
	Disks   Disks
	Offsite *offsite.Set
	// Policies are the accounts' policies by account name (the config
	// file's); an account without one has DefaultPolicy.
	Policies map[string]Policy
	Now      func() time.Time
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
	if t.cfg.Offsite == nil {
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
			if err := t.cfg.Disks.Evict(ctx, ck); err != nil {
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
		if err := t.cfg.Disks.Evict(ctx, spare[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// facts reads what account's plan is made from; Both is nil when its
// off-site copies are off.
func (t *Tier) facts(ctx context.Context, acct metadata.Account) (Facts, error) {
	f := Facts{Now: t.cfg.Now()}
	svc := t.cfg.Offsite.For(acct.ID)
	if svc == nil || !svc.Enabled() {
		return f, nil
	}
	var err error
	if f.Checkpoints, err = t.cfg.Store.ListCheckpoints(ctx, acct.ID, metadata.CheckpointFilter{IncludeAuto: true}); err != nil {
		return f, err
	}
	if f.Sandboxes, err = t.cfg.Store.ListSandboxes(ctx, acct.ID, metadata.SandboxFilter{}); err != nil {
		return f, err
	}
	f.Both = svc.Complete
	return f, nil
}
