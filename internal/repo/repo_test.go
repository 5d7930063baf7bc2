package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/local"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

func TestRoundTripEveryFileKind(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	ref, st := f.backup(t, src, nil)
	if st.Files != 5 || st.FilesRead != 5 || st.ChunksNew == 0 || st.BytesUploaded == 0 {
		t.Errorf("stats %+v", st)
	}
	if h := f.repo.Holders(ref); !slices.Equal(h, []string{"primary", "secondary"}) {
		t.Errorf("holders %v", h)
	}
	f.restoreEqual(t, ref, src)
	// A daemon restarted with only the key restores the same.
	f.reopen(t)
	if l := f.repo.List(); len(l) != 1 || l[0] != ref {
		t.Fatalf("List after reopen = %v", l)
	}
	f.restoreEqual(t, ref, src)
	f.verifyClean(t)
	if err := f.repo.Restore(context.Background(), ref, src, RestoreOptions{}); err == nil {
		t.Error("restore into a non-empty directory accepted")
	}
}

// What the store sees: neither a file name nor a distinctive content.
func TestStoreSeesNothing(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	f.backup(t, src, nil)
	needles := [][]byte{[]byte("confidential-plans"), []byte(secret), []byte("xattr value"), []byte("random.bin"), []byte("user.note")}
	for _, dir := range f.dirs {
		n := 0
		must(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			n++
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, s := range needles {
				if bytes.Contains(data, s) || strings.Contains(p, string(s)) {
					t.Errorf("%s contains %q", p, s)
				}
			}
			return nil
		}))
		if n < 4 {
			t.Fatalf("only %d objects in %s", n, dir)
		}
	}
}

func TestIncrementalUploadsOnlyTheChange(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	for i := range 20 {
		write(t, filepath.Join(src, "d", string(rune('a'+i))+".bin"), randomBytes(400<<10, uint64(i)))
	}
	big := filepath.Join(src, "big.bin")
	write(t, big, randomBytes(8<<20, 99))
	ref1, st1 := f.backup(t, src, nil)

	// Change one byte in the middle of the big file.
	fh, err := os.OpenFile(big, os.O_WRONLY, 0)
	must(t, err)
	_, err = fh.WriteAt([]byte{0x42}, 4<<20)
	must(t, err)
	must(t, fh.Close())
	ref2, st2 := f.backup(t, src, &ref1)
	if st2.FilesRead != 1 {
		t.Errorf("second backup read %d files, want only the changed one", st2.FilesRead)
	}
	if st2.ChunksNew > 3 || st2.ChunksNew == 0 {
		t.Errorf("second backup packed %d new chunks (first: %d)", st2.ChunksNew, st1.ChunksNew)
	}
	if st2.BytesUploaded > st1.BytesUploaded/10 {
		t.Errorf("second backup uploaded %d bytes, first %d", st2.BytesUploaded, st1.BytesUploaded)
	}
	f.restoreEqual(t, ref2, src)

	// Without a parent everything is read, but nothing new is stored.
	_, st3 := f.backup(t, src, nil)
	if st3.FilesRead != 21 || st3.ChunksNew != 0 {
		t.Errorf("third backup: %+v", st3)
	}
}

