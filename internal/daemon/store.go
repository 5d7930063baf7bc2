package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	"github.com/cairn-sandbox/cairn/internal/hosts"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/postgres"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
)

// The metadata stores cairnd can run on, chosen by Config.Database.
var (
	_ metadata.Store = (*sqlite.Store)(nil)
	_ metadata.Store = (*postgres.Store)(nil)
)

// checkDatabase checks Config.Database before anything is made: "" (SQLite
// in the data dir) or a postgres:// (postgresql://) URL.
func checkDatabase(database string) error {
	if database == "" {
		return nil
	}
	u, err := url.Parse(database)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("--database %q: want a postgres://USER@HOST/DB URL, or none for SQLite in the data dir", redact(database))
	}
	return nil
}

// openStore opens the metadata store Config.Database names: SQLite in
// dataDir/cairn.db when it is "", else the PostgreSQL database at that
// URL, which other hosts may share: locks are then its advisory locks
// (nil with SQLite: one host). closeStore closes it.
func openStore(ctx context.Context, database, dataDir string) (store metadata.Store, locks hosts.Locks, closeStore func() error, err error) {
	if err := checkDatabase(database); err != nil {
		return nil, nil, nil, err
	}
	if database == "" {
		s, err := sqlite.Open(filepath.Join(dataDir, "cairn.db"), time.Now)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("metadata: %w", err)
		}
		return s, nil, s.Close, nil
	}
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := postgres.Open(openCtx, database, time.Now)
	if err != nil {
		return nil, nil, nil, err
	}
	slog.Info("metadata on PostgreSQL", "database", redact(database))
	return s, pgLocks{s}, s.Close, nil
}

// pgLocks are PostgreSQL's advisory locks, for package hosts.
type pgLocks struct{ s *postgres.Store }

func (l pgLocks) TryLock(ctx context.Context, key int64) (hosts.Held, error) {
	h, err := l.s.TryLock(ctx, key)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// redact returns the URL without its password, for messages and logs.
func redact(database string) string {
	u, err := url.Parse(database)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}
