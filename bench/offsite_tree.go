package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// The off-site group's source tree: 1 GiB of the kinds of data a sandbox's
// disk holds, written once into a btrfs subvolume (the live tree, of which
// each round backs up read-only snapshots).
const (
	treeSize    = 1 << 30
	textBudget  = 256 << 20 // Go's own sources, then generated log files
	goSrcBudget = 160 << 20
	binBudget   = 192 << 20 // ELF files from /usr/bin, /usr/sbin, /usr/lib
	maxBinary   = 32 << 20
	sqliteSize  = 128 << 20
	// The rest is random (incompressible) data: one large file and many
	// of 1-16 MiB.
	bigRandom = 128 << 20
)

// Kinds of files in the tree.
const (
	kindText   = "text"
	kindBinary = "binary"
	kindSQLite = "sqlite"
	kindRandom = "random"
)

var treeKinds = []string{kindText, kindBinary, kindSQLite, kindRandom}

// srcTree is the generated tree: its files by kind (paths relative to
// root, sorted) and their sizes.
type srcTree struct {
	root  string
	files map[string][]string
	bytes map[string]int64
}

func (t *srcTree) total() (files int, size int64) {
	for _, k := range treeKinds {
		files += len(t.files[k])
		size += t.bytes[k]
	}
	return files, size
}

func (t *srcTree) describe() string {
	var parts []string
	for _, k := range treeKinds {
		parts = append(parts, fmt.Sprintf("%s %d files %s", k, len(t.files[k]), mib(t.bytes[k])))
	}
	return strings.Join(parts, ", ")
}

func (t *srcTree) add(kind, rel string, size int64) {
	t.files[kind] = append(t.files[kind], rel)
	t.bytes[kind] += size
}

// makeTree writes the tree under root (the live subvolume). It is
// deterministic but for the files copied from this machine (Go's sources
// and its binaries).
func makeTree(ctx context.Context, root string) (*srcTree, error) {
	t := &srcTree{root: root, files: map[string][]string{}, bytes: map[string]int64{}}
	rng := rand.New(rand.NewPCG(1, 2))
	steps := []func(context.Context, *rand.Rand) error{t.copyGoSources, t.writeLogs, t.copyBinaries, t.writeSQLite, t.writeRandom}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := step(ctx, rng); err != nil {
			return nil, err
		}
	}
	for _, k := range treeKinds {
		slices.Sort(t.files[k])
	}
	// Written back now, not during a measurement.
	syscall.Sync()
	return t, nil
}

// copyGoSources copies the Go distribution's src directory: many small
// text files (with a few testdata binaries), up to goSrcBudget.
func (t *srcTree) copyGoSources(ctx context.Context, _ *rand.Rand) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if t.bytes[kindText] >= goSrcBudget {
			return fs.SkipAll
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		rel = filepath.Join("text", "go", rel)
		n, err := copyFile(p, filepath.Join(t.root, rel))
		if err != nil {
			return err
		}
		t.add(kindText, rel, n)
		return nil
	})
}

// writeLogs fills the text budget with generated log files of 4-64 KiB
// (compressible about 4×, unlike each other).
func (t *srcTree) writeLogs(_ context.Context, rng *rand.Rand) error {
	for i := 0; t.bytes[kindText] < textBudget; i++ {
		size := min(int64(4<<10+rng.IntN(60<<10)), textBudget-t.bytes[kindText])
		rel := filepath.Join("text", "logs", fmt.Sprintf("%03d", i/100), fmt.Sprintf("service-%05d.log", i))
		if err := writeFile(filepath.Join(t.root, rel), logText(rng, int(size))); err != nil {
			return err
		}
		t.add(kindText, rel, size)
	}
	return nil
}

var (
	logLevels   = []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	logServices = []string{"api", "scheduler", "store", "auth", "billing", "gateway", "indexer"}
	logWords    = strings.Fields("request handled started finished user sandbox checkpoint restore upload retry timeout cache miss hit queue worker connection closed opened token refreshed invalid latency bytes rows")
	logPaths    = []string{"/v1/sandboxes", "/v1/checkpoints", "/v1/operations", "/healthz", "/v1/exec", "/v1/files"}
)

// logText returns size bytes of log lines.
func logText(rng *rand.Rand, size int) []byte {
	var b bytes.Buffer
	b.Grow(size + 256)
	ts := int64(1_790_000_000) + rng.Int64N(10_000_000)
	for b.Len() < size {
		ts += rng.Int64N(3)
		fmt.Fprintf(&b, "%d.%03d %-5s service=%s req=%016x path=%s/%x status=%d dur=%dms",
			ts, rng.IntN(1000), logLevels[rng.IntN(len(logLevels))], logServices[rng.IntN(len(logServices))],
			rng.Uint64(), logPaths[rng.IntN(len(logPaths))], rng.Uint32(), []int{200, 200, 200, 201, 204, 404, 500}[rng.IntN(7)], rng.IntN(900))
		for range 2 + rng.IntN(6) {
			b.WriteByte(' ')
			b.WriteString(logWords[rng.IntN(len(logWords))])
		}
		b.WriteByte('\n')
	}
	return b.Bytes()[:size]
}

