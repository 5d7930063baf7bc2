package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/migrations"
	"github.com/cairn-sandbox/cairn/internal/metadata/storetest"
)

// The tests of this file build a database as an older cairnd left it (the
// migrations up to some version, rows written as that version wrote them)
// and open it with this store.

// TestUpgradeFromVersion1 builds a database as a cairnd of schema version 1
// left it (0001 only, with sandboxes in it) and opens it with this store:
// it must move to the latest version with every sandbox intact, and their
// manual checkpoints must start at v0.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:1], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id, created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'running', 1.5, 1024, NULL,
		         '2030-01-02T00:00:00.000001Z', '2030-01-03T00:00:00.000002Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id, created_at, updated_at)
		 VALUES ('0000000000000002', 7, 'fork', 'busybox', 'stopped', 0, 0, '0000000000000001',
		         '2030-01-04T00:00:00.000000Z', '2030-01-04T00:00:00.000000Z')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	clock := storetest.NewClock()
	s, err := Open(path, clock.Now)
	if err != nil {
		t.Fatalf("Open of a version 1 database: %v", err)
	}
	defer s.Close()
	if got := appliedMigrations(t, rawDB(t, path)); len(got) != latest(t) || got[len(got)-1].appliedAt != formatTime(clock.Now()) {
		t.Errorf("schema_migrations after the upgrade = %v, want versions up to %d, the new ones applied now", got, latest(t))
	}

	day := func(d, us int) time.Time { return time.Date(2030, 1, d, 0, 0, 0, us*1000, time.UTC) }
	want := []metadata.Sandbox{
		{ID: "0000000000000002", AccountID: 7, Name: "fork", Image: "busybox", State: metadata.SandboxStopped,
			ParentID: "0000000000000001", AutoCheckpoint: 5 * time.Minute, Inside: metadata.DefaultInsidePolicy, Restart: metadata.RestartOnFailure, Network: oldNetwork, CreatedAt: day(4, 0), UpdatedAt: day(4, 0)},
		{ID: "0000000000000001", AccountID: 7, Name: "web", Image: "debian", State: metadata.SandboxRunning,
			CPUs: 1.5, MemoryBytes: 1024, AutoCheckpoint: 5 * time.Minute, Inside: metadata.DefaultInsidePolicy, Restart: metadata.RestartOnFailure, Network: oldNetwork, CreatedAt: day(2, 1), UpdatedAt: day(3, 2)},
	}
	got, err := s.ListSandboxes(ctx, 7, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sandboxes after the upgrade:\n got  %+v\n want %+v", got, want)
	}
	var counters string
	if err := s.reader.QueryRow(`SELECT group_concat(next_checkpoint) FROM (SELECT next_checkpoint FROM sandboxes ORDER BY id)`).
		Scan(&counters); err != nil || counters != "0,0" {
		t.Errorf("next_checkpoint after the upgrade = %q, %v; want 0 for both", counters, err)
	}

	for i, wantSeq := range []string{"v0", "v1"} {
		ck, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{
			ID: fmt.Sprintf("c%015x", i), AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
		})
		if err != nil || ck.Seq != wantSeq {
			t.Errorf("checkpoint %d after the upgrade = %q, %v; want %s", i, ck.Seq, err, wantSeq)
		}
	}
}

