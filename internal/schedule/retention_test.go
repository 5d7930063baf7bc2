package schedule

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
)

// recordingExpirer deletes what retention gives up from the store, as the
// catalog does, and remembers the ids.
type recordingExpirer struct {
	store metadata.Store
	ids   []string
}

func (e *recordingExpirer) Expire(ctx context.Context, ck metadata.Checkpoint) error {
	e.ids = append(e.ids, ck.ID)
	return e.store.DeleteCheckpoint(ctx, ck.ID)
}

// TestRetentionOfDeletedSandboxes runs the retention pass on a real store:
// the unnamed checkpoints of a deleted sandbox, manual ones included, go 14
// days after its final checkpoint; its named snapshots stay; a sandbox that
// still exists keeps its manual checkpoints however old.
func TestRetentionOfDeletedSandboxes(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "meta.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, err := store.EnsureAccount(ctx, metadata.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	newSandbox := func(id, name string) metadata.Sandbox {
		sb := metadata.Sandbox{ID: id, AccountID: acct.ID, Name: name, Image: "debian", State: metadata.SandboxStopped}
		if err := store.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		return sb
	}
	deletedAt := time.Now().Add(-time.Hour)
	add := func(sb metadata.Sandbox, id, trigger, name string, at time.Duration) {
		ck := metadata.Checkpoint{ID: id, AccountID: acct.ID, SandboxID: sb.ID, SandboxName: sb.Name,
			Trigger: trigger, Name: name, Consistency: metadata.ConsistencyFrozen, Image: sb.Image,
			CreatedAt: deletedAt.Add(at)}
		if _, err := store.CreateCheckpoint(ctx, ck); err != nil {
			t.Fatal(err)
		}
	}
	gone := newSandbox("00000000000000a1", "gone")
	add(gone, "00000000000000c1", api.TriggerManual, "", -72*time.Hour)
	add(gone, "00000000000000c2", api.TriggerManual, "kept-snapshot", -48*time.Hour)
	add(gone, "00000000000000c3", api.TriggerInterval, "", -24*time.Hour)
	add(gone, "00000000000000c4", api.TriggerDelete, "", 0)
	if err := store.DeleteSandbox(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	kept := newSandbox("00000000000000a2", "kept")
	add(kept, "00000000000000d1", api.TriggerManual, "", -400*24*time.Hour)

	exp := &recordingExpirer{store: store}
	m := New(Config{Store: store, Expirer: exp})
	pass := func(now time.Time) {
		t.Helper()
		sandboxes, err := store.AllSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		live := map[string]bool{}
		for _, sb := range sandboxes {
			live[sb.ID] = true
		}
		if err := m.applyRetention(ctx, sandboxes, live, now); err != nil {
			t.Fatal(err)
		}
	}

	pass(deletedAt.Add(13 * 24 * time.Hour))
	if len(exp.ids) != 0 {
		t.Fatalf("13 days after the delete, retention deleted %v; want nothing yet", exp.ids)
	}
	pass(deletedAt.Add(14*24*time.Hour + time.Hour))
	slices.Sort(exp.ids)
	want := []string{"00000000000000c1", "00000000000000c3", "00000000000000c4"}
	if !slices.Equal(exp.ids, want) {
		t.Fatalf("14 days after the delete, retention deleted %v; want %v (the unnamed ones, manual included)", exp.ids, want)
	}
	for _, id := range []string{"00000000000000c2", "00000000000000d1"} {
		if _, err := store.CheckpointByID(ctx, id); err != nil {
			t.Errorf("checkpoint %s (a named snapshot, or a manual one of a sandbox that exists) is gone: %v", id, err)
		}
	}
}

// Checkpoints imported from off-site (a lost host's, months old, often
// the only copies left) are never expired by retention: only the user
// deletes them.
func TestRetentionOfImportedCheckpoints(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "meta.db"), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct, err := store.EnsureAccount(ctx, metadata.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	for i, trigger := range []string{api.TriggerManual, api.TriggerInterval, api.TriggerDelete} {
		ck := metadata.Checkpoint{ID: "00000000000000e" + string(rune('1'+i)), AccountID: acct.ID, SandboxID: "00000000000000b1", SandboxName: "old",
			Seq: []string{"v1", "auto-20260101T000000Z", "auto-20260102T000000Z"}[i], Trigger: trigger, Consistency: metadata.ConsistencyFrozen,
			OffsiteManifest: strings.Repeat("ab", 31) + "0" + string(rune('1'+i)), CreatedAt: now.Add(-90 * 24 * time.Hour)}
		if _, err := store.ImportCheckpoint(ctx, ck); err != nil {
			t.Fatal(err)
		}
	}
	exp := &recordingExpirer{store: store}
	m := New(Config{Store: store, Expirer: exp})
	if err := m.applyRetention(ctx, nil, map[string]bool{}, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if len(exp.ids) != 0 {
		t.Fatalf("an hour after the import of 90-day-old checkpoints, retention deleted %v", exp.ids)
	}
	if err := m.applyRetention(ctx, nil, map[string]bool{}, now.Add(400*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if len(exp.ids) != 0 {
		t.Fatalf("400 days after the import, retention deleted %v; want none", exp.ids)
	}
}
