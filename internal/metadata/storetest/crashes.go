package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Restart policies, crashes and OOM kills (schema version 9).

func testRestartPolicy(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	// "" at create stores the default.
	def := newSandbox("0000000000000001", a.ID, "def")
	def.Restart = ""
	create(t, s, def)
	if got := byID(t, s, def.ID); got.Restart != metadata.RestartOnFailure {
		t.Errorf("restart policy of a sandbox created without one = %q, want %q", got.Restart, metadata.RestartOnFailure)
	}
	// One given at create is kept.
	no := newSandbox("0000000000000002", a.ID, "no")
	no.Restart = metadata.RestartNo
	create(t, s, no)
	sameSandboxEverywhere(t, s, "created with restart no", byID(t, s, no.ID))
	if got := byID(t, s, no.ID); got.Restart != metadata.RestartNo {
		t.Errorf("restart policy = %q, want no", got.Restart)
	}
	// An unknown one is refused at create.
	bad := newSandbox("0000000000000003", a.ID, "bad")
	bad.Restart = "sometimes"
	if err := s.CreateSandbox(ctx, bad); err == nil {
		t.Errorf("CreateSandbox with restart policy %q succeeded", bad.Restart)
	}

	want := byID(t, s, no.ID)
	for _, p := range []metadata.RestartPolicy{metadata.RestartAlways, metadata.RestartOnFailure, metadata.RestartNo} {
		clock.Advance(time.Minute)
		if err := s.SetRestartPolicy(ctx, no.ID, p); err != nil {
			t.Fatalf("SetRestartPolicy(%s): %v", p, err)
		}
		want.Restart, want.UpdatedAt = p, stored(clock.Now())
		sameSandboxEverywhere(t, s, "after SetRestartPolicy("+string(p)+")", want)
	}
	for _, p := range []metadata.RestartPolicy{"", "sometimes", "No"} {
		if err := s.SetRestartPolicy(ctx, no.ID, p); err == nil {
			t.Errorf("SetRestartPolicy(%q) succeeded", p)
		}
	}
	sameSandbox(t, "after refused policies", byID(t, s, no.ID), want)
	wantErr(t, "SetRestartPolicy(unknown sandbox)", s.SetRestartPolicy(ctx, "ffffffffffffffff", metadata.RestartNo), metadata.ErrNotFound)
	sameSandbox(t, "the other sandbox", byID(t, s, def.ID), byID(t, s, def.ID))
}

func testSandboxCrashed(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	web := newSandbox("0000000000000001", a.ID, "web")
	web.State = metadata.SandboxRunning
	other := newSandbox("0000000000000002", a.ID, "other")
	create(t, s, web)
	create(t, s, other)
	want, otherWant := byID(t, s, web.ID), byID(t, s, other.ID)
	if want.LastCrash != (metadata.Event{}) {
		t.Errorf("a new sandbox has a last crash: %+v", want.LastCrash)
	}

	clock.Advance(time.Minute)
	at := clock.Now().Add(-time.Second)
	if err := s.SetSandboxCrashed(ctx, web.ID, "runsc-sandbox process 42 exited", at); err != nil {
		t.Fatal(err)
	}
	want.State, want.UpdatedAt = metadata.SandboxCrashed, stored(clock.Now())
	want.LastCrash = metadata.Event{What: "runsc-sandbox process 42 exited", At: stored(at)}
	sameSandboxEverywhere(t, s, "after SetSandboxCrashed", want)
	sameSandbox(t, "the other sandbox", byID(t, s, other.ID), otherWant)

	// Running again: the last crash stays.
	clock.Advance(time.Minute)
	if err := s.SetSandboxState(ctx, web.ID, metadata.SandboxRunning); err != nil {
		t.Fatal(err)
	}
	want.State, want.UpdatedAt = metadata.SandboxRunning, stored(clock.Now())
	sameSandboxEverywhere(t, s, "running again", want)

	// The state alone can be set to crashed too.
	if err := s.SetSandboxState(ctx, other.ID, metadata.SandboxCrashed); err != nil {
		t.Errorf("SetSandboxState(crashed): %v", err)
	}
	wantErr(t, "SetSandboxCrashed(unknown sandbox)", s.SetSandboxCrashed(ctx, "ffffffffffffffff", "x", at), metadata.ErrNotFound)

	// It survives a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, clock.Now)
	t.Cleanup(func() { s2.Close() })
	sameSandboxEverywhere(t, s2, "after reopen", want)
}

func testLastOOMKill(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	web := newSandbox("0000000000000001", a.ID, "web")
	create(t, s, web)
	want := byID(t, s, web.ID)

	for _, kill := range []string{"pid 42 (python3), 380 MiB", "pid 7 (dd), 301 MiB"} {
		clock.Advance(time.Minute)
		at := clock.Now()
		if err := s.SetLastOOMKill(ctx, web.ID, kill, at); err != nil {
			t.Fatal(err)
		}
		// UpdatedAt does not move: no setting changed.
		want.LastOOMKill = metadata.Event{What: kill, At: stored(at)}
		sameSandboxEverywhere(t, s, "after SetLastOOMKill", want)
	}
	wantErr(t, "SetLastOOMKill(unknown sandbox)", s.SetLastOOMKill(ctx, "ffffffffffffffff", "x", clock.Now()), metadata.ErrNotFound)
}