func TestTwoTreesShareChunks(t *testing.T) {
	f := newFixture(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for i := range 5 {
		data := randomBytes(1<<20, uint64(100+i))
		write(t, filepath.Join(a, "x", string(rune('0'+i))), data)
		write(t, filepath.Join(b, "elsewhere", "renamed-"+string(rune('0'+i))), data)
	}
	_, st1 := f.backup(t, a, nil)
	refB, st2 := f.backup(t, b, nil)
	if st2.ChunksNew != 0 || st2.ChunksReused != st1.ChunksNew {
		t.Errorf("second tree: %d new, %d reused chunks; first had %d", st2.ChunksNew, st2.ChunksReused, st1.ChunksNew)
	}
	f.restoreEqual(t, refB, b)
}

func TestDeleteFreesSpace(t *testing.T) {
	f := newFixture(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	write(t, filepath.Join(a, "only-a"), randomBytes(6<<20, 1))
	write(t, filepath.Join(a, "shared"), randomBytes(1<<20, 3))
	write(t, filepath.Join(b, "only-b"), randomBytes(2<<20, 2))
	write(t, filepath.Join(b, "shared"), randomBytes(1<<20, 3))
	refA, _ := f.backup(t, a, nil)
	refB, _ := f.backup(t, b, nil)
	before := [2]int64{storedBytes(t, f.faulty[0]), storedBytes(t, f.faulty[1])}
	if err := f.repo.Delete(context.Background(), refA); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		after := storedBytes(t, f.faulty[i])
		if before[i]-after < 5<<20 {
			t.Errorf("%s: %d bytes before delete, %d after", f.locs[i].Name, before[i], after)
		}
	}
	if l := f.repo.List(); !slices.Equal(l, []ManifestRef{refB}) {
		t.Fatalf("List = %v", l)
	}
	f.restoreEqual(t, refB, b)
	f.verifyClean(t)
	f.reopen(t)
	f.restoreEqual(t, refB, b)
	if err := f.repo.Restore(context.Background(), refA, filepath.Join(t.TempDir(), "x"), RestoreOptions{}); err == nil {
		t.Error("deleted checkpoint restored")
	}
	if err := f.repo.Delete(context.Background(), refA); !errors.Is(err, ErrUnknownManifest) {
		t.Errorf("second delete: %v", err)
	}
	// Deleting the last checkpoint empties the locations of data.
	must(t, f.repo.Delete(context.Background(), refB))
	for i := range 2 {
		if n := storedBytes(t, f.faulty[i]); n > 1024 {
			t.Errorf("%s holds %d bytes with no checkpoint", f.locs[i].Name, n)
		}
	}
}

func TestVerifyAndRepairDamagedPack(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "data"), randomBytes(5<<20, 7))
	ref, _ := f.backup(t, src, nil)
	packs, err := f.faulty[0].List(context.Background(), packsDir)
	must(t, err)
	victim := packs[0].Name
	p := filepath.Join(f.dirs[0], victim)
	data, err := os.ReadFile(p)
	must(t, err)
	data[len(data)/2] ^= 0x01
	must(t, os.WriteFile(p, data, 0o600))

	rep, err := f.repo.Verify(context.Background(), "primary")
	must(t, err)
	if rep.OK() || !slices.Contains(rep.Damaged, victim) {
		t.Fatalf("verify missed the damaged pack %s: %+v", victim, rep)
	}
	if rep, _ := f.repo.Verify(context.Background(), "secondary"); !rep.OK() {
		t.Fatalf("secondary: %+v", rep)
	}
	// Restore still works: the intact copy is used.
	f.restoreEqual(t, ref, src)

	rep, err = f.repo.Repair(context.Background(), "primary")
	must(t, err)
	if !slices.Contains(rep.Repaired, victim) {
		t.Fatalf("repair did not copy %s: %+v", victim, rep)
	}
	f.verifyClean(t)
	// With the secondary gone entirely, the primary alone restores.
	must(t, os.RemoveAll(f.dirs[1]))
	must(t, os.MkdirAll(f.dirs[1], 0o700))
	f.restoreEqual(t, ref, src)
	// And repair refills the secondary.
	if _, err := f.repo.Repair(context.Background(), "secondary"); err != nil {
		t.Fatal(err)
	}
	f.verifyClean(t)
}

func TestOneLocationDownConverges(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "a"), randomBytes(2<<20, 1))
	ref1, _ := f.backup(t, src, nil)
	down := errors.New("connection refused")
	f.faulty[1].Inject(func(backendtest.Op, string) error { return down })
	write(t, filepath.Join(src, "b"), randomBytes(2<<20, 2))
	ref2, st, err := f.repo.Backup(context.Background(), src, BackupOptions{Parent: &ref1})
	must(t, err)
	if !errors.Is(st.Failed["secondary"], down) || len(st.Failed) != 1 {
		t.Fatalf("Failed = %v", st.Failed)
	}
	if h := f.repo.Holders(ref2); !slices.Equal(h, []string{"primary"}) {
		t.Fatalf("holders %v, want only primary (uploaded ×1)", h)
	}
	// Deleting while it is down leaves a tombstone it learns later.
	if err := f.repo.Delete(context.Background(), ref1); err == nil {
		t.Fatal("delete reported no error for the down location")
	}
	f.faulty[1].Inject(nil)
	if _, err := f.repo.Repair(context.Background(), "secondary"); err != nil {
		t.Fatal(err)
	}
	if h := f.repo.Holders(ref2); len(h) != 2 {
		t.Fatalf("holders after repair %v (want uploaded ×2)", h)
	}
	if l := f.repo.List(); !slices.Equal(l, []ManifestRef{ref2}) {
		t.Fatalf("List = %v: the deleted checkpoint came back", l)
	}
	must(t, f.repo.GC(context.Background()))
	f.verifyClean(t)
	f.reopen(t)
	f.restoreEqual(t, ref2, src)
	if l := f.repo.List(); !slices.Equal(l, []ManifestRef{ref2}) {
		t.Fatalf("List after reopen = %v", l)
	}
}

