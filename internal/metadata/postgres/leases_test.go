package postgres

import (
	"context"
	"database/sql"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

// TestLeaseWritesCommitAsynchronously checks the one durability
// difference: lease transactions commit with synchronous_commit off,
// every other one with the server's setting (on).
func TestLeaseWritesCommitAsynchronously(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.New(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	setting := func(run func(context.Context, func(*sql.Tx) error) error) (string, string) {
		var v, app string
		if err := run(ctx, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, `SELECT current_setting('synchronous_commit'), current_setting('application_name')`).Scan(&v, &app)
		}); err != nil {
			t.Fatal(err)
		}
		return v, app
	}
	if v, app := setting(s.leaseTx); v != "off" || app != "cairnd" {
		t.Errorf("in a lease transaction synchronous_commit = %q, application_name = %q; want off, cairnd", v, app)
	}
	if v, _ := setting(s.inTx); v != "on" {
		t.Errorf("in another transaction synchronous_commit = %q, want on", v)
	}
	if v, _ := setting(s.leaseTx); v != "off" {
		t.Errorf("again in a lease transaction: %q", v)
	}
	if v, _ := setting(s.inTx); v != "on" {
		t.Errorf("SET LOCAL outlived its transaction: synchronous_commit = %q", v)
	}
}
