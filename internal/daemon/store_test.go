package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/postgres"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestOpenStoreSQLiteByDefault(t *testing.T) {
	dir := t.TempDir()
	s, locks, closeStore, err := openStore(context.Background(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	if _, ok := s.(*sqlite.Store); !ok {
		t.Errorf("store is a %T, want *sqlite.Store", s)
	}
	if locks != nil {
		t.Errorf("SQLite has locks across hosts (%T): it is one host's", locks)
	}
	if _, err := os.Stat(filepath.Join(dir, "cairn.db")); err != nil {
		t.Errorf("no cairn.db in the data dir: %v", err)
	}
}

func TestCheckDatabase(t *testing.T) {
	for _, ok := range []string{"", "postgres://cairn@db.example/cairn", "postgresql://cairn:secret@10.0.0.5:5433/cairn?sslmode=require"} {
		if err := checkDatabase(ok); err != nil {
			t.Errorf("checkDatabase(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"mysql://x/y", "/var/lib/cairn/cairn.db", "sqlite:cairn.db", "postgres ://x"} {
		if err := checkDatabase(bad); err == nil {
			t.Errorf("checkDatabase(%q) succeeded", bad)
		}
	}
	err := checkDatabase("mysql://cairn:hunter2@db/cairn")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v shows the password", err)
	}
}

// TestOpenStorePostgres opens cairnd's store on a PostgreSQL database: it
// is migrated and works, a second host opens it too and sees the same
// rows, and the locks of the two are exclusive of each other.
func TestOpenStorePostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.New(t)
	s, locks, closeStore, err := openStore(ctx, url, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*postgres.Store); !ok {
		t.Errorf("store is a %T, want *postgres.Store", s)
	}
	if _, err := s.EnsureAccount(ctx, metadata.DefaultAccount); err != nil {
		t.Fatal(err)
	}

	s2, locks2, close2, err := openStore(ctx, url, t.TempDir())
	if err != nil {
		t.Fatalf("a second host's open: %v", err)
	}
	if a, err := s2.AccountByName(ctx, metadata.DefaultAccount); err != nil || a.Name != metadata.DefaultAccount {
		t.Errorf("the second host's account = %+v, %v", a, err)
	}
	held, err := locks.TryLock(ctx, 42)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locks2.TryLock(ctx, 42); !errors.Is(err, metadata.ErrConflict) {
		t.Errorf("the second host took a lock the first holds: %v", err)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	held2, err := locks2.TryLock(ctx, 42)
	if err != nil {
		t.Fatalf("the lock after its release: %v", err)
	}
	held2.Release()
	close2()

	if err := closeStore(); err != nil {
		t.Fatal(err)
	}
	s, _, closeStore, err = openStore(ctx, url, t.TempDir())
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	defer closeStore()
	if a, err := s.AccountByName(ctx, metadata.DefaultAccount); err != nil || a.Name != metadata.DefaultAccount {
		t.Errorf("account after reopen = %+v, %v", a, err)
	}
}
