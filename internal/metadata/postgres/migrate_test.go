package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, to read the SQLite schema

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/migrations"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/metadata/storetest"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

func latest(t *testing.T) int {
	t.Helper()
	ms, err := migrations.Load(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	return migrations.Latest(ms)
}

func rawDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// versions returns schema_migrations' versions, in order, and how many
// distinct applied_at times they have.
func versions(t *testing.T, db *sql.DB) (vs []int, applied map[time.Time]bool) {
	t.Helper()
	rows, err := db.Query(`SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	applied = map[time.Time]bool{}
	for rows.Next() {
		var (
			v  int
			at time.Time
		)
		if err := rows.Scan(&v, &at); err != nil {
			t.Fatal(err)
		}
		vs, applied[at.UTC()] = append(vs, v), true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs, applied
}

// TestConcurrentOpensMigrateOnce starts several stores on one new database
// at once, as hosts starting together do: each opens, and the migrations
// are applied once, by one of them.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	url := pgtest.New(t)
	const hosts = 6
	var wg sync.WaitGroup
	errs := make([]error, hosts)
	for i := range hosts {
		wg.Go(func() {
			// Each host's clock is its own: applied_at tells who migrated.
			at := time.Date(2030, 1, 1, 0, 0, i, 0, time.UTC)
			s, err := Open(context.Background(), url, func() time.Time { return at })
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("host %d: %v", i, err)
		}
	}
	vs, applied := versions(t, rawDB(t, url))
	if len(vs) != latest(t) || vs[0] != 1 || vs[len(vs)-1] != latest(t) {
		t.Errorf("schema_migrations has versions %v, want 1…%d once each", vs, latest(t))
	}
	if len(applied) != 1 {
		t.Errorf("migrations applied at %d different times, want 1 (one host migrates)", len(applied))
	}
}

func TestReopenIsNoOp(t *testing.T) {
	url := pgtest.New(t)
	clock := storetest.NewClock()
	for range 3 {
		s, err := Open(context.Background(), url, clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		clock.Advance(time.Hour)
	}
	vs, applied := versions(t, rawDB(t, url))
	if len(vs) != latest(t) {
		t.Errorf("versions %v, want %d", vs, latest(t))
	}
	if want := normTime(storetest.NewClock().Now()); len(applied) != 1 || !applied[want] {
		t.Errorf("applied at %v, want only the first Open's %v", applied, want)
	}
}

func TestNewerSchemaFailsOpen(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	s, err := Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.EnsureAccount(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	newer := latest(t) + 1
	db := rawDB(t, url)
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())`, newer); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, url, nil)
	if err == nil {
		s2.Close()
		t.Fatal("Open of a database from a newer cairnd succeeded")
	}
	if !errors.Is(err, metadata.ErrSchemaTooNew) {
		t.Errorf("err = %v, want ErrSchemaTooNew", err)
	}
	for _, want := range []string{fmt.Sprintf("version is %d", newer), "upgrade cairnd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if vs, _ := versions(t, db); vs[len(vs)-1] != newer {
		t.Errorf("versions after the failed Open: %v", vs)
	}
	var name string
	if err := db.QueryRow(`SELECT name FROM accounts WHERE id = $1`, a.ID).Scan(&name); err != nil || name != "alice" {
		t.Errorf("account after the failed Open: %q, %v", name, err)
	}
}

// TestMigrationsAreAtomic applies a set whose second migration fails: the
// first must be rolled back with it, and nothing recorded.
func TestMigrationsAreAtomic(t *testing.T) {
	db := rawDB(t, pgtest.New(t))
	ctx := context.Background()
	ms := []migrations.Migration{
		{Version: 1, Name: "good", SQL: "CREATE TABLE one (x INTEGER); CREATE TABLE two (y INTEGER);"},
		{Version: 2, Name: "bad", SQL: "CREATE TABLE three (z INTEGER); THIS IS NOT SQL;"},
	}
	err := applyMigrations(ctx, db, ms, time.Now)
	if err == nil || !strings.Contains(err.Error(), "0002_bad") {
		t.Fatalf("applyMigrations = %v, want an error naming 0002_bad", err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tables left after a failed migration, want none", n)
	}
	ms[1].SQL = "CREATE TABLE three (z INTEGER);"
	if err := applyMigrations(ctx, db, ms, time.Now); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"one", "two", "three"} {
		if _, err := db.Exec(`INSERT INTO ` + table + ` VALUES (1)`); err != nil {
			t.Errorf("table %s: %v", table, err)
		}
	}
	if vs, _ := versions(t, db); len(vs) != 2 {
		t.Errorf("recorded %v, want versions 1 and 2", vs)
	}
}

// column is what TestSchemaMatchesSQLite compares of a column.
type column struct {
	kind    string // integer, real, text, or time (TEXT in SQLite, TIMESTAMPTZ here)
	notNull bool
	dflt    string // normalized
}

