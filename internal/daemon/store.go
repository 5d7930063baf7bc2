package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

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
// URL, on which cairnd then holds postgres.DaemonLock so that no second
// cairnd runs on it. closeStore closes it (and lets go of the lock).
func openStore(ctx context.Context, database, dataDir string) (store metadata.Store, closeStore func() error, err error) {
	if err := checkDatabase(database); err != nil {
		return nil, nil, err
	}
	if database == "" {
		s, err := sqlite.Open(filepath.Join(dataDir, "cairn.db"), time.Now)
		if err != nil {
			return nil, nil, fmt.Errorf("metadata: %w", err)
		}
		return s, s.Close, nil
	}
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := postgres.Open(openCtx, database, time.Now)
	if err != nil {
		return nil, nil, err
	}
	release, err := s.HoldLock(openCtx, postgres.DaemonLock)
	if errors.Is(err, metadata.ErrConflict) {
		s.Close()
		return nil, nil, fmt.Errorf("another cairnd runs on the database %s (one cairnd per database until several hosts are supported): %w",
			redact(database), err)
	} else if err != nil {
		s.Close()
		return nil, nil, err
	}
	slog.Info("metadata on PostgreSQL", "database", redact(database))
	return s, func() error { return errors.Join(release(), s.Close()) }, nil
}

// redact returns the URL without its password, for messages and logs.
func redact(database string) string {
	u, err := url.Parse(database)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}
