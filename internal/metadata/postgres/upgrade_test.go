package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/migrations"
	"github.com/cairn-sandbox/cairn/internal/metadata/storetest"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

// TestUpgradeFromVersion6 fills a database at version 6 (before disk
// paths, leases, inside policies, crashes, networks, accounts' limits)
// and opens it: the later migrations give the old rows what the SQLite
// ones give theirs (the paths cairnd used before 0007, the defaults of
// the columns added since), and the store works on them.
func TestUpgradeFromVersion6(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	ms, err := migrations.Load(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	old := rawDB(t, url)
	if err := applyMigrations(ctx, old, ms[:6], time.Now); err != nil {
		t.Fatal(err)
	}
	const cols = `id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency, comment, label,
		has_memory, image, size_exclusive, size_total, root_generation, created_at, offsite_manifest`
	for _, q := range []string{
		`INSERT INTO accounts (name, created_at) VALUES ('alice', '2030-01-01T00:00:00Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, next_checkpoint, resume_checkpoint,
		                       auto_checkpoint_seconds, created_at, updated_at)
		 VALUES ('0000000000000001', 1, 'web', 'debian', 'stopped', 1, 'c000000000000002', 600,
		         '2030-01-02T00:00:00Z', '2030-01-02T00:00:00Z')`,
		`INSERT INTO checkpoints (` + cols + `)
		 VALUES ('c000000000000001', 1, '0000000000000001', 'web', 'v0', 'snap', 'manual', 'frozen', '', '',
		         FALSE, 'debian', 4096, 8192, 77, '2030-01-02T12:00:00Z', 'aaaa')`,
		`INSERT INTO checkpoints (` + cols + `)
		 VALUES ('c000000000000002', 1, '0000000000000001', 'web', 'auto-20300102T130000Z', NULL, 'stop', 'frozen', '', '',
		         TRUE, 'debian', 0, 0, 78, '2030-01-02T13:00:00Z', NULL)`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}

	clock := storetest.NewClock()
	s, err := Open(ctx, url, clock.Now)
	if err != nil {
		t.Fatalf("Open of a version 6 database: %v", err)
	}
	defer s.Close()
	if vs, _ := versions(t, old); len(vs) != latest(t) {
		t.Errorf("versions after the upgrade: %v", vs)
	}

	day := func(h int) time.Time { return time.Date(2030, 1, 2, h, 0, 0, 0, time.UTC) }
	wantCks := []metadata.Checkpoint{
		{ID: "c000000000000001", AccountID: 1, SandboxID: "0000000000000001", SandboxName: "web", Seq: "v0", Name: "snap",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
			SizeExclusive: 4096, SizeTotal: 8192, RootGeneration: 77, OffsiteManifest: "aaaa",
			DiskPath: "checkpoints/c000000000000001", CreatedAt: day(12)},
		{ID: "c000000000000002", AccountID: 1, SandboxID: "0000000000000001", SandboxName: "web", Seq: "auto-20300102T130000Z",
			Trigger: metadata.TriggerStop, Consistency: metadata.ConsistencyFrozen, HasMemory: true, Image: "debian",
			RootGeneration: 78, DiskPath: "checkpoints/c000000000000002", MemoryPath: "memory/c000000000000002", CreatedAt: day(13)},
	}
	cks, err := s.AllCheckpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", cks) != fmt.Sprintf("%+v", wantCks) {
		t.Errorf("checkpoints after the upgrade:\n got  %+v\n want %+v", cks, wantCks)
	}
	sb, err := s.SandboxByID(ctx, "0000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Inside != metadata.DefaultInsidePolicy || sb.Restart != metadata.RestartOnFailure ||
		sb.Network.Mode != metadata.NetworkNone || sb.DiskBytes != 0 || sb.AutoCheckpoint != 10*time.Minute ||
		sb.ResumeCheckpoint != "c000000000000002" || !sb.LastCrash.At.IsZero() {
		t.Errorf("sandbox after the upgrade: %+v", sb)
	}
	if a, err := s.AccountByName(ctx, "alice"); err != nil || a.DiskLimit != 0 || !a.CreatedAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("account after the upgrade: %+v, %v", a, err)
	}

	// The migrated paths are taken, the counter goes on, and a new
	// account does not take the old one's id (the identity went on too).
	if _, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{ID: "c000000000000009", AccountID: 1, SandboxID: sb.ID,
		SandboxName: "web", Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
		DiskPath: "memory/c000000000000002"}); err == nil {
		t.Errorf("a new checkpoint took a migrated memory path")
	}
	if ck, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{ID: "c000000000000004", AccountID: 1, SandboxID: sb.ID,
		SandboxName: "web", Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
		DiskPath: "checkpoints/c000000000000004"}); err != nil || ck.Seq != "v1" {
		t.Errorf("checkpoint after the upgrade = %s, %v; want v1", ck.Seq, err)
	}
	if b, err := s.EnsureAccount(ctx, "bob"); err != nil || b.ID == 1 {
		t.Errorf("new account after the upgrade = %+v, %v", b, err)
	}
}
