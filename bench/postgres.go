package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

// pgDatabase is the database the postgres group's second cairnd keeps its
// metadata in.
const pgDatabase = "cairn_bench"

// benchPostgres measures a disk checkpoint's create on a cairnd whose
// metadata is in PostgreSQL (--database) against the bench's own cairnd on
// SQLite, in the same run, taking turns, with the same small sandbox on
// each; and counts the statements the checkpoints cost on PostgreSQL
// (pg_stat_statements). The server is Debian's PostgreSQL, private to the
// bench (a unix socket in a temporary directory), syncing its commits as
// a production server does; SQLite syncs its own as it always does.
func benchPostgres(ctx context.Context, e *env) error {
	srv, err := pgtest.Start(true)
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer srv.Stop()
	url, err := srv.Database(ctx, pgDatabase)
	if err != nil {
		return err
	}
	binDir := os.Getenv("CAIRN_BIN")
	if binDir == "" {
		binDir = "bin"
	}
	pg, err := startDaemon(ctx, binDir, e.d.runsc, "--database", url)
	if err != nil {
		return fmt.Errorf("cairnd on PostgreSQL: %w", err)
	}
	defer func() {
		if err := pg.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: postgres: cleanup:", err)
		}
	}()
	const name = "pgck"
	for _, c := range []*benchDaemon{e.d, pg} {
		if err := createQuiet(ctx, c.client, name); err != nil {
			return err
		}
		if _, err := execSh(ctx, c.client, name, "head -c 1048576 /dev/urandom > /root/data"); err != nil {
			return err
		}
	}
	defer deleteSandbox(context.WithoutCancel(ctx), e.c, name)

	checkpoint := func(d *benchDaemon) (time.Duration, error) {
		t0 := time.Now()
		op, err := d.client.CreateCheckpoint(ctx, name, api.CreateCheckpointRequest{Comment: "bench"})
		if err != nil {
			return 0, err
		}
		if _, err := d.client.WaitCheckpoint(ctx, op, nil); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	// One of each first, outside the timings: the first checkpoint of a
	// sandbox has no parent to compare with.
	for _, d := range []*benchDaemon{e.d, pg} {
		if _, err := checkpoint(d); err != nil {
			return err
		}
	}
	before, err := srv.Statements(ctx, pgDatabase)
	if err != nil {
		return fmt.Errorf("count statements: %w", err)
	}
	var onSQLite, onPG []time.Duration
	for range e.n {
		for _, d := range []*benchDaemon{e.d, pg} {
			took, err := checkpoint(d)
			if err != nil {
				return err
			}
			if d == pg {
				onPG = append(onPG, took)
			} else {
				onSQLite = append(onSQLite, took)
			}
		}
	}
	after, err := srv.Statements(ctx, pgDatabase)
	if err != nil {
		return fmt.Errorf("count statements: %w", err)
	}
	report("disk checkpoint create on PostgreSQL (cairnd --database postgres://…)", onPG, "the same on SQLite", onSQLite)
	fmt.Printf("      PostgreSQL statements per checkpoint: %.1f (%d checkpoints; cairnd's background loops in the same time included)\n",
		float64(after-before-1)/float64(len(onPG)), len(onPG))
	sp, _ := percentiles(onSQLite)
	pp, _ := percentiles(onPG)
	goal(pp-sp <= 5*time.Millisecond, "PostgreSQL adds %s at p50 to a checkpoint create (goal ≤ +5ms)", round(pp-sp))
	fmt.Println()
	return nil
}