// A crash at any point of a backup (the Nth save fails in both locations,
// like a kill -9 between two writes) leaves the previous state intact.
func TestCrashDuringBackupAtEveryWrite(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "a"), randomBytes(3<<20, 1))
	ref1, _ := f.backup(t, src, nil)
	write(t, filepath.Join(src, "b"), randomBytes(20<<20, 2)) // two packs
	want := filepath.Join(t.TempDir(), "want")
	must(t, f.repo.Restore(context.Background(), ref1, want, RestoreOptions{}))

	for n := 0; ; n++ {
		crashAfter(f, n)
		ref2, st, err := f.repo.Backup(context.Background(), src, BackupOptions{Parent: &ref1})
		f.faulty[0].Inject(nil)
		f.faulty[1].Inject(nil)
		f.reopen(t)
		f.restoreEqual(t, ref1, want)
		if err != nil {
			if l := f.repo.List(); !slices.Equal(l, []ManifestRef{ref1}) {
				t.Fatalf("crash after %d saves: List = %v", n, l)
			}
			f.verifyClean(t)
			must(t, f.repo.GC(context.Background()))
			f.verifyClean(t)
			continue
		}
		// Committed in at least one location: it restores, and Repair
		// brings the other up to date.
		f.restoreEqual(t, ref2, src)
		for name := range st.Failed {
			if _, err := f.repo.Repair(context.Background(), name); err != nil {
				t.Fatalf("crash after %d saves: repair %s: %v", n, name, err)
			}
		}
		f.verifyClean(t)
		if st.Failed == nil {
			if n < 8 {
				t.Fatalf("backup survived a crash after %d saves", n)
			}
			break
		}
		must(t, f.repo.Delete(context.Background(), ref2))
		f.verifyClean(t)
	}
}

// crashAfter makes every save after the first n (counted over both
// locations) fail, as if the process died there.
func crashAfter(f *fixture, n int) {
	var mu sync.Mutex
	saves := 0
	for i := range 2 {
		f.faulty[i].Inject(func(op backendtest.Op, name string) error {
			if op != backendtest.OpSave && op != backendtest.OpCreate {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			saves++
			if saves > n {
				return errCrashed
			}
			return nil
		})
	}
}

var errCrashed = errors.New("killed")

// A crash during the deletions of a GC leaves a clean repository.
func TestCrashDuringDelete(t *testing.T) {
	f := newFixture(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	write(t, filepath.Join(a, "x"), randomBytes(4<<20, 1))
	write(t, filepath.Join(b, "y"), randomBytes(4<<20, 2))
	refA, _ := f.backup(t, a, nil)
	refB, _ := f.backup(t, b, nil)
	crashed := errCrashed
	// Crash before the head: index segment written, head not.
	for i := range 2 {
		f.faulty[i].Inject(func(op backendtest.Op, name string) error {
			if op == backendtest.OpCreate && strings.HasPrefix(name, headsDir) {
				return crashed
			}
			return nil
		})
	}
	if err := f.repo.Delete(context.Background(), refA); !errors.Is(err, crashed) {
		t.Fatalf("delete: %v", err)
	}
	f.faulty[0].Inject(nil)
	f.faulty[1].Inject(nil)
	f.reopen(t)
	f.verifyClean(t)
	f.restoreEqual(t, refB, b)
	// Crash after the head, during the deletions.
	for i := range 2 {
		f.faulty[i].Inject(func(op backendtest.Op, name string) error {
			if op == backendtest.OpRemove && strings.HasPrefix(name, packsDir) {
				return crashed
			}
			return nil
		})
	}
	err := f.repo.Delete(context.Background(), refA)
	if !errors.Is(err, crashed) {
		t.Fatalf("delete: %v", err)
	}
	f.faulty[0].Inject(nil)
	f.faulty[1].Inject(nil)
	f.reopen(t)
	if l := f.repo.List(); !slices.Equal(l, []ManifestRef{refB}) {
		t.Fatalf("List = %v", l)
	}
	f.verifyClean(t)
	f.restoreEqual(t, refB, b)
	before := storedBytes(t, f.faulty[0])
	must(t, f.repo.GC(context.Background()))
	if after := storedBytes(t, f.faulty[0]); before-after < 3<<20 {
		t.Errorf("GC after the crash freed %d bytes", before-after)
	}
	f.verifyClean(t)
}

func TestOpenWithOneLocationDown(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "a"), randomBytes(1<<20, 1))
	down := errors.New("no route to host")
	f.faulty[0].Inject(func(backendtest.Op, string) error { return down })
	f.reopen(t)
	if u := f.repo.Unavailable(); len(u) != 1 || !errors.Is(u["primary"], down) {
		t.Fatalf("Unavailable = %v", u)
	}
	ref, st, err := f.repo.Backup(context.Background(), src, BackupOptions{})
	must(t, err)
	if st.Failed["primary"] == nil {
		t.Fatalf("Failed = %v", st.Failed)
	}
	f.faulty[0].Inject(nil)
	if _, err := f.repo.Repair(context.Background(), "primary"); err != nil {
		t.Fatal(err)
	}
	if f.repo.Unavailable() != nil || len(f.repo.Holders(ref)) != 2 {
		t.Fatalf("after repair: unavailable %v, holders %v", f.repo.Unavailable(), f.repo.Holders(ref))
	}
	f.verifyClean(t)
	f.restoreEqual(t, ref, src)
}