// copyBinaries copies ELF files (executables and shared libraries) of this
// machine, each at most maxBinary, in name order, up to binBudget.
func (t *srcTree) copyBinaries(_ context.Context, _ *rand.Rand) error {
	seen := map[uint64]bool{}
	for _, dir := range []string{"/usr/bin", "/usr/sbin", "/usr/lib/x86_64-linux-gnu"} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, ent := range ents {
			if t.bytes[kindBinary] >= binBudget {
				return nil
			}
			info, err := ent.Info()
			if err != nil || !info.Mode().IsRegular() || info.Size() > maxBinary || info.Size() > binBudget-t.bytes[kindBinary] {
				continue
			}
			st, ok := info.Sys().(*syscall.Stat_t)
			if !ok || seen[st.Ino] {
				continue
			}
			p := filepath.Join(dir, ent.Name())
			if !isELF(p) {
				continue
			}
			seen[st.Ino] = true
			rel := filepath.Join("bin", filepath.Base(dir), ent.Name())
			n, err := copyFile(p, filepath.Join(t.root, rel))
			if err != nil {
				return err
			}
			t.add(kindBinary, rel, n)
		}
	}
	return nil
}

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == "\x7fELF"
}

// writeSQLite writes an application database of about sqliteSize with
// modernc.org/sqlite: rows of text and a small random blob each.
func (t *srcTree) writeSQLite(ctx context.Context, rng *rand.Rand) error {
	rel := filepath.Join("db", "app.sqlite")
	p := filepath.Join(t.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", p)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE events (id INTEGER PRIMARY KEY, at INTEGER, kind TEXT, body TEXT, payload BLOB);
		CREATE INDEX events_at ON events(at)`); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	id := 0
	for {
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		if info.Size() >= sqliteSize {
			t.add(kindSQLite, rel, info.Size())
			return nil
		}
		if err := insertEvents(ctx, db, rng, &id, 10000); err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
	}
}

func insertEvents(ctx context.Context, db *sql.DB, rng *rand.Rand, id *int, n int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO events (id, at, kind, body, payload) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	for range n {
		*id++
		payload := make([]byte, 64+rng.IntN(256))
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		if _, err := st.ExecContext(ctx, *id, 1_790_000_000+*id, logServices[rng.IntN(len(logServices))],
			string(logText(rng, 200+rng.IntN(400))), payload); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// writeRandom fills the tree up to treeSize with incompressible files: one
// of bigRandom, the others of 1-16 MiB.
func (t *srcTree) writeRandom(_ context.Context, rng *rand.Rand) error {
	_, have := t.total()
	for i := 0; have < treeSize; i++ {
		size := int64(1<<20 + rng.IntN(15<<20))
		if i == 0 {
			size = bigRandom
		}
		size = min(size, treeSize-have)
		rel := filepath.Join("random", fmt.Sprintf("blob-%03d.bin", i))
		if err := writeFile(filepath.Join(t.root, rel), randomBytes(rng, int(size))); err != nil {
			return err
		}
		t.add(kindRandom, rel, size)
		have += size
	}
	return nil
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b[:n]
}

func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// changeSet is what changeTree did.
type changeSet struct {
	files int
	bytes int64 // bytes written (overwritten in place or appended)
	kinds map[string]int
}

// changeTree changes 1% of the files of each kind (at least one) of the
// live tree t.root, not of the snapshots being backed up: the same files
// every round (picked with a fixed seed) with different bytes (seeded by
// round): even picks get a few bytes overwritten in place, odd picks get
// bytes appended; the SQLite file gets rows updated through SQLite.
func changeTree(ctx context.Context, t *srcTree, round int) (changeSet, error) {
	pick := rand.New(rand.NewPCG(3, 4))
	rng := rand.New(rand.NewPCG(5, uint64(round)))
	cs := changeSet{kinds: map[string]int{}}
	for _, k := range treeKinds {
		files := t.files[k]
		n := max(1, (len(files)+99)/100)
		for i, idx := range pick.Perm(len(files))[:n] {
			p := filepath.Join(t.root, files[idx])
			var written int64
			var err error
			switch {
			case k == kindSQLite:
				written, err = updateRows(ctx, p, rng, 100)
			case i%2 == 0:
				written, err = overwriteInPlace(p, rng)
			case k == kindText:
				written, err = appendTo(p, logText(rng, 200+rng.IntN(2000)))
			default:
				written, err = appendTo(p, randomBytes(rng, 1<<10+rng.IntN(63<<10)))
			}
			if err != nil {
				return cs, fmt.Errorf("change %s: %w", p, err)
			}
			cs.files++
			cs.kinds[k]++
			cs.bytes += written
		}
	}
	syscall.Sync()
	return cs, nil
}

// overwriteInPlace overwrites 8-64 bytes at a random offset.
func overwriteInPlace(p string, rng *rand.Rand) (int64, error) {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	n := min(int64(8+rng.IntN(57)), info.Size())
	if n == 0 {
		return 0, nil
	}
	off := rng.Int64N(info.Size() - n + 1)
	if _, err := f.WriteAt(randomBytes(rng, int(n)), off); err != nil {
		return 0, err
	}
	return n, f.Close()
}

func appendTo(p string, data []byte) (int64, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return 0, err
	}
	return int64(len(data)), f.Close()
}

// updateRows rewrites the body of n random rows, as an application would.
func updateRows(ctx context.Context, p string, rng *rand.Rand, n int) (int64, error) {
	db, err := sql.Open("sqlite", p)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var rows int
	if err := db.QueryRowContext(ctx, `SELECT max(id) FROM events`).Scan(&rows); err != nil {
		return 0, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var written int64
	for range n {
		body := logText(rng, 200+rng.IntN(400))
		if _, err := tx.ExecContext(ctx, `UPDATE events SET body = ? WHERE id = ?`, string(body), 1+rng.IntN(rows)); err != nil {
			return 0, err
		}
		written += int64(len(body))
	}
	return written, tx.Commit()
}
