package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Published ports and port tokens (schema version 15).

// portsOf returns the sandbox's ports as "port:public|private" strings,
// checking that each is the sandbox's and in UTC.
func portsOf(t *testing.T, s metadata.Store, sandboxID string) string {
	t.Helper()
	ps, err := s.Ports(context.Background(), sandboxID)
	if err != nil {
		t.Fatalf("Ports(%s): %v", sandboxID, err)
	}
	if ps == nil {
		t.Errorf("Ports(%s) = nil, want an empty list", sandboxID)
	}
	var out []string
	for _, p := range ps {
		checkUTC(t, "Ports", p.CreatedAt)
		if p.SandboxID != sandboxID {
			t.Errorf("Ports(%s) lists a port of %s", sandboxID, p.SandboxID)
		}
		access := "private"
		if p.Public {
			access = "public"
		}
		out = append(out, fmt.Sprintf("%d:%s", p.Port, access))
	}
	return fmt.Sprint(out)
}

func testPublishedPorts(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now) // closed by hand, then opened again
	a := ensureAccount(t, s, "alice")
	web := newSandbox("0000000000000001", a.ID, "web")
	other := newSandbox("0000000000000002", a.ID, "other")
	create(t, s, web)
	create(t, s, other)

	if got := portsOf(t, s, web.ID); got != "[]" {
		t.Errorf("ports of a new sandbox = %s", got)
	}
	first, err := s.PublishPort(ctx, metadata.PublishedPort{SandboxID: web.ID, Port: 8080})
	if err != nil {
		t.Fatalf("PublishPort: %v", err)
	}
	if first.Port != 8080 || first.Public || first.SandboxID != web.ID || !first.CreatedAt.Equal(stored(clock.Now())) {
		t.Errorf("PublishPort returned %+v, want port 8080, private, created now", first)
	}
	checkUTC(t, "PublishPort", first.CreatedAt)
	for _, port := range []int{65535, 1, 443} {
		if _, err := s.PublishPort(ctx, metadata.PublishedPort{SandboxID: web.ID, Port: port, Public: port == 443}); err != nil {
			t.Fatalf("PublishPort(%d): %v", port, err)
		}
	}
	if got, want := portsOf(t, s, web.ID), "[1:private 443:public 8080:private 65535:private]"; got != want {
		t.Errorf("ports = %s, want %s (by port number)", got, want)
	}

	// Publishing again changes public/private and keeps when it was first
	// published.
	clock.Advance(time.Hour)
	again, err := s.PublishPort(ctx, metadata.PublishedPort{SandboxID: web.ID, Port: 8080, Public: true})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Public || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Errorf("publishing again returned %+v, want public with CreatedAt %v", again, first.CreatedAt)
	}
	got, err := s.Port(ctx, web.ID, 8080)
	if err != nil || got != again {
		t.Errorf("Port(8080) = %+v, %v; want %+v", got, err, again)
	}
	if got := portsOf(t, s, other.ID); got != "[]" {
		t.Errorf("the other sandbox's ports = %s", got)
	}

	// Invalid and unknown.
	for _, p := range []metadata.PublishedPort{
		{SandboxID: web.ID, Port: 0}, {SandboxID: web.ID, Port: 65536}, {SandboxID: web.ID, Port: -1}, {Port: 80},
	} {
		if _, err := s.PublishPort(ctx, p); err == nil {
			t.Errorf("PublishPort(%+v) succeeded", p)
		}
	}
	_, err = s.PublishPort(ctx, metadata.PublishedPort{SandboxID: "ffffffffffffffff", Port: 80})
	wantErr(t, "PublishPort(unknown sandbox)", err, metadata.ErrNotFound)
	_, err = s.Port(ctx, web.ID, 9999)
	wantErr(t, "Port(unpublished)", err, metadata.ErrNotFound)
	_, err = s.Port(ctx, other.ID, 8080)
	wantErr(t, "Port(of another sandbox)", err, metadata.ErrNotFound)

	// Unpublish.
	if err := s.UnpublishPort(ctx, web.ID, 1); err != nil {
		t.Fatalf("UnpublishPort: %v", err)
	}
	wantErr(t, "UnpublishPort again", s.UnpublishPort(ctx, web.ID, 1), metadata.ErrNotFound)
	wantErr(t, "UnpublishPort(other sandbox)", s.UnpublishPort(ctx, other.ID, 8080), metadata.ErrNotFound)
	wantErr(t, "UnpublishPort(unknown sandbox)", s.UnpublishPort(ctx, "ffffffffffffffff", 8080), metadata.ErrNotFound)
	if got, want := portsOf(t, s, web.ID), "[443:public 8080:public 65535:private]"; got != want {
		t.Errorf("ports after unpublish = %s, want %s", got, want)
	}

	// They persist.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	if got, want := portsOf(t, s, web.ID), "[443:public 8080:public 65535:private]"; got != want {
		t.Errorf("ports after reopening = %s, want %s", got, want)
	}

	// Deleting the sandbox deletes its ports; a new sandbox of the same
	// name starts with none.
	if err := s.DeleteSandbox(ctx, web.ID); err != nil {
		t.Fatal(err)
	}
	if got := portsOf(t, s, web.ID); got != "[]" {
		t.Errorf("ports of a deleted sandbox = %s", got)
	}
	create(t, s, newSandbox("0000000000000003", a.ID, "web"))
	if got := portsOf(t, s, "0000000000000003"); got != "[]" {
		t.Errorf("ports of a new sandbox with a deleted one's name = %s", got)
	}
}

