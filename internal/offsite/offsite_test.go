package offsite

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
)

// dirDisks lends checkpoint disks that are plain directories.
type dirDisks struct {
	mu     sync.Mutex
	dirs   map[string]string // checkpoint id → directory
	memory map[string]string // checkpoint id → memory image directory
	holds  int
}

func (d *dirDisks) Open(ctx context.Context, ck metadata.Checkpoint, purpose string) (Held, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dir, ok := d.dirs[ck.ID]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: %w", ck.ID, disks.ErrLocalGone)
	}
	d.holds++
	return heldDir{dir, d.memory[ck.ID]}, nil
}

// heldDir is a directory (and memory image) lent with a lease that is
// never revoked.
type heldDir struct{ dir, memory string }

func (h heldDir) Path() string             { return h.dir }
func (h heldDir) MemoryDir() string        { return h.memory }
func (h heldDir) Context() context.Context { return context.Background() }
func (h heldDir) Release()                 {}

func (d *dirDisks) DiskBytes(context.Context, string) int64 { return 0 }

// fixture is a service over a fresh SQLite store and two directory
// locations, with its own clock-free queue driven by step.
type fixture struct {
	t     *testing.T
	dir   string
	store metadata.Store
	acct  metadata.Account
	sb    metadata.Sandbox
	disks *dirDisks
	svc   *Service
	cfg   Config
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(filepath.Join(dir, "cairn.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	acct, err := store.EnsureAccount(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	sb := metadata.Sandbox{ID: "00000000000000a1", AccountID: acct.ID, Name: "web", Image: "busybox", State: metadata.SandboxRunning}
	if err := store.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, store: store, acct: acct, sb: sb, disks: &dirDisks{dirs: map[string]string{}, memory: map[string]string{}}}
	f.cfg, err = Config{RetryMax: Duration(time.Millisecond)}.WithDefaults(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.restart()
	return f
}

// restart makes a new service over the same store and locations, as a
// restarted cairnd does.
func (f *fixture) restart() {
	f.svc = New(f.cfg, f.store, f.acct, f.disks, time.Now)
}

// checkpoint stores a checkpoint row whose disk is a directory holding
// files.
func (f *fixture) checkpoint(id string, files map[string][]byte) metadata.Checkpoint {
	f.t.Helper()
	d := filepath.Join(f.dir, "disks", id)
	for name, data := range files {
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	f.disks.mu.Lock()
	f.disks.dirs[id] = d
	f.disks.mu.Unlock()
	ck, err := f.store.CreateCheckpoint(context.Background(), metadata.Checkpoint{ID: id, AccountID: f.acct.ID,
		SandboxID: f.sb.ID, SandboxName: f.sb.Name, Trigger: metadata.TriggerManual, Consistency: metadata.ConsistencyFrozen, Image: "busybox"})
	if err != nil {
		f.t.Fatal(err)
	}
	return ck
}

// drain runs the queue until it has nothing left to do now.
func (f *fixture) drain() {
	f.t.Helper()
	for i := 0; f.svc.step(context.Background()); i++ {
		if i > 100 {
			f.t.Fatal("the queue does not settle")
		}
	}
}

func (f *fixture) row(id string) metadata.Checkpoint {
	f.t.Helper()
	ck, err := f.store.CheckpointByID(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return ck
}

func (f *fixture) state(id string) (string, *api.OffsiteDetail) {
	return f.svc.Status(f.row(id))
}

func (f *fixture) locationDir(i int) string { return f.cfg.Locations[i].Dir }

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func TestUploadRestoreAndDelete(t *testing.T) {
	f := newFixture(t)
	big := randomBytes(t, 3<<20)
	ck := f.checkpoint("c1", map[string][]byte{"big": big, "etc/hostname": []byte("web\n")})
	if st, _ := f.state(ck.ID); st != api.OffsitePending {
		t.Fatalf("before the queue ran: %s", st)
	}
	f.drain()
	if f.row(ck.ID).OffsiteManifest == "" {
		t.Fatal("no manifest recorded after the upload")
	}
	st, d := f.state(ck.ID)
	if st != "uploaded ×2" || len(d.Locations) != 2 || d.Locations[0].State != api.OffsiteUploaded || d.Locations[1].State != api.OffsiteUploaded {
		t.Fatalf("after the upload: %s %+v", st, d)
	}
	if !f.svc.Complete(f.row(ck.ID)) {
		t.Fatal("Complete is false for a checkpoint both locations hold")
	}
	for i := range 2 {
		if n := dirBytes(t, f.locationDir(i)); n < 3<<20 {
			t.Fatalf("location %d holds %d bytes", i, n)
		}
	}

	out := filepath.Join(t.TempDir(), "restored")
	var last api.TransferProgress
	if err := f.svc.Restore(context.Background(), f.row(ck.ID), out, func(p api.TransferProgress) { last = p }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "big")); !bytes.Equal(got, big) {
		t.Fatal("restored file differs")
	}
	if last.BytesDone < int64(len(big)) {
		t.Errorf("last progress %+v", last)
	}

	// A restarted service finds the repository and the uploaded state.
	f.restart()
	f.drain()
	if st, _ := f.state(ck.ID); st != "uploaded ×2" {
		t.Fatalf("after a restart: %s", st)
	}

	// Deleting the row deletes the manifest and its packs in both places.
	if err := f.store.DeleteCheckpoint(context.Background(), ck.ID); err != nil {
		t.Fatal(err)
	}
	f.drain()
	for i := range 2 {
		if n := dirBytes(t, f.locationDir(i)); n > 1<<20 {
			t.Errorf("location %d still holds %d bytes after the delete", i, n)
		}
	}
}

func TestIncrementalUploadReusesTheParent(t *testing.T) {
	f := newFixture(t)
	files := map[string][]byte{"a": randomBytes(t, 1<<20), "b": randomBytes(t, 1<<20)}
	f.checkpoint("c1", files)
	f.drain()
	before := [2]int64{dirBytes(t, f.locationDir(0)), dirBytes(t, f.locationDir(1))}
	files["c"] = []byte("new")
	f.checkpoint("c2", files)
	f.drain()
	for i := range 2 {
		if grew := dirBytes(t, f.locationDir(i)) - before[i]; grew > 256<<10 {
			t.Errorf("location %d grew by %d bytes for a 3-byte file", i, grew)
		}
	}
	if st, _ := f.state("c2"); st != "uploaded ×2" {
		t.Fatalf("c2: %s", st)
	}
}

// breakLocation makes location i fail (its directory replaced by a file)
// and returns the func that repairs it.
func (f *fixture) breakLocation(i int) func() {
	f.t.Helper()
	dir := f.locationDir(i)
	aside := dir + ".aside"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(dir, aside); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return func() {
		if err := os.Remove(dir); err != nil {
			f.t.Fatal(err)
		}
		if err := os.Rename(aside, dir); err != nil {
			f.t.Fatal(err)
		}
	}
}

func TestALocationDownConverges(t *testing.T) {
	f := newFixture(t)
	f.checkpoint("c1", map[string][]byte{"a": randomBytes(t, 100<<10)})
	f.drain()
	fix := f.breakLocation(1)
	f.checkpoint("c2", map[string][]byte{"a": randomBytes(t, 100<<10)})
	f.drain()
	st, d := f.state("c2")
	if st != "uploaded ×1" || d.Locations[1].State != api.OffsiteFailed || d.Locations[1].Error == "" {
		t.Fatalf("with secondary broken: %s %+v", st, d)
	}
	fix()
	time.Sleep(5 * time.Millisecond) // past the backoff (RetryMax 1 ms)
	f.drain()
	if st, d := f.state("c2"); st != "uploaded ×2" {
		t.Fatalf("after secondary is back: %s %+v", st, d)
	}
	// Deleting while a location is down: the other keeps a tombstone, and
	// the returning location drops the checkpoint too.
	fix = f.breakLocation(0)
	if err := f.store.DeleteCheckpoint(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	f.drain()
	fix()
	time.Sleep(5 * time.Millisecond)
	f.drain()
	f.restart()
	f.drain()
	r := f.svc.repo
	if r == nil || len(r.List()) != 1 {
		t.Fatalf("after the delete with primary down: %v", r.List())
	}
	if st, _ := f.state("c2"); st != "uploaded ×2" {
		t.Fatalf("c2 at the end: %s", st)
	}
}

func TestFreshRepositoryWithOneLocationDown(t *testing.T) {
	f := newFixture(t)
	fix := f.breakLocation(1)
	f.checkpoint("c1", map[string][]byte{"a": []byte("hello")})
	f.drain()
	if st, _ := f.state("c1"); st != "uploaded ×1" {
		t.Fatalf("fresh repository, secondary down: %s", st)
	}
	fix()
	time.Sleep(5 * time.Millisecond)
	f.drain()
	if st, _ := f.state("c1"); st != "uploaded ×2" {
		t.Fatalf("after secondary is back: %s", st)
	}
	// The key can be recovered from the location that was down.
	if slots, _ := os.ReadDir(filepath.Join(f.locationDir(1), "keys")); len(slots) == 0 {
		t.Fatal("no key slot in the location that was down")
	}
}

func TestWrongKeyIsAClearFailure(t *testing.T) {
	f := newFixture(t)
	f.checkpoint("c1", map[string][]byte{"a": []byte("hello")})
	f.drain()
	if err := os.WriteFile(f.cfg.KeyFile, []byte("another key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.restart()
	f.checkpoint("c2", map[string][]byte{"a": []byte("hello again")})
	f.drain()
	st, d := f.state("c2")
	if st != api.OffsiteFailed || !strings.Contains(d.Error, "wrong key") {
		t.Fatalf("wrong key: %s %+v", st, d)
	}
	err := f.svc.Restore(context.Background(), f.row("c1"), t.TempDir(), nil)
	if errdefs.CodeOf(err) != api.CodeOffsiteUnavailable {
		t.Fatalf("restore with the wrong key: %v", err)
	}
}

func TestLocalCopyGoneIsFinal(t *testing.T) {
	f := newFixture(t)
	f.checkpoint("c1", map[string][]byte{"a": []byte("x")})
	f.disks.mu.Lock()
	delete(f.disks.dirs, "c1")
	f.disks.mu.Unlock()
	f.drain()
	st, d := f.state("c1")
	if st != api.OffsiteFailed || !strings.Contains(d.Error, "local copy is gone") {
		t.Fatalf("local copy gone: %s %+v", st, d)
	}
	holds := f.disks.holds
	time.Sleep(5 * time.Millisecond)
	f.drain()
	if f.disks.holds != holds {
		t.Fatal("a checkpoint whose local copy is gone was tried again")
	}
	err := f.svc.Restore(context.Background(), f.row("c1"), t.TempDir(), nil)
	if errdefs.CodeOf(err) != api.CodeNotOffsite {
		t.Fatalf("restore of a checkpoint never uploaded: %v", err)
	}
}

func TestConfigChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"one location", Config{Locations: []LocationConfig{{Name: "a", Dir: "/x"}}}, "two locations"},
		{"same names", Config{Locations: []LocationConfig{{Name: "a", Dir: "/x"}, {Name: "a", Dir: "/y"}}}, "two locations are called"},
		{"bad name", Config{Locations: []LocationConfig{{Name: "a/b", Dir: "/x"}, {Name: "c", Dir: "/y"}}}, "location name"},
		{"neither", Config{Locations: []LocationConfig{{Name: "a"}, {Name: "c", Dir: "/y"}}}, "exactly one of dir and s3"},
		{"relative", Config{Locations: []LocationConfig{{Name: "a", Dir: "x"}, {Name: "c", Dir: "/y"}}}, "absolute"},
		{"s3 without bucket", Config{Locations: []LocationConfig{{Name: "a", S3: &S3Location{Endpoint: "h:1"}}, {Name: "c", Dir: "/y"}}}, "bucket"},
	} {
		_, err := tc.cfg.WithDefaults("/data")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	cfg, err := Config{}.WithDefaults("/data")
	if err != nil || cfg.KeyFile != "/data/offsite/account.key" || cfg.Locations[1].Dir != "/data/offsite/secondary" {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
}

// Each account's defaults are its own: the default account keeps the
// paths of a cairnd of one account, another gets a directory named by its
// id, and what a config file gives is kept.
func TestForAccountDefaults(t *testing.T) {
	def, err := ForAccount(Config{}, "/data", metadata.Account{ID: 1, Name: metadata.DefaultAccount})
	if err != nil || def.KeyFile != "/data/offsite/account.key" || def.Locations[0].Dir != "/data/offsite/primary" {
		t.Fatalf("default account: %+v %v", def, err)
	}
	alice, err := ForAccount(Config{}, "/data", metadata.Account{ID: 7, Name: "alice"})
	if err != nil || alice.KeyFile != "/data/offsite/account-7/account.key" ||
		alice.Locations[0].Dir != "/data/offsite/account-7/primary" || alice.Locations[1].Dir != "/data/offsite/account-7/secondary" {
		t.Fatalf("alice: %+v %v", alice, err)
	}
	given := Config{Locations: []LocationConfig{{Name: "e", Dir: "/mnt/e"}, {Name: "w", Dir: "/mnt/w"}}}
	bob, err := ForAccount(given, "/data", metadata.Account{ID: 8, Name: "bob"})
	if err != nil || bob.KeyFile != "/data/offsite/account-8/account.key" || bob.Locations[0].Dir != "/mnt/e" {
		t.Fatalf("bob: %+v %v", bob, err)
	}
	if _, err := NewSet(SetConfig{DataDir: "/data", Accounts: map[string]Config{"Bad Name": {}}}); err == nil {
		t.Fatal("a config for an impossible account name was taken")
	}
	if _, err := NewSet(SetConfig{DataDir: "/data", Accounts: map[string]Config{"carol": {Locations: given.Locations[:1]}}}); err == nil {
		t.Fatal("an account config with one location was taken")
	}
}

// Status is called by every list while uploads run: it must never wait
// for the repository (a backup reports progress under its lock).
func TestStatusDuringUpload(t *testing.T) {
	f := newFixture(t)
	ck := f.checkpoint("c1", map[string][]byte{"a": randomBytes(t, 24<<20)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.drain()
	}()
	sawUploading := false
	for {
		got := make(chan string, 1)
		go func() { st, _ := f.svc.Status(f.row(ck.ID)); got <- st }()
		select {
		case st := <-got:
			sawUploading = sawUploading || st == api.OffsiteUploading
		case <-time.After(10 * time.Second):
			t.Fatal("Status blocked during an upload")
		}
		select {
		case <-done:
			if st, _ := f.state(ck.ID); st != "uploaded ×2" {
				t.Fatalf("after the upload: %s", st)
			}
			if !sawUploading {
				t.Log("the upload ended before Status saw it running")
			}
			return
		default:
		}
	}
}

// However long a checkpoint's comment and label, its metadata fits in a
// manifest (an upload never fails for them), and text is cut on a
// character.
func TestMetaAlwaysFits(t *testing.T) {
	ck := metadata.Checkpoint{ID: "c1", SandboxID: "s1", SandboxName: "web", Seq: "v1", Trigger: metadata.TriggerManual,
		Consistency: metadata.ConsistencyFrozen, Comment: strings.Repeat("é<", 1<<19), Label: strings.Repeat("x", 1<<20), Name: strings.Repeat("n", 1<<16)}
	// And however many files its sandbox read at boot, with names that
	// JSON escapes at six bytes a byte.
	var order accessorder.Order
	for i := 0; i < 20000; i++ {
		order.Files = append(order.Files, fmt.Sprintf("usr/lib/\x01\x02%06d/%s", i, strings.Repeat("\x1f", 40)))
	}
	b := metaOf(ck, order)
	if len(b) > manifest.MaxMeta {
		t.Fatalf("meta of %d bytes, over the manifest's %d", len(b), manifest.MaxMeta)
	}
	var m remoteMeta
	if err := json.Unmarshal(b, &m); err != nil || !utf8.ValidString(m.Comment) || len(m.Comment) == 0 || m.SandboxName != "web" {
		t.Fatalf("meta %q… %v", b[:80], err)
	}
	if len(m.ReadOrder) == 0 || m.ReadOrder[0] != order.Files[0] {
		t.Fatalf("the read order was dropped instead of cut: %d files", len(m.ReadOrder))
	}
}

// A lazy restore fetches first the files its sandbox read first, in that
// order, then the rest in the manifest's order; a name the order gives
// that the checkpoint lacks changes nothing.
func TestLazyFilesInReadOrder(t *testing.T) {
	var files []repo.LaidFile
	for _, p := range []string{"bin/sh", "etc/passwd", "srv/app/main", "srv/app/data", "usr/lib/x"} {
		files = append(files, repo.LaidFile{Node: &manifest.Node{Path: p}})
	}
	order := accessorder.Order{Files: []string{"srv/app/data", "gone/file", "srv/app/main", "bin/sh"}}
	if n := inReadOrder(files, order); n != 3 {
		t.Fatalf("%d files first, want 3", n)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Node.Path)
	}
	if want := "srv/app/data srv/app/main bin/sh etc/passwd usr/lib/x"; strings.Join(got, " ") != want {
		t.Fatalf("order %q, want %q", got, want)
	}
}
