package repo

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
)

// A location that fails during a backup is remembered as unavailable and
// left alone; once it answers again, Reload makes it usable and Repair
// gives it every checkpoint.
func TestFailedLocationReloadRepair(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "a"), randomBytes(2<<20, 1))
	ref1, _ := f.backup(t, src, nil)

	full := errors.New("quota exceeded")
	var calls atomic.Int32
	f.faulty[1].Inject(func(op backendtest.Op, name string) error {
		calls.Add(1)
		if op == backendtest.OpSave && strings.HasPrefix(name, packsDir) {
			return full
		}
		return nil
	})
	write(t, filepath.Join(src, "b"), randomBytes(2<<20, 2))
	ref2, st, err := f.repo.Backup(context.Background(), src, BackupOptions{Parent: &ref1})
	must(t, err)
	if !errors.Is(st.Failed["secondary"], full) {
		t.Fatalf("Failed = %v", st.Failed)
	}
	if u := f.repo.Unavailable(); len(u) != 1 || !errors.Is(u["secondary"], full) {
		t.Fatalf("Unavailable = %v", u)
	}
	// The next backup does not try the failed location.
	calls.Store(0)
	write(t, filepath.Join(src, "c"), randomBytes(2<<20, 3))
	ref3, st, err := f.repo.Backup(context.Background(), src, BackupOptions{Parent: &ref2})
	must(t, err)
	if !errors.Is(st.Failed["secondary"], full) || calls.Load() != 0 {
		t.Fatalf("Failed = %v after %d calls to the failed location", st.Failed, calls.Load())
	}
	for _, ref := range []ManifestRef{ref2, ref3} {
		if h := f.repo.Holders(ref); !slices.Equal(h, []string{"primary"}) {
			t.Fatalf("holders %v", h)
		}
	}

	f.faulty[1].Inject(nil)
	if f.repo.Unavailable() == nil {
		t.Fatal("the failure was forgotten before Reload")
	}
	must(t, f.repo.Reload(context.Background()))
	if u := f.repo.Unavailable(); u != nil {
		t.Fatalf("Unavailable after Reload = %v", u)
	}
	if h := f.repo.Holders(ref1); len(h) != 2 {
		t.Fatalf("holders of the first checkpoint after Reload: %v", h)
	}
	rep, err := f.repo.Repair(context.Background(), "secondary")
	must(t, err)
	if len(rep.Repaired) == 0 {
		t.Fatalf("repair copied nothing: %+v", rep)
	}
	for _, ref := range []ManifestRef{ref1, ref2, ref3} {
		if h := f.repo.Holders(ref); len(h) != 2 {
			t.Fatalf("holders after repair %v", h)
		}
	}
	f.verifyClean(t)
	// The secondary alone restores every checkpoint.
	f.faulty[0].Inject(func(backendtest.Op, string) error { return errors.New("primary gone") })
	f.restoreEqual(t, ref3, src)
	f.faulty[0].Inject(nil)
}

// A location that cannot be read at Open is usable after Reload once it
// answers: the next backup commits there without a Repair.
func TestReloadAfterOpenWithLocationDown(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "a"), randomBytes(1<<20, 1))
	ref1, _ := f.backup(t, src, nil)
	down := errors.New("no route to host")
	f.faulty[0].Inject(func(backendtest.Op, string) error { return down })
	f.reopen(t)
	if u := f.repo.Unavailable(); !errors.Is(u["primary"], down) {
		t.Fatalf("Unavailable = %v", u)
	}
	// Still down: Reload says so and changes nothing.
	must(t, f.repo.Reload(context.Background()))
	if u := f.repo.Unavailable(); !errors.Is(u["primary"], down) {
		t.Fatalf("Unavailable = %v", u)
	}
	f.faulty[0].Inject(nil)
	must(t, f.repo.Reload(context.Background()))
	if u := f.repo.Unavailable(); u != nil {
		t.Fatalf("Unavailable after Reload = %v", u)
	}
	write(t, filepath.Join(src, "b"), randomBytes(1<<20, 2))
	ref2, _ := f.backup(t, src, &ref1)
	if h := f.repo.Holders(ref2); len(h) != 2 {
		t.Fatalf("holders %v", h)
	}
	f.verifyClean(t)
	f.restoreEqual(t, ref2, src)
}

// Delete and GC with the secondary down: the delete commits in the primary
// with a tombstone; after the secondary returns, Repair leaves the
// checkpoint deleted there and a later GC frees its packs there too.
func TestDeleteWithLocationDown(t *testing.T) {
	f := newFixture(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	write(t, filepath.Join(a, "only-a"), randomBytes(6<<20, 1))
	write(t, filepath.Join(b, "only-b"), randomBytes(2<<20, 2))
	refA, _ := f.backup(t, a, nil)
	refB, _ := f.backup(t, b, nil)
	secondaryBefore := storedBytes(t, f.faulty[1])

	down := errors.New("connection refused")
	f.faulty[1].Inject(func(backendtest.Op, string) error { return down })
	err := f.repo.Delete(context.Background(), refA)
	if !errors.Is(err, down) {
		t.Fatalf("delete with the secondary down: %v", err)
	}
	if l := f.repo.List(); !slices.Equal(l, []ManifestRef{refB}) {
		t.Fatalf("List = %v", l)
	}
	if u := f.repo.Unavailable(); !errors.Is(u["secondary"], down) {
		t.Fatalf("Unavailable = %v", u)
	}
	if err := f.repo.GC(context.Background()); !errors.Is(err, down) {
		t.Fatalf("GC with the secondary down: %v", err)
	}
	// The primary committed the delete and freed the space.
	if n := storedBytes(t, f.faulty[0]); n > 3<<20 {
		t.Errorf("primary holds %d bytes after the delete", n)
	}

	f.faulty[1].Inject(nil)
	must(t, f.repo.Reload(context.Background()))
	if l := f.repo.List(); !slices.Equal(l, []ManifestRef{refB}) {
		t.Fatalf("List after Reload = %v: the tombstone was lost", l)
	}
	if _, err := f.repo.Repair(context.Background(), "secondary"); err != nil {
		t.Fatal(err)
	}
	if h := f.repo.Holders(refA); h != nil {
		t.Fatalf("deleted checkpoint held by %v after repair", h)
	}
	if l := f.repo.List(); !slices.Equal(l, []ManifestRef{refB}) {
		t.Fatalf("List after repair = %v", l)
	}
	f.reopen(t)
	if l := f.repo.List(); !slices.Equal(l, []ManifestRef{refB}) {
		t.Fatalf("List after reopen = %v", l)
	}
	must(t, f.repo.GC(context.Background()))
	if n := storedBytes(t, f.faulty[1]); secondaryBefore-n < 5<<20 {
		t.Errorf("secondary: %d bytes before, %d after the GC", secondaryBefore, n)
	}
	for _, dir := range []string{packsDir, manifestsDir} {
		var names [2][]string
		for i := range 2 {
			infos, err := f.faulty[i].List(context.Background(), dir)
			must(t, err)
			for _, info := range infos {
				names[i] = append(names[i], info.Name)
			}
			slices.Sort(names[i])
		}
		if !slices.Equal(names[0], names[1]) {
			t.Errorf("%s differ: primary %v, secondary %v", dir, names[0], names[1])
		}
	}
	f.verifyClean(t)
	f.faulty[0].Inject(func(backendtest.Op, string) error { return errors.New("primary gone") })
	f.restoreEqual(t, refB, b)
}
