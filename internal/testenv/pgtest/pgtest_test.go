package pgtest

import (
	"context"
	"database/sql"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// TestNew checks that each database is new and empty, and reachable.
func TestNew(t *testing.T) {
	ctx := context.Background()
	var dbs []*sql.DB
	for range 2 {
		db, err := sql.Open("pgx", New(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs = append(dbs, db)
	}
	if _, err := dbs[0].ExecContext(ctx, `CREATE TABLE x (a INT)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := dbs[1].QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_tables WHERE tablename = 'x'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("a table of one test's database is in another's")
	}
	if Dir() == "" {
		t.Errorf("Dir() is empty while the server runs")
	}
}
