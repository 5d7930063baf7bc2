// Package migrations holds the metadata schema as numbered SQL files, one
// directory per SQL dialect, embedded in the binary:
//
//	sqlite/0001_init.sql    postgres/0001_init.sql
//	sqlite/0002_….sql       postgres/0002_….sql
//
// Version N means the same change in every dialect, so a database's version
// says the same thing whichever engine holds it; a test keeps the
// directories in step. Files are never edited once released: a change to
// the schema is a new file with the next number.
//
// Each store applies the migrations its database lacks, in order, in one
// transaction, and records each in schema_migrations(version, applied_at).
// Pending tells it which ones, and refuses a database newer than the binary.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Dialect names a directory of migrations for one SQL engine.
type Dialect string

// Dialects with migrations.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Dialects lists every dialect, for tests that check they stay in step.
var Dialects = []Dialect{SQLite, Postgres}

// Migration is one numbered schema change.
type Migration struct {
	Version int    // 1, 2, 3… without gaps
	Name    string // from the file name: "init" for 0001_init.sql
	SQL     string // one or more statements, run in one transaction
}

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// Load returns the migrations of dialect d in version order.
func Load(d Dialect) ([]Migration, error) {
	ms, err := load(files, string(d))
	if err != nil {
		return nil, fmt.Errorf("migrations %s: %w", d, err)
	}
	return ms, nil
}

var fileName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// load reads dir/NNNN_name.sql from fsys and checks that the versions run
// 1, 2, 3… without gaps or duplicates.
func load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() {
			return nil, fmt.Errorf("unexpected directory %s", e.Name())
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("file %s: name is not NNNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1]) // four digits: cannot fail
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("version %04d_%s: expected %04d (versions must run 1, 2, 3… without gaps or duplicates)", m.Version, m.Name, i+1)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return ms, nil
}

// Latest returns the highest version in ms, 0 if ms is empty. ms must be in
// version order, as Load returns it.
func Latest(ms []Migration) int {
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// Pending returns the migrations of ms a database at version current still
// needs, in order. A database at a version newer than any in ms was written
// by a newer binary: Pending then fails with an error wrapping
// metadata.ErrSchemaTooNew.
func Pending(ms []Migration, current int) ([]Migration, error) {
	if latest := Latest(ms); current > latest {
		return nil, fmt.Errorf("database schema version is %d but this cairnd knows versions up to %d; "+
			"upgrade cairnd (never downgrade it over a migrated database): %w",
			current, latest, metadata.ErrSchemaTooNew)
	}
	var out []Migration
	for _, m := range ms {
		if m.Version > current {
			out = append(out, m)
		}
	}
	return out, nil
}
