package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// testHosts: a registered host reads back as given with its start and
// heartbeat now; the first host takes the sandboxes and checkpoints that
// name none and a later one takes nothing; a name another host has is
// ErrConflict; registering again updates the row; Heartbeat moves
// HeartbeatAt alone and an unknown host is ErrNotFound; the list is by
// name; a sandbox made with a host keeps it.
func testHosts(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	a := ensureAccount(t, s, "alice")
	old := newSandbox("0000000000000001", a.ID, "old")
	create(t, s, old)
	ck := newCheckpoint("c00000000001", old)
	if _, err := s.CreateCheckpoint(ctx, ck); err != nil {
		t.Fatal(err)
	}
	if hs, err := s.ListHosts(ctx); err != nil || len(hs) != 0 {
		t.Fatalf("hosts of a new store = %v, %v", hs, err)
	}

	b := metadata.Host{ID: "hostb", Name: "b", APIAddress: "127.0.0.1:7002", TLSFingerprint: "fp-b", PeerKeyHash: "hash-b", Capacity: 4}
	got, err := s.RegisterHost(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now().UTC().Truncate(time.Microsecond)
	b.StartedAt, b.HeartbeatAt = now, now
	if got != b {
		t.Errorf("registered %+v, want %+v", got, b)
	}
	if sb := byID(t, s, old.ID); sb.HostID != "hostb" {
		t.Errorf("a sandbox of no host after the first host registered: host %q, want hostb", sb.HostID)
	}
	if c, err := s.CheckpointByID(ctx, ck.ID); err != nil || c.HostID != "hostb" {
		t.Errorf("a checkpoint of no host after the first host registered: %+v, %v", c.HostID, err)
	}

	made := newSandbox("0000000000000002", a.ID, "made")
	made.HostID = "hosta"
	create(t, s, made)
	clock.Advance(time.Minute)
	if _, err := s.RegisterHost(ctx, metadata.Host{ID: "hosta", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if sb := byID(t, s, made.ID); sb.HostID != "hosta" {
		t.Errorf("host of a sandbox made on hosta = %q", sb.HostID)
	}
	if sb := byID(t, s, old.ID); sb.HostID != "hostb" {
		t.Errorf("a second host took the first one's sandbox: %q", sb.HostID)
	}
	wantErr(t, "a taken host name", func() error {
		_, err := s.RegisterHost(ctx, metadata.Host{ID: "hostc", Name: "b"})
		return err
	}(), metadata.ErrConflict)
	if _, err := s.RegisterHost(ctx, metadata.Host{ID: "", Name: "x"}); err == nil {
		t.Error("a host without an id was registered")
	}

	clock.Advance(time.Minute)
	if err := s.Heartbeat(ctx, "hostb"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Heartbeat of an unknown host", s.Heartbeat(ctx, "nohost"), metadata.ErrNotFound)
	hs, err := s.ListHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[0].Name != "a" || hs[1].Name != "b" {
		t.Fatalf("hosts = %+v, want a, b", hs)
	}
	if beat := clock.Now().UTC().Truncate(time.Microsecond); !hs[1].HeartbeatAt.Equal(beat) || !hs[1].StartedAt.Equal(now) {
		t.Errorf("after a heartbeat: started %v heartbeat %v, want %v and %v", hs[1].StartedAt, hs[1].HeartbeatAt, now, beat)
	}

	// Registering again (a restart) updates the row in place.
	b2 := metadata.Host{ID: "hostb", Name: "b2", APIAddress: "127.0.0.1:7003", PeerKeyHash: "new"}
	if got, err := s.RegisterHost(ctx, b2); err != nil || got.Name != "b2" || got.APIAddress != b2.APIAddress || got.Capacity != 0 || got.TLSFingerprint != "" {
		t.Errorf("registered again: %+v, %v", got, err)
	}
}
