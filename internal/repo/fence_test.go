package repo

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
)

// objects returns the names of every object in the fixture's locations.
func (f *fixture) objects(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for i, l := range f.locs {
		infos, err := f.faulty[i].List(context.Background(), "")
		must(t, err)
		for _, info := range infos {
			out[l.Name+":"+info.Name] = true
		}
	}
	return out
}

// A Repository opened before another one committed (a daemon on a host that
// lost the account, still running) must neither commit nor delete: its
// Backup, Delete and GC fail with ErrConflict in each location, and the
// repository stays as the current writer left it.
func TestStaleWriterIsFenced(t *testing.T) {
	ops := map[string]func(stale *Repository, src string, old ManifestRef) error{
		"backup": func(stale *Repository, src string, _ ManifestRef) error {
			_, st, err := stale.Backup(context.Background(), src, BackupOptions{})
			for _, name := range []string{"primary", "secondary"} {
				if !errors.Is(st.Failed[name], ErrConflict) {
					t.Errorf("backup: Failed[%s] = %v, want ErrConflict", name, st.Failed[name])
				}
			}
			return err
		},
		"delete": func(stale *Repository, _ string, old ManifestRef) error {
			return stale.Delete(context.Background(), old)
		},
		"gc": func(stale *Repository, _ string, _ ManifestRef) error {
			return stale.GC(context.Background())
		},
	}
	for name, op := range ops {
		// One commit since the stale writer read the heads (its next head
		// generation is taken) or two (that generation was taken and
		// removed again: only a newer head shows the conflict).
		for commits := 1; commits <= 2; commits++ {
			t.Run(fmt.Sprintf("%s/%d", name, commits), func(t *testing.T) {
				f := newFixture(t)
				old := filepath.Join(t.TempDir(), "old")
				write(t, filepath.Join(old, "a"), randomBytes(3<<20, 1))
				oldRef, _ := f.backup(t, old, nil)
				stale, err := Open(context.Background(), f.key, f.locs...)
				must(t, err)

				src := filepath.Join(t.TempDir(), "src")
				var ref ManifestRef
				for i := range commits {
					write(t, filepath.Join(src, fmt.Sprint(i)), randomBytes(2<<20, uint64(10+i)))
					ref, _ = f.backup(t, src, nil)
				}
				before := f.objects(t)

				// The stale writer's own changes, were they committed, would
				// drop the fresh checkpoint's objects as garbage.
				staleSrc := filepath.Join(t.TempDir(), "stale")
				write(t, filepath.Join(staleSrc, "s"), randomBytes(2<<20, 99))
				err = op(stale, staleSrc, oldRef)
				if !errors.Is(err, ErrConflict) {
					t.Fatalf("stale %s: %v, want ErrConflict", name, err)
				}
				for _, l := range f.locs {
					if u := stale.Unavailable(); !errors.Is(u[l.Name], ErrConflict) {
						t.Errorf("stale Unavailable[%s] = %v, want ErrConflict", l.Name, u[l.Name])
					}
				}
				after := f.objects(t)
				for o := range before {
					if !after[o] {
						t.Errorf("the stale writer removed %s", o)
					}
				}
				// Later writes by the stale Repository stay out.
				if _, _, err := stale.Backup(context.Background(), staleSrc, BackupOptions{}); !errors.Is(err, ErrConflict) {
					t.Errorf("second stale backup: %v", err)
				}

				// The current writer and a new reader see the fresh state.
				f.verifyClean(t)
				f.restoreEqual(t, ref, src)
				f.restoreEqual(t, oldRef, old)
				f.reopen(t)
				if l := f.repo.List(); len(l) != 1+commits || !slices.Contains(l, ref) || !slices.Contains(l, oldRef) {
					t.Fatalf("List after the stale %s = %v", name, l)
				}
				f.verifyClean(t)
				f.restoreEqual(t, ref, src)

				// Reloaded, the stale writer continues from the current state.
				must(t, stale.Reload(context.Background()))
				if u := stale.Unavailable(); u != nil {
					t.Fatalf("Unavailable after Reload = %v", u)
				}
				ref2, st, err := stale.Backup(context.Background(), staleSrc, BackupOptions{})
				must(t, err)
				if st.Failed != nil {
					t.Fatalf("backup after Reload failed in %v", st.Failed)
				}
				if l := stale.List(); len(l) != 2+commits || !slices.Contains(l, ref) || !slices.Contains(l, ref2) {
					t.Fatalf("List after Reload and backup = %v", l)
				}
				must(t, stale.GC(context.Background()))
				f.reopen(t)
				f.verifyClean(t)
				f.restoreEqual(t, ref, src)
				f.restoreEqual(t, ref2, staleSrc)
			})
		}
	}
}

