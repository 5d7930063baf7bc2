package offsite

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
)

// Each account gets its own service, made when first asked for; a
// deleted account's service stops and its default directory goes, never
// to come back, while a configured account's locations are left alone.
func TestSetForget(t *testing.T) {
	dataDir := t.TempDir()
	store, err := sqlite.Open(filepath.Join(dataDir, "cairn.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	alice, err := store.CreateAccount(ctx, "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := store.CreateAccount(ctx, "bob", 0)
	if err != nil {
		t.Fatal(err)
	}
	bobDir := t.TempDir()
	set, err := NewSet(SetConfig{Store: store, DataDir: dataDir, Accounts: map[string]Config{"bob": {Locations: []LocationConfig{
		{Name: "a", Dir: filepath.Join(bobDir, "a")}, {Name: "b", Dir: filepath.Join(bobDir, "b")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go set.Run(runCtx)

	a, b := set.For(alice.ID), set.For(bob.ID)
	if a == nil || b == nil || a == b || set.For(alice.ID) != a {
		t.Fatalf("services %p %p: want one of each account's, the same when asked again", a, b)
	}
	if got := a.cfg.Locations[0].Dir; got != filepath.Join(dataDir, "offsite", "account-"+itoa(alice.ID), "primary") {
		t.Fatalf("alice's primary location %s", got)
	}
	aliceDir := filepath.Join(dataDir, "offsite", "account-"+itoa(alice.ID))
	if err := os.MkdirAll(filepath.Join(aliceDir, "primary"), 0o700); err != nil {
		t.Fatal(err)
	}
	bobKeyDir := filepath.Join(dataDir, "offsite", "account-"+itoa(bob.ID))
	if err := os.MkdirAll(bobKeyDir, 0o700); err != nil {
		t.Fatal(err)
	}

	set.Forget(alice)
	set.Forget(bob)
	if _, err := os.Stat(aliceDir); !os.IsNotExist(err) {
		t.Errorf("alice's default directory after Forget: %v", err)
	}
	if _, err := os.Stat(bobDir); err != nil {
		t.Errorf("bob's configured locations were touched: %v", err)
	}
	set.Wake() // lists the accounts, which still has them: no service again
	if set.For(alice.ID) != nil || set.For(bob.ID) != nil {
		t.Error("a forgotten account got a service again")
	}
	if _, err := os.Stat(bobKeyDir); err != nil {
		t.Errorf("the directory of bob's key file (his config names locations of its own) went: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