func TestWrongKeyAndUninitialized(t *testing.T) {
	f := newFixture(t)
	other, _ := crypto.NewKey()
	if _, err := Open(context.Background(), other, f.locs...); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("Open with another key: %v", err)
	}
	if _, err := Init(context.Background(), f.key, f.locs...); !errors.Is(err, ErrExists) {
		t.Fatalf("Init twice: %v", err)
	}
	empty := newEmptyLocation(t)
	if _, err := Open(context.Background(), f.key, empty); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Open of an empty location: %v", err)
	}
}

func TestKeySlots(t *testing.T) {
	f := newFixture(t)
	kdf := crypto.KDFParams{LogN: 10, R: 8, P: 1}
	must(t, SaveKey(context.Background(), f.key, []byte("pass phrase"), kdf, f.locs...))
	got, err := LoadKey(context.Background(), f.locs[1], []byte("pass phrase"))
	if err != nil || *got != *f.key {
		t.Fatalf("LoadKey = %v", err)
	}
	if _, err := LoadKey(context.Background(), f.locs[0], []byte("nope")); !errors.Is(err, crypto.ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
}

func newEmptyLocation(t *testing.T) Location {
	t.Helper()
	b, err := local.New(filepath.Join(t.TempDir(), "empty"))
	must(t, err)
	return Location{Name: "empty", Backend: b}
}

// A backup without parent (a base) compresses harder than one with a
// parent: the same compressible tree stores fewer bytes as a base.
func TestBaseCompressesHarder(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	var text bytes.Buffer
	for i := 0; text.Len() < 4<<20; i++ {
		fmt.Fprintf(&text, "%08d sandbox %x checkpointed after %d ms, %d files changed\n", i, i*7919, i%977, i%31)
	}
	write(t, filepath.Join(src, "log.txt"), text.Bytes())
	key, err := crypto.NewKey() // one key for both: the same chunks
	must(t, err)
	_, base := newFixtureKey(t, key).backup(t, src, nil)

	f := newFixtureKey(t, key)
	other := filepath.Join(t.TempDir(), "other")
	write(t, filepath.Join(other, "x"), []byte("unrelated"))
	parent, _ := f.backup(t, other, nil)
	_, incr := f.backup(t, src, &parent)
	if base.ChunksNew != incr.ChunksNew || base.BytesUploaded >= incr.BytesUploaded {
		t.Fatalf("base: %d chunks, %d bytes uploaded; with a parent: %d chunks, %d bytes", base.ChunksNew, base.BytesUploaded, incr.ChunksNew, incr.BytesUploaded)
	}
}
