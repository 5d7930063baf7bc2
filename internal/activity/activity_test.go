package activity_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/activity"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
)

func types(evs []api.SandboxActivity) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Type
		if ev.State != "" {
			s += ":" + ev.State
		}
		out = append(out, s)
	}
	return out
}

func same(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The store's changes become events once the store has them, in order;
// a state set twice is one event; a failed change is none; another
// sandbox's events are not in this one's stream.
func TestRecordingPublishesWhatTheStoreDid(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "meta.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hub := activity.NewHub(nil)
	store := activity.Recording(db, hub)
	ctx := context.Background()
	acct, err := store.EnsureAccount(ctx, metadata.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	web := metadata.Sandbox{ID: "00000000000000a1", AccountID: acct.ID, Name: "web", Image: "busybox", State: metadata.SandboxStopped}
	other := metadata.Sandbox{ID: "00000000000000b2", AccountID: acct.ID, Name: "other", Image: "busybox", State: metadata.SandboxRunning}
	for _, sb := range []metadata.Sandbox{web, other} {
		if err := store.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(store.SetSandboxState(ctx, web.ID, metadata.SandboxRunning))
	must(store.SetSandboxState(ctx, web.ID, metadata.SandboxRunning))
	if _, err := store.CreateCheckpoint(ctx, metadata.Checkpoint{ID: "0000000000000c01", AccountID: acct.ID, SandboxID: web.ID, SandboxName: "web", Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "busybox"}); err != nil {
		t.Fatal(err)
	}
	must(store.SetLastOOMKill(ctx, web.ID, "pid 10 (awk)", time.Now()))
	must(store.SetSandboxCrashed(ctx, web.ID, "runsc-sandbox exited", time.Now()))
	if err := store.SetSandboxState(ctx, "ffffffffffffffff", metadata.SandboxStopped); err == nil {
		t.Fatal("state of an unknown sandbox set")
	}
	must(store.DeleteSandbox(ctx, web.ID))

	evs, _ := hub.Since(web.ID, 0)
	want := []string{"created", "state:stopped", "state:running", "checkpoint", "oom_kill", "crashed", "state:crashed", "deleted"}
	if got := types(evs); !same(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if evs[3].Checkpoint != "v0" || evs[3].What != "manual" || evs[4].What != "pid 10 (awk)" || evs[5].What != "runsc-sandbox exited" {
		t.Errorf("details: %+v", evs)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq || evs[i].Time.IsZero() || evs[i].Sandbox != web.ID {
			t.Errorf("event %d: %+v after %+v", i, evs[i], evs[i-1])
		}
	}
	if got, _ := hub.Since(other.ID, 0); !same(types(got), []string{"created", "state:running"}) {
		t.Errorf("the other sandbox's stream: %v", types(got))
	}
	if got, _ := hub.Since(web.ID, evs[5].Seq); !same(types(got), []string{"state:crashed", "deleted"}) {
		t.Errorf("since %d: %v", evs[5].Seq, types(got))
	}
}

// Follow hands over what is kept, then each new event, and ends at the
// sandbox's deleted event, at ctx's end, or at fn's error.
func TestFollow(t *testing.T) {
	hub := activity.NewHub(nil)
	hub.Publish(api.SandboxActivity{Sandbox: "a", Type: api.ActivityState, State: "running"})
	got := make(chan api.SandboxActivity, 10)
	done := make(chan error, 1)
	go func() {
		done <- hub.Follow(context.Background(), "a", 0, func(ev api.SandboxActivity) error { got <- ev; return nil })
	}()
	if ev := <-got; ev.State != "running" {
		t.Fatalf("first: %+v", ev)
	}
	hub.Publish(api.SandboxActivity{Sandbox: "b", Type: api.ActivityState, State: "stopped"})
	hub.Publish(api.SandboxActivity{Sandbox: "a", Type: api.ActivityOOMKill, What: "x"})
	if ev := <-got; ev.Type != api.ActivityOOMKill {
		t.Fatalf("second: %+v (another sandbox's?)", ev)
	}
	hub.Publish(api.SandboxActivity{Sandbox: "a", Type: api.ActivityDeleted})
	if ev := <-got; ev.Type != api.ActivityDeleted {
		t.Fatalf("third: %+v", ev)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Follow ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not end at the deleted event")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- hub.Follow(ctx, "c", 0, func(api.SandboxActivity) error { return nil }) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow after cancel: %v", err)
	}
	boom := errors.New("boom")
	if err := hub.Follow(context.Background(), "b", 0, func(api.SandboxActivity) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Follow with a failing fn: %v", err)
	}
}

// A stream keeps its last HubSize events; sequence numbers of a later
// hub (cairnd started again) are past those of an earlier one.
func TestHubKeepsTheLastEvents(t *testing.T) {
	hub := activity.NewHub(nil)
	for range activity.HubSize + 10 {
		hub.Publish(api.SandboxActivity{Sandbox: "a", Type: api.ActivityCheckpoint})
	}
	evs, _ := hub.Since("a", 0)
	if len(evs) != activity.HubSize || evs[len(evs)-1].Seq-evs[0].Seq != activity.HubSize-1 {
		t.Fatalf("kept %d events, %d to %d", len(evs), evs[0].Seq, evs[len(evs)-1].Seq)
	}
	time.Sleep(time.Millisecond)
	later := activity.NewHub(nil)
	later.Publish(api.SandboxActivity{Sandbox: "a", Type: api.ActivityCheckpoint})
	if got, _ := later.Since("a", evs[len(evs)-1].Seq); len(got) != 1 {
		t.Fatalf("a later run's events after the earlier's last seq: %+v", got)
	}
}
