package hosts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/postgres"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// pgLocks adapts the store's locks, as cairnd does.
type pgLocks struct{ s *postgres.Store }

func (l pgLocks) TryLock(ctx context.Context, key int64) (Held, error) {
	h, err := l.s.TryLock(ctx, key)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// twoHosts registers hosts a and b on one new PostgreSQL database, each
// with a store of its own.
func twoHosts(t *testing.T) (a, b *Registry, sa, sb *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.New(t)
	var regs [2]*Registry
	var stores [2]*postgres.Store
	for i, name := range []string{"a", "b"} {
		s, err := postgres.Open(ctx, url, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		r, err := Register(ctx, Config{Store: s, Self: metadata.Host{ID: "id-" + name, Name: name, APIAddress: "127.0.0.1:1"}, Locks: pgLocks{s}})
		if err != nil {
			t.Fatal(err)
		}
		regs[i], stores[i] = r, s
	}
	return regs[0], regs[1], stores[0], stores[1]
}

// One leader at a time: the first to contend leads, the other does not;
// when the leader lets go (its cairnd ends), the other takes the lead at
// its next try.
func TestOneLeader(t *testing.T) {
	a, b, _, _ := twoHosts(t)
	ctx := context.Background()
	ha := a.contend(ctx, nil)
	if ha == nil || !a.Leader() {
		t.Fatal("the first host does not lead")
	}
	if hb := b.contend(ctx, nil); hb != nil || b.Leader() {
		t.Fatal("two leaders")
	}
	if again := a.contend(ctx, ha); again != ha || !a.Leader() {
		t.Fatal("the leader lost the lead while its lock holds")
	}
	ha.Release()
	if hb := b.contend(ctx, nil); hb == nil || !b.Leader() {
		t.Fatal("the other host did not take the lead after the leader let go")
	}
}

// An account's repository has one writer across hosts: b waits while a
// writes, and writes once a is done; another account is not held up.
func TestAccountWriterAcrossHosts(t *testing.T) {
	a, b, _, _ := twoHosts(t)
	ctx := context.Background()
	release, err := a.AccountWriter(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan func(), 1)
	go func() {
		r, err := b.AccountWriter(ctx, 1)
		if err != nil {
			t.Error(err)
			return
		}
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("two writers of one account at once")
	case <-time.After(500 * time.Millisecond):
	}
	other, err := b.AccountWriter(ctx, 2)
	if err != nil {
		t.Fatalf("another account's writer: %v", err)
	}
	other()
	release()
	select {
	case r := <-got:
		r()
	case <-time.After(5 * time.Second):
		t.Fatal("the second host did not get the writer lock after the first let go")
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	r1, _ := a.AccountWriter(ctx, 3)
	if _, err := b.AccountWriter(short, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a wait past its context: %v", err)
	}
	r1()
}

// Rows are a host's own: a sandbox row names its host; one naming none is
// the one host's with SQLite and nobody's with several hosts. A peer's
// proof is its key alone; a host's state is down once its heartbeat is
// older than DownAfter.
func TestMineProofsAndDown(t *testing.T) {
	a, b, _, _ := twoHosts(t)
	ctx := context.Background()
	if !a.Mine("id-a") || a.Mine("id-b") || a.Mine("") {
		t.Error("Mine with several hosts")
	}
	if _, err := b.VerifyPeer(ctx, "id-a", a.PeerKey()); err != nil {
		t.Errorf("a's own key: %v", err)
	}
	for _, bad := range [][2]string{{"id-a", b.PeerKey()}, {"id-a", ""}, {"id-x", a.PeerKey()}, {"", a.PeerKey()}} {
		if _, err := b.VerifyPeer(ctx, bad[0], bad[1]); err == nil {
			t.Errorf("proof %q accepted", bad)
		}
	}
	h, err := b.Host(ctx, "id-a")
	if err != nil {
		t.Fatal(err)
	}
	if !b.Up(h) {
		t.Error("a host just registered is down")
	}
	h.HeartbeatAt = time.Now().Add(-DownAfter - time.Second)
	if b.Up(h) {
		t.Error("a host with an old heartbeat is up")
	}

	s, err := sqlite.Open(filepath.Join(t.TempDir(), "cairn.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	one, err := Register(ctx, Config{Store: s, Self: metadata.Host{ID: "only", Name: "only"}})
	if err != nil {
		t.Fatal(err)
	}
	if !one.Mine("") || !one.Mine("only") || !one.Leader() || one.Shared() {
		t.Error("the one host of SQLite is not the owner of every row and the leader")
	}
	if name, down := one.Where("only"); name != "" || down {
		t.Errorf("SQLite names a sandbox's host: %q %v", name, down)
	}
}

// Placement: --on a host is that host (H01 for no such host), the least
// loaded host otherwise, this host for an image only it holds; a down
// host is H02.
func TestPlace(t *testing.T) {
	a, _, sa, _ := twoHosts(t)
	ctx := context.Background()
	acct, err := sa.EnsureAccount(ctx, metadata.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	for i, host := range []string{"id-a", "id-a"} {
		sb := metadata.Sandbox{ID: "000000000000000" + string(rune('1'+i)), AccountID: acct.ID, Name: "s" + string(rune('1'+i)),
			Image: "busybox", State: metadata.SandboxRunning, HostID: host}
		if err := sa.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	builtin := func(image string) bool { return image == "busybox" }
	fa := NewForwarder(a, sa, builtin)
	if got, err := fa.Place(ctx, "", "busybox"); err != nil || got != "id-b" {
		t.Errorf("place from a busy a: %q %v, want id-b", got, err)
	}
	if got, err := fa.Place(ctx, "", "pulled"); err != nil || got != "" {
		t.Errorf("place a pulled image: %q %v, want here", got, err)
	}
	if got, err := fa.Place(ctx, "a", "busybox"); err != nil || got != "" {
		t.Errorf("place on a from a: %q %v", got, err)
	}
	if _, err := fa.Place(ctx, "zz", "busybox"); errdefs.CodeOf(err) != api.CodeNoHost {
		t.Errorf("place on no host: %v", err)
	}
	hs, err := fa.List(ctx)
	if err != nil || len(hs) != 2 || hs[0].Running != 2 || hs[1].Running != 0 || !hs[0].This {
		t.Errorf("hosts: %+v %v", hs, err)
	}
	// A request forwarded to a host that is down is H02 before any dial.
	rec := httptest.NewRecorder()
	var failed error
	stale := metadata.Host{ID: "id-b", Name: "b", APIAddress: "127.0.0.1:1", HeartbeatAt: time.Now().Add(-time.Minute)}
	a.mu.Lock()
	a.hosts["id-b"], a.readAt = stale, time.Now()
	a.mu.Unlock()
	fa.Forward(rec, httptest.NewRequest("GET", "/v1/sandboxes/x", nil), "id-b", api.CallerToken, func(err error) { failed = err })
	if errdefs.CodeOf(failed) != api.CodeHostDown || rec.Code != http.StatusOK {
		t.Errorf("forward to a down host: %v (answer %d)", failed, rec.Code)
	}
}

// An evacuation's hosts: the lost host must be down and another (H03 for
// this host or one that is up, H01 for none); without --to its sandboxes
// are spread over the hosts that are up, the least loaded first, counting
// the ones placed before (this host first among equals); --to puts them
// all on one host, never on the lost one (H03).
func TestLostAndSpread(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	open := func(now func() time.Time) *postgres.Store {
		s, err := postgres.Open(ctx, url, now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	sa := open(time.Now)
	a, err := Register(ctx, Config{Store: sa, Self: metadata.Host{ID: "id-a", Name: "a", APIAddress: "127.0.0.1:1"}, Locks: pgLocks{sa}})
	if err != nil {
		t.Fatal(err)
	}
	sb := open(time.Now)
	if _, err := Register(ctx, Config{Store: sb, Self: metadata.Host{ID: "id-b", Name: "b", APIAddress: "127.0.0.1:2"}, Locks: pgLocks{sb}}); err != nil {
		t.Fatal(err)
	}
	sl := open(func() time.Time { return time.Now().Add(-time.Minute) }) // its last heartbeat a minute ago
	if _, err := sl.RegisterHost(ctx, metadata.Host{ID: "id-l", Name: "l", APIAddress: "127.0.0.1:3"}); err != nil {
		t.Fatal(err)
	}
	acct, err := sa.EnsureAccount(ctx, metadata.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	if err := sa.CreateSandbox(ctx, metadata.Sandbox{ID: "0000000000000001", AccountID: acct.ID, Name: "on-a",
		Image: "busybox", State: metadata.SandboxRunning, HostID: "id-a"}); err != nil {
		t.Fatal(err)
	}
	f := NewForwarder(a, sa, func(string) bool { return true })
	lost, err := f.Lost(ctx, "l")
	if err != nil || lost.ID != "id-l" {
		t.Fatalf("Lost(l): %+v %v", lost, err)
	}
	for name, code := range map[string]string{"a": api.CodeHostUp, "b": api.CodeHostUp, "zz": api.CodeNoHost} {
		if _, err := f.Lost(ctx, name); errdefs.CodeOf(err) != code {
			t.Errorf("Lost(%s): %v, want %s", name, err, code)
		}
	}
	got, err := f.Spread(ctx, lost, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range got {
		names = append(names, h.Name)
	}
	if fmt.Sprint(names) != "[b a b]" {
		t.Errorf("spread of 3 with a running one: %v, want [b a b]", names)
	}
	if got, err := f.Spread(ctx, lost, "b", 2); err != nil || len(got) != 2 || got[0].Name != "b" || got[1].Name != "b" {
		t.Errorf("spread --to b: %+v %v", got, err)
	}
	if _, err := f.Spread(ctx, lost, "l", 1); errdefs.CodeOf(err) != api.CodeHostUp {
		t.Errorf("spread --to the lost host: %v, want %s", err, api.CodeHostUp)
	}
	if _, err := f.Spread(ctx, lost, "zz", 1); errdefs.CodeOf(err) != api.CodeNoHost {
		t.Errorf("spread --to no host: %v, want %s", err, api.CodeNoHost)
	}
}