// TestSchemaMatchesSQLite migrates a SQLite database and a PostgreSQL one
// to the latest version and compares them: the same tables and indexes,
// the same columns with the same types (as the dialects map them),
// nullability and defaults. Version N must mean the same schema in both.
func TestSchemaMatchesSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	ls, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls.Close()
	lite, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	url := pgtest.New(t)
	ps, err := Open(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps.Close()
	pg := rawDB(t, url)

	want := sqliteSchema(t, lite)
	got := postgresSchema(t, pg)
	t.Logf("compared %s", keys(want))
	if w, g := keys(want), keys(got); w != g {
		t.Errorf("tables and indexes:\n sqlite   %s\n postgres %s", w, g)
	}
	for table, cols := range want {
		for name, c := range cols {
			if pc, ok := got[table][name]; !ok {
				t.Errorf("%s.%s: not in PostgreSQL", table, name)
			} else if pc != c {
				t.Errorf("%s.%s: PostgreSQL %+v, SQLite %+v", table, name, pc, c)
			}
		}
		for name := range got[table] {
			if _, ok := cols[name]; !ok {
				t.Errorf("%s.%s: not in SQLite", table, name)
			}
		}
	}
}

func keys(m map[string]map[string]column) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

// timeColumn tells the columns that hold times, TEXT in SQLite.
var timeColumn = regexp.MustCompile(`(_at|^at)$`)

