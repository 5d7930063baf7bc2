package image

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

type reported struct {
	p    api.Progress
	line string
}

func loopCatalog(t *testing.T) (*Catalog, *volume.Pool) {
	t.Helper()
	testenv.Require(t, "mkfs.btrfs", "btrfs", "busybox")
	dir := t.TempDir()
	pool, err := volume.OpenLoop(context.Background(), dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	return New(pool, filepath.Join(dir, "cache"), nil), pool
}

// A build reports each step in phase image, the applets it linked counted;
// Ensure gives the same lines as text; an image being built by another
// request is waited for in phase wait.
func TestBuildReportsPhaseAndCounts(t *testing.T) {
	ctx := context.Background()
	c, pool := loopCatalog(t)
	var got []reported
	if _, err := c.EnsureWithProgress(ctx, "busybox", func(p api.Progress, line string) { got = append(got, reported{p, line}) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].line != "Building image busybox" || got[2].line != "Image busybox ready" {
		t.Fatalf("reported %+v", got)
	}
	for _, r := range got {
		if r.p.Phase != api.PhaseImage {
			t.Errorf("%q in phase %q, want %q", r.line, r.p.Phase, api.PhaseImage)
		}
	}
	if got[0].p.Counted() || got[2].p.Counted() {
		t.Errorf("steps with counts: %+v", got)
	}
	if n := got[1].p; n.Done < 100 || n.Total != n.Done || n.Unit != api.UnitFiles {
		t.Errorf("applets reported as %+v (%q), want over 100 files", n, got[1].line)
	}

	// Again through Ensure, after deleting the image: the same lines.
	if err := pool.Delete(ctx, pool.ImagePath("busybox")); err != nil {
		t.Fatal(err)
	}
	var lines []string
	if _, err := c.Ensure(ctx, "busybox", func(line string) { lines = append(lines, line) }); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range got {
		want = append(want, r.line)
	}
	if !slices.Equal(lines, want) {
		t.Errorf("Ensure gave %q, want %q", lines, want)
	}

	// A build of "debian" in progress elsewhere (as Ensure records it).
	other := &build{done: make(chan struct{})}
	c.mu.Lock()
	c.building["debian"] = other
	c.mu.Unlock()
	waited := make(chan reported, 1)
	res := make(chan error)
	go func() {
		_, err := c.EnsureWithProgress(ctx, "debian", func(p api.Progress, line string) { waited <- reported{p, line} })
		res <- err
	}()
	select {
	case r := <-waited:
		if r.p.Phase != api.PhaseWait {
			t.Errorf("waiting reported as %+v %q", r.p, r.line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no report while waiting")
	}
	other.err = context.Canceled
	c.mu.Lock()
	delete(c.building, "debian")
	c.mu.Unlock()
	close(other.done)
	if err := <-res; err != context.Canceled {
		t.Errorf("waiting for a failed build: %v", err)
	}
}
