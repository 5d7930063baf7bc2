package storetest

import (
	"context"
	"errors"
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

// testMoveSandbox: a sandbox moves from the host its row names to
// another with the checkpoint its disk was restored from, its saved
// session forgotten; a move from a host the row no longer names is
// ErrConflict and changes nothing; an unknown sandbox, or a checkpoint
// of another sandbox, is ErrNotFound.
func testMoveSandbox(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	clock := NewClock()
	s := open(t, clock.Now)
	t.Cleanup(func() { s.Close() })
	a := ensureAccount(t, s, "alice")
	sb := newSandbox("0000000000000001", a.ID, "web")
	sb.HostID = "hosta"
	create(t, s, sb)
	other := newSandbox("0000000000000002", a.ID, "other")
	other.HostID = "hosta"
	create(t, s, other)
	v0, v1 := newCheckpoint("c00000000001", sb), newCheckpoint("c00000000002", sb)
	theirs := newCheckpoint("c00000000003", other)
	for _, ck := range []metadata.Checkpoint{v0, v1, theirs} {
		if _, err := s.CreateCheckpoint(ctx, ck); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetResumeCheckpoint(ctx, sb.ID, v1.ID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := s.MoveSandbox(ctx, sb.ID, "hosta", "hostc", v0.ID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := byID(t, s, sb.ID)
	if got.HostID != "hostc" || got.CurrentCheckpoint != v0.ID || got.ResumeCheckpoint != "" || !got.UpdatedAt.Equal(clock.Now().UTC().Truncate(time.Microsecond)) {
		t.Errorf("after the move: host %q current %q resume %q updated %v", got.HostID, got.CurrentCheckpoint, got.ResumeCheckpoint, got.UpdatedAt)
	}
	if err := s.MoveSandbox(ctx, sb.ID, "hosta", "hostb", v1.ID, 0); !errors.Is(err, metadata.ErrConflict) {
		t.Errorf("a second move from the old host: %v, want ErrConflict", err)
	}
	if got := byID(t, s, sb.ID); got.HostID != "hostc" || got.CurrentCheckpoint != v0.ID {
		t.Errorf("a refused move changed the row: host %q current %q", got.HostID, got.CurrentCheckpoint)
	}
	if err := s.MoveSandbox(ctx, "00000000000000ff", "hosta", "hostc", v0.ID, 0); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("moving an unknown sandbox: %v, want ErrNotFound", err)
	}
	if err := s.MoveSandbox(ctx, other.ID, "hosta", "hostc", v1.ID, 0); !errors.Is(err, metadata.ErrNotFound) {
		t.Errorf("moving with another sandbox's checkpoint: %v, want ErrNotFound", err)
	}
	if got := byID(t, s, other.ID); got.HostID != "hosta" {
		t.Errorf("a refused move changed the other sandbox's host to %q", got.HostID)
	}
	// A host whose heartbeat is younger than downAfter is back: its
	// sandbox does not move; once the heartbeat is old enough, it does.
	if _, err := s.RegisterHost(ctx, metadata.Host{ID: "hostc", Name: "c"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	if err := s.MoveSandbox(ctx, sb.ID, "hostc", "hostd", v1.ID, 10*time.Second); !errors.Is(err, metadata.ErrConflict) {
		t.Errorf("moving from a host whose heartbeat is 5 s old (down after 10 s): %v, want ErrConflict", err)
	}
	if got := byID(t, s, sb.ID); got.HostID != "hostc" {
		t.Errorf("a refused move from a live host changed the row: host %q", got.HostID)
	}
	clock.Advance(10 * time.Second)
	if err := s.MoveSandbox(ctx, sb.ID, "hostc", "hostd", v1.ID, 10*time.Second); err != nil {
		t.Errorf("moving from a host whose heartbeat is 15 s old: %v", err)
	}
}