// sqliteSchema returns table -> column -> column, and each explicit index
// as an entry "index:NAME" with no columns.
func sqliteSchema(t *testing.T, db *sql.DB) map[string]map[string]column {
	t.Helper()
	out := map[string]map[string]column{}
	rows, err := db.Query(`SELECT type, name FROM sqlite_schema
		WHERE name NOT LIKE 'sqlite_%' AND (type = 'table' OR (type = 'index' AND sql IS NOT NULL))`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var kind, name string
		if err := rows.Scan(&kind, &name); err != nil {
			t.Fatal(err)
		}
		if kind == "index" {
			out["index:"+name] = map[string]column{}
		} else {
			tables = append(tables, name)
		}
	}
	rows.Close()
	for _, table := range tables {
		out[table] = map[string]column{}
		rows, err := db.Query(`SELECT name, type, "notnull", COALESCE(dflt_value, ''), pk FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var (
				name, typ, dflt string
				notNull         bool
				pk              int
			)
			if err := rows.Scan(&name, &typ, &notNull, &dflt, &pk); err != nil {
				t.Fatal(err)
			}
			kind := strings.ToLower(typ)
			if kind == "text" && timeColumn.MatchString(name) {
				kind = "time"
			}
			out[table][name] = column{kind: kind, notNull: notNull || pk > 0, dflt: dflt}
		}
		rows.Close()
	}
	return out
}

// postgresSchema returns what sqliteSchema does, with PostgreSQL's types
// mapped to SQLite's: BIGINT, INTEGER and BOOLEAN (0/1 in SQLite) are
// integer, DOUBLE PRECISION is real, TIMESTAMPTZ is time. Indexes that
// back a constraint (…_pkey, …_key) are SQLite's implicit ones.
func postgresSchema(t *testing.T, db *sql.DB) map[string]map[string]column {
	t.Helper()
	out := map[string]map[string]column{}
	rows, err := db.Query(`SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()
		AND indexname NOT LIKE '%\_pkey' AND indexname NOT LIKE '%\_key'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		out["index:"+name] = map[string]column{}
	}
	rows.Close()
	rows, err = db.Query(`SELECT table_name, column_name, data_type, is_nullable = 'NO', COALESCE(column_default, '')
		FROM information_schema.columns WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cast := regexp.MustCompile(`::[a-z ]+$`)
	for rows.Next() {
		var (
			table, name, typ, dflt string
			notNull                bool
		)
		if err := rows.Scan(&table, &name, &typ, &notNull, &dflt); err != nil {
			t.Fatal(err)
		}
		kind := map[string]string{"bigint": "integer", "integer": "integer", "boolean": "integer",
			"double precision": "real", "text": "text", "timestamp with time zone": "time"}[typ]
		if kind == "" {
			kind = typ
		}
		dflt = cast.ReplaceAllString(dflt, "")
		if b, ok := map[string]string{"false": "0", "true": "1"}[dflt]; ok {
			dflt = b
		}
		if out[table] == nil {
			out[table] = map[string]column{}
		}
		out[table][name] = column{kind: kind, notNull: notNull, dflt: dflt}
	}
	return out
}

// TestConstraintsMatchSQLite compares the constraints of the two schemas
// at the latest version: primary keys, unique constraints and indexes
// (partial or not), foreign keys with what deleting the referred row
// does, and how many CHECKs each table has.
func TestConstraintsMatchSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata.db")
	ls, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls.Close()
	lite, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	url := pgtest.New(t)
	ps, err := Open(context.Background(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps.Close()

	want, got := sqliteKeys(t, lite), postgresKeys(t, rawDB(t, url))
	t.Logf("compared %d keys", len(want))
	for k := range want {
		if !got[k] {
			t.Errorf("SQLite has %s, PostgreSQL not", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("PostgreSQL has %s, SQLite not", k)
		}
	}
}

// queryStrings runs q and returns its rows, every column as text.
func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		row := make([]string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// boolCheck matches the CHECK of a SQLite column that holds a boolean.
var boolCheck = regexp.MustCompile(`CHECK \(\w+ IN \(0, 1\)\)`)

func sqliteKeys(t *testing.T, db *sql.DB) map[string]bool {
	out := map[string]bool{}
	for _, tr := range queryStrings(t, db, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`) {
		table := tr[0]
		var pk []string
		for _, c := range queryStrings(t, db, `SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk`, table) {
			pk = append(pk, c[0])
		}
		out[fmt.Sprintf("primary key %s(%s)", table, strings.Join(pk, ","))] = true
		for _, ix := range queryStrings(t, db, `SELECT name, origin, partial FROM pragma_index_list(?) WHERE "unique" = 1`, table) {
			if ix[1] == "pk" {
				continue
			}
			var cols []string
			for _, c := range queryStrings(t, db, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, ix[0]) {
				cols = append(cols, c[0])
			}
			out[fmt.Sprintf("unique %s(%s) partial=%s", table, strings.Join(cols, ","), ix[2])] = true
		}
		// CHECKs, counted: those that keep an INTEGER 0 or 1 are
		// PostgreSQL's BOOLEAN type.
		create := queryStrings(t, db, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?`, table)[0][0]
		checks := strings.Count(create, "CHECK (") - len(boolCheck.FindAllString(create, -1))
		out[fmt.Sprintf("%d checks on %s", checks, table)] = true
		for _, fk := range queryStrings(t, db, `SELECT "from", "table", "to", on_delete FROM pragma_foreign_key_list(?)`, table) {
			out[fmt.Sprintf("foreign key %s.%s -> %s.%s on delete %s", table, fk[0], fk[1], fk[2], strings.ToLower(fk[3]))] = true
		}
	}
	return out
}

func postgresKeys(t *testing.T, db *sql.DB) map[string]bool {
	out := map[string]bool{}
	for _, ix := range queryStrings(t, db, `SELECT t.relname, ix.indisprimary::text,
		CASE WHEN ix.indpred IS NULL THEN '0' ELSE '1' END,
		array_to_string(ARRAY(SELECT a.attname FROM unnest(ix.indkey::int2[]) WITH ORDINALITY k(attnum, n)
			JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.n), ',')
		FROM pg_index ix JOIN pg_class t ON t.oid = ix.indrelid JOIN pg_namespace ns ON ns.oid = t.relnamespace
		WHERE ns.nspname = current_schema() AND ix.indisunique`) {
		if ix[1] == "true" {
			out[fmt.Sprintf("primary key %s(%s)", ix[0], ix[3])] = true
		} else {
			out[fmt.Sprintf("unique %s(%s) partial=%s", ix[0], ix[3], ix[2])] = true
		}
	}
	for _, c := range queryStrings(t, db, `SELECT t.relname, COUNT(c.oid)::text FROM pg_class t
		JOIN pg_namespace ns ON ns.oid = t.relnamespace
		LEFT JOIN pg_constraint c ON c.conrelid = t.oid AND c.contype = 'c'
		WHERE ns.nspname = current_schema() AND t.relkind = 'r' GROUP BY t.relname`) {
		out[fmt.Sprintf("%s checks on %s", c[1], c[0])] = true
	}
	onDelete := map[string]string{"a": "no action", "r": "restrict", "c": "cascade", "n": "set null", "d": "set default"}
	for _, fk := range queryStrings(t, db, `SELECT cl.relname, a.attname, rf.relname, ra.attname, c.confdeltype::text
		FROM pg_constraint c
		JOIN pg_class cl ON cl.oid = c.conrelid JOIN pg_class rf ON rf.oid = c.confrelid
		JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
		JOIN pg_attribute ra ON ra.attrelid = c.confrelid AND ra.attnum = c.confkey[1]
		JOIN pg_namespace ns ON ns.oid = cl.relnamespace
		WHERE c.contype = 'f' AND ns.nspname = current_schema()`) {
		out[fmt.Sprintf("foreign key %s.%s -> %s.%s on delete %s", fk[0], fk[1], fk[2], fk[3], onDelete[fk[4]])] = true
	}
	return out
}