// TestUpgradeFromVersion2 builds a database as a cairnd of schema version 2
// left it (0001 and 0002, with sandboxes and checkpoints in it) and opens it
// with this store: it must move to the latest version with every row
// intact, existing sandboxes at the default automatic checkpoint interval
// (5m) and existing checkpoints at root generation 0 (unknown).
func TestUpgradeFromVersion2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:2], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id,
		                       next_checkpoint, current_checkpoint, source_checkpoint, created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'running', 1.5, 1024, NULL,
		         2, 'c000000000000001', NULL, '2030-01-02T00:00:00.000001Z', '2030-01-03T00:00:00.000002Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id,
		                       next_checkpoint, current_checkpoint, source_checkpoint, created_at, updated_at)
		 VALUES ('0000000000000002', 7, 'fork', 'busybox', 'stopped', 0, 0, '0000000000000001',
		         0, 'c000000000000001', 'c000000000000001', '2030-01-04T00:00:00.000000Z', '2030-01-04T00:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, created_at)
		 VALUES ('c000000000000001', 7, '0000000000000001', 'web', 'v0', 'snap', 'manual', 'frozen',
		         'a comment', 'a label', 0, 'debian', 4096, 8192, '2030-01-02T12:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, created_at)
		 VALUES ('c000000000000002', 7, '0000000000000001', 'web', 'v1', NULL, 'manual', 'frozen',
		         '', '', 0, 'debian', 0, 0, '2030-01-02T13:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, created_at)
		 VALUES ('c000000000000003', 7, '0000000000000001', 'web', 'auto-20300102T130000Z', NULL, 'interval', 'crash',
		         '', '', 0, 'debian', 0, 0, '2030-01-02T13:00:00.000000Z')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	clock := storetest.NewClock()
	s, err := Open(path, clock.Now)
	if err != nil {
		t.Fatalf("Open of a version 2 database: %v", err)
	}
	defer s.Close()
	applied := appliedMigrations(t, rawDB(t, path))
	if len(applied) != latest(t) || applied[1].appliedAt == formatTime(clock.Now()) ||
		applied[len(applied)-1].appliedAt != formatTime(clock.Now()) {
		t.Errorf("schema_migrations after the upgrade = %v, want versions up to %d, only the new ones applied now", applied, latest(t))
	}

	day := func(d, h, us int) time.Time { return time.Date(2030, 1, d, h, 0, 0, us*1000, time.UTC) }
	wantSbs := []metadata.Sandbox{
		{ID: "0000000000000002", AccountID: 7, Name: "fork", Image: "busybox", State: metadata.SandboxStopped,
			ParentID: "0000000000000001", CurrentCheckpoint: "c000000000000001", SourceCheckpoint: "c000000000000001",
			AutoCheckpoint: 5 * time.Minute, Inside: metadata.DefaultInsidePolicy, Restart: metadata.RestartOnFailure, Network: oldNetwork, CreatedAt: day(4, 0, 0), UpdatedAt: day(4, 0, 0)},
		{ID: "0000000000000001", AccountID: 7, Name: "web", Image: "debian", State: metadata.SandboxRunning,
			CPUs: 1.5, MemoryBytes: 1024, CurrentCheckpoint: "c000000000000001",
			AutoCheckpoint: 5 * time.Minute, Inside: metadata.DefaultInsidePolicy, Restart: metadata.RestartOnFailure, Network: oldNetwork, CreatedAt: day(2, 0, 1), UpdatedAt: day(3, 0, 2)},
	}
	sbs, err := s.ListSandboxes(ctx, 7, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sbs) != fmt.Sprint(wantSbs) {
		t.Errorf("sandboxes after the upgrade:\n got  %+v\n want %+v", sbs, wantSbs)
	}

	wantCks := []metadata.Checkpoint{
		{ID: "c000000000000001", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "v0", Name: "snap",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Comment: "a comment", Label: "a label",
			Image: "debian", SizeExclusive: 4096, SizeTotal: 8192, DiskPath: "checkpoints/c000000000000001", CreatedAt: day(2, 12, 0)},
		{ID: "c000000000000002", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "v1",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
			DiskPath: "checkpoints/c000000000000002", CreatedAt: day(2, 13, 0)},
		{ID: "c000000000000003", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "auto-20300102T130000Z",
			Trigger: metadata.TriggerInterval, Consistency: metadata.ConsistencyCrash, Image: "debian",
			DiskPath: "checkpoints/c000000000000003", CreatedAt: day(2, 13, 0)},
	}
	cks, err := s.ListCheckpoints(ctx, 7, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cks) != fmt.Sprint(wantCks) {
		t.Errorf("checkpoints after the upgrade:\n got  %+v\n want %+v", cks, wantCks)
	}
	// The newest: created with v1 at the same instant, stored after it.
	if ck, err := s.LatestCheckpoint(ctx, "0000000000000001"); err != nil || ck.ID != "c000000000000003" {
		t.Errorf("LatestCheckpoint after the upgrade = %s, %v; want c000000000000003", ck.ID, err)
	}

	// The counter carried over; new rows take the new columns.
	ck, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{
		ID: "c000000000000004", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web",
		Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian", RootGeneration: 1 << 40,
	})
	if err != nil || ck.Seq != "v2" || ck.RootGeneration != 1<<40 {
		t.Errorf("checkpoint after the upgrade = %s generation %d, %v; want v2 generation %d", ck.Seq, ck.RootGeneration, err, uint64(1<<40))
	}
	if err := s.SetAutoCheckpoint(ctx, "0000000000000001", time.Hour); err != nil {
		t.Fatal(err)
	}
	if sb, err := s.SandboxByID(ctx, "0000000000000001"); err != nil || sb.AutoCheckpoint != time.Hour {
		t.Errorf("interval after SetAutoCheckpoint = %v, %v; want 1h", sb.AutoCheckpoint, err)
	}
}

// TestUpgradeFromVersion3 builds a database as a cairnd of schema version 3
// left it (0001 to 0003, with sandboxes and checkpoints in it) and opens it
// with this store: it must move to the latest version with every row
// intact and no sandbox resuming from a checkpoint (they cold-start, as
// before); the new column then works on the old rows.
func TestUpgradeFromVersion3(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:3], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id,
		                       next_checkpoint, current_checkpoint, source_checkpoint, auto_checkpoint_seconds,
		                       created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'stopped', 1.5, 1024, NULL,
		         2, 'c000000000000001', NULL, 3600, '2030-01-02T00:00:00.000001Z', '2030-01-03T00:00:00.000002Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, cpus, memory_bytes, parent_id,
		                       next_checkpoint, current_checkpoint, source_checkpoint, auto_checkpoint_seconds,
		                       created_at, updated_at)
		 VALUES ('0000000000000002', 7, 'fork', 'busybox', 'running', 0, 0, '0000000000000001',
		         0, 'c000000000000001', 'c000000000000001', 300, '2030-01-04T00:00:00.000000Z', '2030-01-04T00:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, root_generation, created_at)
		 VALUES ('c000000000000001', 7, '0000000000000001', 'web', 'v0', 'snap', 'manual', 'frozen',
		         'a comment', 'a label', 0, 'debian', 4096, 8192, 77, '2030-01-02T12:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency,
		                         comment, label, has_memory, image, size_exclusive, size_total, root_generation, created_at)
		 VALUES ('c000000000000002', 7, '0000000000000001', 'web', 'auto-20300102T130000Z', NULL, 'stop', 'frozen',
		         '', '', 1, 'debian', 0, 0, 78, '2030-01-02T13:00:00.000000Z')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	clock := storetest.NewClock()
	s, err := Open(path, clock.Now)
	if err != nil {
		t.Fatalf("Open of a version 3 database: %v", err)
	}
	defer s.Close()
	applied := appliedMigrations(t, rawDB(t, path))
	if len(applied) != latest(t) || applied[2].appliedAt == formatTime(clock.Now()) ||
		applied[len(applied)-1].appliedAt != formatTime(clock.Now()) {
		t.Errorf("schema_migrations after the upgrade = %v, want versions up to %d, only the new ones applied now", applied, latest(t))
	}

	day := func(d, h, us int) time.Time { return time.Date(2030, 1, d, h, 0, 0, us*1000, time.UTC) }
	wantSbs := []metadata.Sandbox{
		{ID: "0000000000000002", AccountID: 7, Name: "fork", Image: "busybox", State: metadata.SandboxRunning,
			ParentID: "0000000000000001", CurrentCheckpoint: "c000000000000001", SourceCheckpoint: "c000000000000001",
			AutoCheckpoint: 5 * time.Minute, Inside: metadata.DefaultInsidePolicy, Restart: metadata.RestartOnFailure, Network: oldNetwork, CreatedAt: day(4, 0, 0), UpdatedAt: day(4, 0, 0)},
		{ID: "0000000000000001", AccountID: 7, Name: "web", Image: "debian", State: metadata.SandboxStopped,
			CPUs: 1.5, MemoryBytes: 1024, CurrentCheckpoint: "c000000000000001",
			AutoCheckpoint: time.Hour, Inside: metadata.DefaultInsidePolicy, Restart: metadata.RestartOnFailure, Network: oldNetwork, CreatedAt: day(2, 0, 1), UpdatedAt: day(3, 0, 2)},
	}
	sbs, err := s.ListSandboxes(ctx, 7, metadata.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", sbs) != fmt.Sprintf("%+v", wantSbs) {
		t.Errorf("sandboxes after the upgrade:\n got  %+v\n want %+v", sbs, wantSbs)
	}
	var nulls int
	if err := s.reader.QueryRow(`SELECT count(*) FROM sandboxes WHERE resume_checkpoint IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
		t.Errorf("sandboxes without a resume checkpoint after the upgrade = %d, %v; want 2 (NULL)", nulls, err)
	}

	wantCks := []metadata.Checkpoint{
		{ID: "c000000000000001", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "v0", Name: "snap",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Comment: "a comment", Label: "a label",
			Image: "debian", SizeExclusive: 4096, SizeTotal: 8192, RootGeneration: 77,
			DiskPath: "checkpoints/c000000000000001", CreatedAt: day(2, 12, 0)},
		{ID: "c000000000000002", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "auto-20300102T130000Z",
			Trigger: metadata.TriggerStop, Consistency: metadata.ConsistencyFrozen, HasMemory: true, Image: "debian",
			RootGeneration: 78, DiskPath: "checkpoints/c000000000000002", MemoryPath: "memory/c000000000000002", CreatedAt: day(2, 13, 0)},
	}
	cks, err := s.ListCheckpoints(ctx, 7, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", cks) != fmt.Sprintf("%+v", wantCks) {
		t.Errorf("checkpoints after the upgrade:\n got  %+v\n want %+v", cks, wantCks)
	}

	// The old rows take the new column: an old stop checkpoint becomes a
	// saved session, deleting it ends the session, and the counter carried
	// over.
	if err := s.SetResumeCheckpoint(ctx, "0000000000000001", "c000000000000002"); err != nil {
		t.Fatal(err)
	}
	if sb, err := s.SandboxByID(ctx, "0000000000000001"); err != nil || sb.ResumeCheckpoint != "c000000000000002" ||
		!sb.UpdatedAt.Equal(normTime(clock.Now())) {
		t.Errorf("after SetResumeCheckpoint: resume %q updated %v, %v; want c000000000000002 at %v",
			sb.ResumeCheckpoint, sb.UpdatedAt, err, normTime(clock.Now()))
	}
	if err := s.DeleteCheckpoint(ctx, "c000000000000002"); err != nil {
		t.Fatal(err)
	}
	if sb, err := s.SandboxByID(ctx, "0000000000000001"); err != nil || sb.ResumeCheckpoint != "" {
		t.Errorf("after deleting the resume checkpoint: resume %q, %v; want none", sb.ResumeCheckpoint, err)
	}
	if ck, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{
		ID: "c000000000000003", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web",
		Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
	}); err != nil || ck.Seq != "v2" {
		t.Errorf("checkpoint after the upgrade = %s, %v; want v2", ck.Seq, err)
	}
}

// TestUpgradeFromVersion6 builds a database as a cairnd of schema version 6
// left it (0001 to 0006, with checkpoints with and without memory, one of a
// deleted sandbox) and opens it with this store: every checkpoint must say
// where cairnd kept its disk and memory image (checkpoints/<id>,
// memory/<id>), nothing be queued for deletion and no lease held; the old
// rows then take part in the new rules.
func TestUpgradeFromVersion6(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:6], time.Now); err != nil {
		t.Fatal(err)
	}
	const cols = `id, account_id, sandbox_id, sandbox_name, seq, name, trigger, consistency, comment, label,
		has_memory, image, size_exclusive, size_total, root_generation, created_at, offsite_manifest`
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, next_checkpoint, resume_checkpoint,
		                       created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'stopped', 1, 'c000000000000002',
		         '2030-01-02T00:00:00.000000Z', '2030-01-02T00:00:00.000000Z')`,
		`INSERT INTO checkpoints (` + cols + `)
		 VALUES ('c000000000000001', 7, '0000000000000001', 'web', 'v0', 'snap', 'manual', 'frozen', '', '',
		         0, 'debian', 4096, 8192, 77, '2030-01-02T12:00:00.000000Z', 'aaaa')`,
		`INSERT INTO checkpoints (` + cols + `)
		 VALUES ('c000000000000002', 7, '0000000000000001', 'web', 'auto-20300102T130000Z', NULL, 'stop', 'frozen', '', '',
		         1, 'debian', 0, 0, 78, '2030-01-02T13:00:00.000000Z', NULL)`,
		`INSERT INTO checkpoints (` + cols + `)
		 VALUES ('c000000000000003', 7, '000000000000dead', 'gone', 'auto-20300102T140000Z', NULL, 'delete', 'crash', '', '',
		         0, 'busybox', 0, 0, 0, '2030-01-02T14:00:00.000000Z', NULL)`,
		`INSERT INTO offsite_deletes (account_id, manifest) VALUES (7, 'bbbb')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	clock := storetest.NewClock()
	s, err := Open(path, clock.Now)
	if err != nil {
		t.Fatalf("Open of a version 6 database: %v", err)
	}
	defer s.Close()
	applied := appliedMigrations(t, rawDB(t, path))
	if len(applied) != latest(t) || applied[5].appliedAt == formatTime(clock.Now()) ||
		applied[len(applied)-1].appliedAt != formatTime(clock.Now()) {
		t.Errorf("schema_migrations after the upgrade = %v, want versions up to %d, only the new ones applied now", applied, latest(t))
	}

	day := func(h int) time.Time { return time.Date(2030, 1, 2, h, 0, 0, 0, time.UTC) }
	wantCks := []metadata.Checkpoint{
		{ID: "c000000000000001", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "v0", Name: "snap",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
			SizeExclusive: 4096, SizeTotal: 8192, RootGeneration: 77, OffsiteManifest: "aaaa",
			DiskPath: "checkpoints/c000000000000001", CreatedAt: day(12)},
		{ID: "c000000000000002", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web", Seq: "auto-20300102T130000Z",
			Trigger: metadata.TriggerStop, Consistency: metadata.ConsistencyFrozen, HasMemory: true, Image: "debian",
			RootGeneration: 78, DiskPath: "checkpoints/c000000000000002", MemoryPath: "memory/c000000000000002", CreatedAt: day(13)},
		{ID: "c000000000000003", AccountID: 7, SandboxID: "000000000000dead", SandboxName: "gone", Seq: "auto-20300102T140000Z",
			Trigger: metadata.TriggerDelete, Consistency: metadata.ConsistencyCrash, Image: "busybox",
			DiskPath: "checkpoints/c000000000000003", CreatedAt: day(14)},
	}
	cks, err := s.AllCheckpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", cks) != fmt.Sprintf("%+v", wantCks) {
		t.Errorf("checkpoints after the upgrade:\n got  %+v\n want %+v", cks, wantCks)
	}
	if ds, err := s.DiskDeletes(ctx); err != nil || len(ds) != 0 {
		t.Errorf("DiskDeletes after the upgrade = %+v, %v; want none", ds, err)
	}
	if ls, err := s.Leases(ctx, ""); err != nil || len(ls) != 0 {
		t.Errorf("Leases after the upgrade = %+v, %v; want none", ls, err)
	}
	if ms, err := s.OffsiteDeletes(ctx, 7); err != nil || fmt.Sprint(ms) != "[bbbb]" {
		t.Errorf("OffsiteDeletes after the upgrade = %v, %v; want [bbbb]", ms, err)
	}

	// The migrated paths are taken: no new checkpoint can name them.
	for _, p := range []string{"checkpoints/c000000000000001", "memory/c000000000000002"} {
		_, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{
			ID: "c000000000000009", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web",
			Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian", DiskPath: p,
		})
		if !errors.Is(err, metadata.ErrConflict) {
			t.Errorf("CreateCheckpoint with the migrated path %q = %v, want ErrConflict", p, err)
		}
	}
	// Deleting an old memory checkpoint queues both its paths (and clears
	// the saved session, as before); losing an old disk queues its path.
	clock.Advance(time.Minute)
	if err := s.DeleteCheckpoint(ctx, "c000000000000002"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := s.SetCheckpointDisk(ctx, "c000000000000003", ""); err != nil {
		t.Fatal(err)
	}
	ds, err := s.DiskDeletes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.CheckpointID+":"+d.Path)
	}
	if want := "[c000000000000002:checkpoints/c000000000000002 c000000000000002:memory/c000000000000002 " +
		"c000000000000003:checkpoints/c000000000000003]"; fmt.Sprint(got) != want {
		t.Errorf("DiskDeletes = %v, want %s", got, want)
	}
	if sb, err := s.SandboxByID(ctx, "0000000000000001"); err != nil || sb.ResumeCheckpoint != "" {
		t.Errorf("after deleting the resume checkpoint: resume %q, %v; want none", sb.ResumeCheckpoint, err)
	}
	if ck, err := s.CreateCheckpoint(ctx, metadata.Checkpoint{
		ID: "c000000000000004", AccountID: 7, SandboxID: "0000000000000001", SandboxName: "web",
		Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "debian",
		DiskPath: "checkpoints/c000000000000004",
	}); err != nil || ck.Seq != "v1" || ck.DiskPath != "checkpoints/c000000000000004" {
		t.Errorf("checkpoint after the upgrade = %s at %q, %v; want v1 at checkpoints/c000000000000004", ck.Seq, ck.DiskPath, err)
	}
	if _, err := s.AcquireLease(ctx, metadata.Lease{ID: "l1", Resource: "sandbox/0000000000000001", Exclusive: true,
		Owner: "host/h/1", Purpose: "restoring", Expires: clock.Now().Add(time.Minute)}); err != nil {
		t.Errorf("AcquireLease after the upgrade: %v", err)
	}
}

// Version 8 gives the sandboxes of a version 7 database the default inside
// policy and marks none of their checkpoints as made from inside.
func TestUpgradeFromVersion7(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:7], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, next_checkpoint, created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'stopped', 1, '2030-01-02T00:00:00.000000Z', '2030-01-02T00:00:00.000000Z')`,
		`INSERT INTO checkpoints (id, account_id, sandbox_id, sandbox_name, seq, trigger, consistency, comment, label,
		                          has_memory, image, size_exclusive, size_total, root_generation, created_at, disk_path, memory_path)
		 VALUES ('c000000000000001', 7, '0000000000000001', 'web', 'v0', 'manual', 'frozen', '', '',
		         0, 'debian', 0, 0, 0, '2030-01-02T12:00:00.000000Z', 'checkpoints/c000000000000001', '')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, storetest.NewClock().Now)
	if err != nil {
		t.Fatalf("Open of a version 7 database: %v", err)
	}
	defer s.Close()
	sb, err := s.SandboxByID(ctx, "0000000000000001")
	if err != nil || sb.Inside != metadata.DefaultInsidePolicy {
		t.Errorf("sandbox after the upgrade: inside %+v, %v; want %+v", sb.Inside, err, metadata.DefaultInsidePolicy)
	}
	ck, err := s.CheckpointByID(ctx, "c000000000000001")
	if err != nil || ck.FromInside {
		t.Errorf("checkpoint after the upgrade: from inside %v, %v; want false", ck.FromInside, err)
	}
	p := metadata.InsidePolicy{Names: true, PerMinute: 1, Keep: 2}
	if err := s.SetInsidePolicy(ctx, sb.ID, p); err != nil {
		t.Fatal(err)
	}
	if sb, err := s.SandboxByID(ctx, sb.ID); err != nil || sb.Inside != p {
		t.Errorf("after SetInsidePolicy: %+v, %v; want %+v", sb.Inside, err, p)
	}
}

// oldNetwork is what a sandbox made before networking (schema version 14)
// has: loopback only, as it had.
var oldNetwork = metadata.NetworkSettings{Mode: metadata.NetworkNone}

// TestUpgradeFromVersion13 builds a database as a cairnd before published
// ports left it (0001-0013, a sandbox in it) and opens it: the sandbox
// publishes no ports and can publish some, which go with it, and the
// account has no port token until one is made.
func TestUpgradeFromVersion13(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metadata.db")
	ms, err := migrations.Load(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	old, err := sql.Open("sqlite", dsn(path, url.Values{"_txlock": {"immediate"}, "_foreign_keys": {"on"}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := applyMigrations(ctx, old, ms[:13], time.Now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, name, created_at) VALUES (7, 'alice', '2030-01-01T00:00:00.000000Z')`,
		`INSERT INTO sandboxes (id, account_id, name, image, state, next_checkpoint, created_at, updated_at)
		 VALUES ('0000000000000001', 7, 'web', 'debian', 'running', 1, '2030-01-02T00:00:00.000000Z', '2030-01-02T00:00:00.000000Z')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, storetest.NewClock().Now)
	if err != nil {
		t.Fatalf("Open of a version 13 database: %v", err)
	}
	defer s.Close()
	if ps, err := s.Ports(ctx, "0000000000000001"); err != nil || len(ps) != 0 {
		t.Errorf("ports after the upgrade: %+v, %v; want none", ps, err)
	}
	if _, err := s.PortToken(ctx, 7); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("port token after the upgrade: %v, want ErrNotFound", err)
	}
	if _, err := s.PublishPort(ctx, metadata.PublishedPort{SandboxID: "0000000000000001", Port: 8080}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSandbox(ctx, "0000000000000001"); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.Ports(ctx, "0000000000000001"); err != nil || len(ps) != 0 {
		t.Errorf("ports of the deleted sandbox: %+v, %v; want none", ps, err)
	}
}
