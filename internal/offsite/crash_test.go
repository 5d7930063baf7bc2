package offsite

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo"
)

// A cairnd killed in the middle of an off-site delete, after the first
// location committed its new head and before the second did, leaves the
// second listing the deleted checkpoint while the first records it as
// deleted. The restarted queue must bring the second up to date and free
// there what the delete freed in the first; before, it took the delete
// off its list as done (the repository, which merges the heads, no longer
// lists the checkpoint), and the second location kept the manifest, and
// the packs only it needed, for good (found by TestCrashTrials).
func TestDeleteCutShortBetweenTheLocationsIsFinished(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.checkpoint("c1", map[string][]byte{"a": randomBytes(t, 1<<20)})
	f.checkpoint("c2", map[string][]byte{"b": randomBytes(t, 100<<10)})
	f.drain()
	gone := f.row("c1").OffsiteManifest
	if gone == "" || f.row("c2").OffsiteManifest == "" {
		t.Fatal("not uploaded")
	}
	// The delete as the killed daemon left it: the row gone (its manifest
	// queued for deletion, in the same transaction), the repository's
	// delete committed in the first location only.
	if err := f.store.DeleteCheckpoint(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	first, err := repo.Open(ctx, f.svc.key, f.svc.locs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Delete(ctx, repo.ManifestRef{ID: gone}); err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(f.locationDir(1), "manifests", gone)
	if _, err := os.Stat(second); err != nil {
		t.Fatalf("the set-up is not the crash's state: the second location lacks the manifest: %v", err)
	}
	f.restart()
	f.drain()
	if _, err := os.Stat(second); !os.IsNotExist(err) {
		t.Fatalf("after the restart the second location still holds the deleted checkpoint's manifest (%v)", err)
	}
	if n := dirBytes(t, f.locationDir(1)); n > 512<<10 {
		t.Errorf("after the restart the second location still holds %d bytes: the 1 MiB only the deleted checkpoint needed was not freed", n)
	}
	for _, loc := range f.svc.Locations() {
		rep, err := f.svc.repo.Verify(ctx, loc)
		if err != nil || !rep.OK() {
			t.Fatalf("verify %s after the restart: %v %+v", loc, err, rep)
		}
	}
	if st, _ := f.state("c2"); st != "uploaded ×2" {
		t.Fatalf("c2: %s", st)
	}
}

// A cairnd killed after both locations committed the head without a
// deleted checkpoint, and before the second removed the objects that head
// no longer needs, leaves them there unlisted: no head names the manifest,
// so the restarted queue saw the delete as done and took it off, and
// nothing removed the manifest and packs until some later delete (found
// by TestCrashTrials: the manifest still in west a minute later, no
// repair logged).
func TestDeleteCutShortBeforeTheObjectsWentIsFinished(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.checkpoint("c1", map[string][]byte{"a": randomBytes(t, 1<<20)})
	f.checkpoint("c2", map[string][]byte{"b": randomBytes(t, 100<<10)})
	f.drain()
	gone := f.row("c1").OffsiteManifest
	if gone == "" || f.row("c2").OffsiteManifest == "" {
		t.Fatal("not uploaded")
	}
	second := f.locationDir(1)
	before := objectFiles(t, second)
	if err := f.store.DeleteCheckpoint(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	both, err := repo.Open(ctx, f.svc.key, f.svc.locs...)
	if err != nil {
		t.Fatal(err)
	}
	if err := both.Delete(ctx, repo.ManifestRef{ID: gone}); err != nil {
		t.Fatal(err)
	}
	// Put back in the second location what the delete removed after its
	// commit: the state of a kill between the two.
	for name, data := range before {
		if _, err := os.Stat(filepath.Join(second, name)); os.IsNotExist(err) && filepath.Dir(name) != "heads" {
			if err := os.WriteFile(filepath.Join(second, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	manifest := filepath.Join(second, "manifests", gone)
	if _, err := os.Stat(manifest); err != nil {
		t.Fatalf("the set-up is not the crash's state: %v", err)
	}
	f.restart()
	f.drain()
	if _, err := os.Stat(manifest); !os.IsNotExist(err) {
		t.Fatalf("after the restart the second location still holds the deleted checkpoint's manifest (%v)", err)
	}
	if n := dirBytes(t, second); n > 512<<10 {
		t.Errorf("after the restart the second location still holds %d bytes: the 1 MiB only the deleted checkpoint needed was not freed", n)
	}
	for _, loc := range f.svc.Locations() {
		rep, err := f.svc.repo.Verify(ctx, loc)
		if err != nil || !rep.OK() {
			t.Fatalf("verify %s after the restart: %v %+v", loc, err, rep)
		}
	}
	if st, _ := f.state("c2"); st != "uploaded ×2" {
		t.Fatalf("c2: %s", st)
	}
}

// objectFiles reads every file under dir, by its path relative to dir.
func objectFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
