package repo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend/retry"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

// Two real S3 servers as the two locations: round trip, what the stores
// see, one server down during a backup and back again.
func TestTwoS3Locations(t *testing.T) {
	ctx := context.Background()
	var servers [2]*s3test.Server
	var locs []Location
	for i, name := range []string{"s3-a", "s3-b"} {
		servers[i] = s3test.Start(t)
		cfg := servers[i].Config
		cfg.Prefix = "b7c1e0d2f9a8" // a random per-account prefix
		b, err := s3.New(cfg)
		must(t, err)
		locs = append(locs, Location{Name: name, Backend: retry.New(b, retry.Policy{Attempts: 2})})
	}
	key, err := crypto.NewKey()
	must(t, err)
	r, err := Init(ctx, key, locs...)
	must(t, err)
	stale, err := Open(ctx, key, locs...)
	must(t, err)
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	ref1, st, err := r.Backup(ctx, src, BackupOptions{})
	must(t, err)
	if st.Failed != nil {
		t.Fatalf("failed: %v", st.Failed)
	}
	// The conditional PUT of the head fences a writer that read before.
	if err := stale.GC(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale GC: %v, want ErrConflict", err)
	}
	r, err = Open(ctx, key, locs...)
	must(t, err)
	dst := filepath.Join(t.TempDir(), "dst")
	must(t, r.Restore(ctx, ref1, dst, RestoreOptions{}))
	compareTrees(t, src, dst)
	for _, srv := range servers {
		must(t, filepath.WalkDir(srv.Dir(), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, s := range []string{secret, "confidential-plans"} {
				if bytes.Contains(data, []byte(s)) || bytes.Contains([]byte(p), []byte(s)) {
					t.Errorf("%s contains %q", p, s)
				}
			}
			return nil
		}))
	}

	// Second server down: the backup lands in the first only (×1).
	servers[1].Stop()
	write(t, filepath.Join(src, "new-file"), randomBytes(1<<20, 5))
	ref2, st, err := r.Backup(ctx, src, BackupOptions{Parent: &ref1})
	must(t, err)
	if st.Failed["s3-b"] == nil || !slices.Equal(r.Holders(ref2), []string{"s3-a"}) {
		t.Fatalf("failed %v, holders %v", st.Failed, r.Holders(ref2))
	}
	// Back up again: repair converges to ×2.
	servers[1].Restart(t)
	if _, err := r.Repair(ctx, "s3-b"); err != nil {
		t.Fatal(err)
	}
	if h := r.Holders(ref2); len(h) != 2 {
		t.Fatalf("holders after repair: %v", h)
	}
	for _, l := range locs {
		rep, err := r.Verify(ctx, l.Name)
		must(t, err)
		if !rep.OK() {
			t.Fatalf("verify %s: %+v", l.Name, rep)
		}
	}
	dst2 := filepath.Join(t.TempDir(), "dst2")
	must(t, r.Restore(ctx, ref2, dst2, RestoreOptions{}))
	compareTrees(t, src, dst2)
}