// A stale writer commits where it is current: the fresh writer reached only
// the primary, so the stale one's backup lands in the secondary and is
// refused in the primary, which Stats.Failed reports.
func TestStaleWriterCommitsWhereItIsCurrent(t *testing.T) {
	f := newFixture(t)
	stale, err := Open(context.Background(), f.key, f.locs...)
	must(t, err)
	f.faulty[1].Inject(func(backendtest.Op, string) error { return errors.New("down") })
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "a"), randomBytes(1<<20, 1))
	ref, st, err := f.repo.Backup(context.Background(), src, BackupOptions{})
	must(t, err)
	if st.Failed["secondary"] == nil {
		t.Fatalf("Failed = %v", st.Failed)
	}
	f.faulty[1].Inject(nil)

	staleSrc := filepath.Join(t.TempDir(), "stale")
	write(t, filepath.Join(staleSrc, "b"), randomBytes(1<<20, 2))
	staleRef, st, err := stale.Backup(context.Background(), staleSrc, BackupOptions{})
	must(t, err)
	if len(st.Failed) != 1 || !errors.Is(st.Failed["primary"], ErrConflict) {
		t.Fatalf("Failed = %v, want ErrConflict in the primary only", st.Failed)
	}
	if h := stale.Holders(staleRef); !slices.Equal(h, []string{"secondary"}) {
		t.Fatalf("holders %v", h)
	}
	// Both checkpoints survive; Repair spreads them.
	f.reopen(t)
	for _, l := range f.locs {
		if _, err := f.repo.Repair(context.Background(), l.Name); err != nil {
			t.Fatal(err)
		}
	}
	f.verifyClean(t)
	f.restoreEqual(t, ref, src)
	f.restoreEqual(t, staleRef, staleSrc)
}

// Heads are named by generation, and a reader takes the highest even when a
// stale writer left an older head behind.
func TestHeadNames(t *testing.T) {
	f := newFixture(t)
	stale, err := Open(context.Background(), f.key, f.locs...)
	must(t, err)
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "a"), []byte("a"))
	f.backup(t, src, nil)
	write(t, filepath.Join(src, "b"), []byte("b"))
	ref, _ := f.backup(t, src, nil)
	infos, err := f.faulty[0].List(context.Background(), headsDir)
	must(t, err)
	if len(infos) != 1 || infos[0].Name != "heads/0000000000000003" {
		t.Fatalf("heads after three commits: %v", infos)
	}
	// The stale writer creates generation 2 (free again), then sees 3.
	if err := stale.GC(context.Background()); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale GC: %v", err)
	}
	infos, err = f.faulty[0].List(context.Background(), headsDir)
	must(t, err)
	var names []string
	for _, i := range infos {
		names = append(names, strings.TrimPrefix(i.Name, headsDir))
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"0000000000000002", "0000000000000003"}) {
		t.Fatalf("heads after the stale commit: %v", names)
	}
	f.reopen(t)
	if l := f.repo.List(); len(l) != 2 || !slices.Contains(l, ref) {
		t.Fatalf("List = %v", l)
	}
	f.verifyClean(t)
	// The next commit removes the stale head.
	must(t, f.repo.GC(context.Background()))
	infos, err = f.faulty[0].List(context.Background(), headsDir)
	must(t, err)
	if len(infos) != 1 || infos[0].Name != "heads/0000000000000004" {
		t.Fatalf("heads after the next commit: %v", infos)
	}
}
