package offsite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/hosttree/hosttreetest"
	"github.com/cairn-sandbox/cairn/internal/repo"
)

// A checkpoint of a tree past PATH_MAX, with odd names and links out of
// it, uploads (it used to fail with "file name too long" and be retried
// for ever) and restores exactly.
func TestADeepOddTreeUploadsAndRestores(t *testing.T) {
	f := newFixture(t)
	ck := f.checkpoint("c1", map[string][]byte{"etc/hostname": []byte("web\n")})
	hosttreetest.OddTree(t, f.disks.dirs[ck.ID])
	f.drain()
	if st, d := f.state(ck.ID); st != "uploaded ×2" {
		t.Fatalf("state %s (%+v)", st, d)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := f.svc.Restore(t.Context(), f.row(ck.ID), dst, nil); err != nil {
		t.Fatal(err)
	}
	hosttreetest.Equal(t, f.disks.dirs[ck.ID], dst)
}

// A tree the repository cannot store is marked unstorable with its reason,
// cut short, and the queue does not try it again, after a restart neither.
func TestAnUnstorableCheckpointIsNotRetried(t *testing.T) {
	f := newFixture(t)
	ck := f.checkpoint("c1", map[string][]byte{"a": []byte("a")})
	long := strings.Repeat("deep/", 1000)
	f.svc.markUnstorable(t.Context(), ck, fmt.Errorf("backup: %s: %w", long, repo.ErrUnstorable))
	st, d := f.state(ck.ID)
	if st != api.OffsiteUnstorable || !strings.Contains(d.Error, "cannot store") || len(d.Error) > maxErrText+10 {
		t.Fatalf("state %s, error of %d bytes: %.100q", st, len(d.Error), d.Error)
	}
	f.drain()
	if f.row(ck.ID).OffsiteManifest != "" {
		t.Fatal("an unstorable checkpoint was tried again")
	}
	f.restart()
	if st, d := f.state(ck.ID); st != api.OffsiteUnstorable || !strings.Contains(d.Error, "cannot store") {
		t.Fatalf("after a restart: state %s (%+v), want unstorable with its reason", st, d)
	}
	f.drain()
	if f.row(ck.ID).OffsiteManifest != "" {
		t.Fatal("an unstorable checkpoint was tried again after a restart")
	}
	// A failure that may pass is "failed" and retried.
	ck2 := f.checkpoint("c2", map[string][]byte{"b": []byte("b")})
	f.svc.failCheckpoint(ck2.ID, fmt.Errorf("backup: %s: connection refused", long), false)
	if st, d := f.state(ck2.ID); st != api.OffsiteFailed || len(d.Error) > maxErrText+10 {
		t.Fatalf("state %s, error of %d bytes", st, len(d.Error))
	}
}
