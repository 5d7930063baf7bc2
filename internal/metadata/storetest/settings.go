package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// testSandboxSettings: settings given at create read back as given (env
// in its order), a sandbox made without them has none, SetSandboxSettings
// replaces them whole and moves UpdatedAt, they persist, and an unknown
// sandbox is ErrNotFound.
func testSandboxSettings(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	a := ensureAccount(t, s, "alice")
	plain := newSandbox("0000000000000001", a.ID, "plain")
	create(t, s, plain)
	if got := byID(t, s, plain.ID).Settings; !got.Equal(metadata.SandboxSettings{}) {
		t.Errorf("settings of a sandbox made without = %+v", got)
	}
	web := newSandbox("0000000000000002", a.ID, "web")
	web.Settings = metadata.SandboxSettings{Env: []string{"B=2", "A=1=x"}, User: "app:app", Workdir: "/srv",
		Labels: map[string]string{"team": "ml", "tier": ""}}
	create(t, s, web)
	sameSandboxEverywhere(t, s, "created with settings", byID(t, s, web.ID))
	if got := byID(t, s, web.ID).Settings; !got.Equal(web.Settings) || got.Env[0] != "B=2" {
		t.Errorf("settings = %+v, want %+v", got, web.Settings)
	}

	clock.Advance(time.Minute)
	next := metadata.SandboxSettings{Env: []string{"C=3"}, Labels: map[string]string{"team": "web"}}
	if err := s.SetSandboxSettings(ctx, web.ID, next); err != nil {
		t.Fatal(err)
	}
	got := byID(t, s, web.ID)
	if !got.Settings.Equal(next) || got.Settings.User != "" || !got.UpdatedAt.Equal(clock.Now().UTC().Truncate(time.Microsecond)) {
		t.Errorf("after SetSandboxSettings: %+v updated %v", got.Settings, got.UpdatedAt)
	}
	if got := byID(t, s, plain.ID).Settings; !got.Equal(metadata.SandboxSettings{}) {
		t.Errorf("the other sandbox's settings changed: %+v", got)
	}
	wantErr(t, "SetSandboxSettings of an unknown sandbox", s.SetSandboxSettings(ctx, "00000000000000ff", next), metadata.ErrNotFound)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	if got := byID(t, s, web.ID).Settings; !got.Equal(next) {
		t.Errorf("after reopen: %+v", got)
	}
}