func testCopyPorts(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s, clock := openStore(t, open)
	a := ensureAccount(t, s, "alice")
	src := newSandbox("0000000000000001", a.ID, "src")
	kid := newSandbox("0000000000000002", a.ID, "kid")
	create(t, s, src)
	create(t, s, kid)
	for _, p := range []metadata.PublishedPort{
		{SandboxID: src.ID, Port: 80, Public: true}, {SandboxID: src.ID, Port: 5432},
		{SandboxID: kid.ID, Port: 80}, {SandboxID: kid.ID, Port: 9000, Public: true},
	} {
		if _, err := s.PublishPort(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	if err := s.CopyPorts(ctx, src.ID, kid.ID); err != nil {
		t.Fatalf("CopyPorts: %v", err)
	}
	if got, want := portsOf(t, s, kid.ID), "[80:public 5432:private 9000:public]"; got != want {
		t.Errorf("ports of the copy = %s, want %s", got, want)
	}
	if p, err := s.Port(ctx, kid.ID, 5432); err != nil || !p.CreatedAt.Equal(stored(clock.Now())) {
		t.Errorf("copied port = %+v, %v; want created now", p, err)
	}
	if got, want := portsOf(t, s, src.ID), "[80:public 5432:private]"; got != want {
		t.Errorf("ports of the source = %s, want %s", got, want)
	}
	// The copies are the copy's own.
	if err := s.UnpublishPort(ctx, kid.ID, 80); err != nil {
		t.Fatal(err)
	}
	if got, want := portsOf(t, s, src.ID), "[80:public 5432:private]"; got != want {
		t.Errorf("ports of the source after the copy's change = %s, want %s", got, want)
	}
	// A source that is gone copies nothing; a target that is not is
	// ErrNotFound.
	if err := s.CopyPorts(ctx, "ffffffffffffffff", kid.ID); err != nil {
		t.Errorf("CopyPorts from a deleted sandbox: %v", err)
	}
	wantErr(t, "CopyPorts(to an unknown sandbox)", s.CopyPorts(ctx, src.ID, "ffffffffffffffff"), metadata.ErrNotFound)
}

func testPortTokens(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now) // closed by hand, then opened again
	a := ensureAccount(t, s, "alice")
	b := ensureAccount(t, s, "bob")

	_, err := s.PortToken(ctx, a.ID)
	wantErr(t, "PortToken before any", err, metadata.ErrNotFound)

	// Concurrent first needs agree on one token.
	var wg sync.WaitGroup
	got := make([]string, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.EnsurePortToken(ctx, a.ID, fmt.Sprintf("candidate-%d", i))
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatalf("EnsurePortToken: %v", errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("concurrent EnsurePortToken returned %q and %q", got[0], got[i])
		}
	}
	if tok, err := s.PortToken(ctx, a.ID); err != nil || tok != got[0] {
		t.Errorf("PortToken = %q, %v; want %q", tok, err, got[0])
	}
	if tok, err := s.EnsurePortToken(ctx, a.ID, "another"); err != nil || tok != got[0] {
		t.Errorf("EnsurePortToken with a token stored = %q, %v; want %q", tok, err, got[0])
	}

	// A rotation replaces it at once; the other account's stays.
	if _, err := s.EnsurePortToken(ctx, b.ID, "bob-token"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := s.SetPortToken(ctx, a.ID, "rotated"); err != nil {
		t.Fatalf("SetPortToken: %v", err)
	}
	if tok, err := s.PortToken(ctx, a.ID); err != nil || tok != "rotated" {
		t.Errorf("PortToken after rotation = %q, %v", tok, err)
	}
	if tok, err := s.PortToken(ctx, b.ID); err != nil || tok != "bob-token" {
		t.Errorf("the other account's token = %q, %v", tok, err)
	}

	// Invalid and unknown.
	if _, err := s.EnsurePortToken(ctx, a.ID, ""); err == nil {
		t.Error("EnsurePortToken with an empty candidate succeeded")
	}
	if err := s.SetPortToken(ctx, a.ID, ""); err == nil {
		t.Error("SetPortToken with an empty token succeeded")
	}
	_, err = s.EnsurePortToken(ctx, 999, "x")
	wantErr(t, "EnsurePortToken(unknown account)", err, metadata.ErrNotFound)
	wantErr(t, "SetPortToken(unknown account)", s.SetPortToken(ctx, 999, "x"), metadata.ErrNotFound)

	// It persists.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	if tok, err := s.PortToken(ctx, a.ID); err != nil || tok != "rotated" {
		t.Errorf("PortToken after reopening = %q, %v", tok, err)
	}
}
