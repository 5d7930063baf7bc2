package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

func testSandboxNetwork(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")

	// "" at create stores none (what sandboxes had before networking).
	def := newSandbox("0000000000000001", a.ID, "def")
	create(t, s, def)
	if got := byID(t, s, def.ID); got.Network.Mode != metadata.NetworkNone || got.Network.Allow != nil || got.Network.Deny != nil {
		t.Errorf("network of a sandbox created without one = %+v, want mode none and no rules", got.Network)
	}
	// Mode and rules given at create are kept, in their order.
	web := newSandbox("0000000000000002", a.ID, "web")
	web.Network = metadata.NetworkSettings{Mode: metadata.NetworkEgress, Allow: []string{"*.example.com", "10.0.0.0/8"}, Deny: []string{"0.0.0.0/0"}}
	create(t, s, web)
	sameSandboxEverywhere(t, s, "created with rules", byID(t, s, web.ID))
	if got := byID(t, s, web.ID); got.Network.Mode != metadata.NetworkEgress || len(got.Network.Allow) != 2 || got.Network.Allow[0] != "*.example.com" || got.Network.Deny[0] != "0.0.0.0/0" {
		t.Errorf("network = %+v, want what was given", got.Network)
	}
	bad := newSandbox("0000000000000003", a.ID, "bad")
	bad.Network.Mode = "bridge"
	if err := s.CreateSandbox(ctx, bad); err == nil {
		t.Errorf("CreateSandbox with network mode %q succeeded", bad.Network.Mode)
	}

	want := byID(t, s, web.ID)
	clock.Advance(time.Minute)
	n := metadata.NetworkSettings{Mode: metadata.NetworkNone, Deny: []string{"192.0.2.0/24"}}
	if err := s.SetSandboxNetwork(ctx, web.ID, n); err != nil {
		t.Fatal(err)
	}
	want.Network, want.UpdatedAt = n, stored(clock.Now())
	sameSandboxEverywhere(t, s, "after SetSandboxNetwork", want)
	if err := s.SetSandboxNetwork(ctx, web.ID, metadata.NetworkSettings{Mode: "bridge"}); err == nil {
		t.Error("SetSandboxNetwork with an unknown mode succeeded")
	}
	sameSandbox(t, "after a refused mode", byID(t, s, web.ID), want)
	wantErr(t, "SetSandboxNetwork(unknown sandbox)", s.SetSandboxNetwork(ctx, "ffffffffffffffff", n), metadata.ErrNotFound)
}
