package localtier

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
)

// fakeDisks records evictions and says the pool runs low for the first
// low calls of PoolSpace.
type fakeDisks struct {
	evicted []string
	low     int
}

func (f *fakeDisks) Evict(_ context.Context, ck metadata.Checkpoint) error {
	f.evicted = append(f.evicted, ck.ID)
	return nil
}

func (f *fakeDisks) PoolSpace(context.Context) (api.PoolSpace, error) {
	f.low--
	return api.PoolSpace{Low: f.low >= 0}, nil
}

// Apply drops what each account's policy lets go, only for accounts whose
// off-site copies are on, looks again before each drop, and while the pool
// runs low drops the oldest kept ones, one at a time.
func TestTierApply(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "meta.db"), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	on, _ := store.CreateAccount(ctx, "on", 0)
	off, _ := store.CreateAccount(ctx, "off", 0)
	for _, a := range []metadata.Account{on, off} {
		sb := metadata.Sandbox{ID: fmt.Sprintf("000000000000000%d", a.ID), AccountID: a.ID, Name: "s", Image: "busybox", State: metadata.SandboxRunning}
		if err := store.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			ck := metadata.Checkpoint{ID: fmt.Sprintf("a%d-c%d", a.ID, i), AccountID: a.ID, SandboxID: sb.ID, SandboxName: "s",
				Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, DiskPath: fmt.Sprintf("checkpoints/a%d-c%d", a.ID, i),
				CreatedAt: now.Add(-time.Duration(10-i) * 24 * time.Hour)}
			if _, err := store.CreateCheckpoint(ctx, ck); err != nil {
				t.Fatal(err)
			}
		}
	}
	disks := &fakeDisks{low: 1}
	all := func(metadata.Checkpoint) bool { return true }
	tier := New(Config{Store: store, Disks: disks, Now: func() time.Time { return now },
		Policies: map[string]Policy{"on": {KeepNewest: 2, KeepFor: -1}},
		Complete: func(id int64) func(metadata.Checkpoint) bool {
			if id == on.ID {
				return all
			}
			return nil
		}})
	if err := tier.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	// Policy: c0 and c1 go (the newest 2 stay); low once: the oldest kept
	// one, c2, goes too; nothing of the account with off-site off.
	want := []string{fmt.Sprintf("a%d-c0", on.ID), fmt.Sprintf("a%d-c1", on.ID), fmt.Sprintf("a%d-c2", on.ID)}
	if !slices.Equal(disks.evicted, want) {
		t.Fatalf("evicted %v, want %v", disks.evicted, want)
	}

	// A checkpoint made current after the plan is spared at the drop.
	sb, _ := store.SandboxByID(ctx, fmt.Sprintf("000000000000000%d", on.ID))
	if err := store.SetCurrentCheckpoint(ctx, sb.ID, want[0]); err != nil {
		t.Fatal(err)
	}
	ck, _ := store.CheckpointByID(ctx, want[0])
	disks.evicted = nil
	if err := tier.evict(ctx, ck, all); err != nil || len(disks.evicted) != 0 {
		t.Fatalf("evict of a checkpoint now current: %v %v", disks.evicted, err)
	}
}
