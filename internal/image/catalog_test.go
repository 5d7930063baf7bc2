package image

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

type reported struct {
	p    api.Progress
	line string
}

func loopCatalog(t *testing.T) (*Catalog, *volume.Pool) {
	t.Helper()
	testenv.Require(t, "busybox")
	pool, dir := loopPool(t, 1<<30)
	return New(pool, filepath.Join(dir, "cache"), nil), pool
}

// loopPool is a pool of size bytes on a loop file in a new directory
// (returned too), unmounted when t ends.
func loopPool(t *testing.T, size int64) (*volume.Pool, string) {
	t.Helper()
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	dir := t.TempDir()
	pool, err := volume.OpenLoop(context.Background(), dir, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	return pool, dir
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

// An image with a base starts from a writable snapshot of it, the base
// built first (its steps reported in line); a failed build leaves neither
// its work subvolume nor an image, and the base as it was.
func TestBuildOnABase(t *testing.T) {
	ctx := context.Background()
	c, pool := loopCatalog(t)
	fail := false
	c.builders["layer"] = builder{base: "busybox", build: func(ctx context.Context, dir string, report Reporter) error {
		if _, err := os.Lstat(filepath.Join(dir, "bin/busybox")); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "etc/layer"), []byte("on top\n"), 0o644); err != nil {
			return err
		}
		if fail {
			return errors.New("apt-get: exit status 100")
		}
		report.step("Added a layer")
		return nil
	}}
	var lines []string
	path, err := c.Ensure(ctx, "layer", func(line string) { lines = append(lines, line) })
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 7 || !slices.Equal(lines[:2], []string{"Building image layer", "Building image busybox"}) ||
		!slices.Equal(lines[3:], []string{"Image busybox ready", "Image layer starts from image busybox", "Added a layer", "Image layer ready"}) {
		t.Fatalf("reported %q", lines)
	}
	if b, err := os.ReadFile(filepath.Join(path, "etc/layer")); err != nil || string(b) != "on top\n" {
		t.Fatalf("the layer's file: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(pool.ImagePath("busybox"), "etc/layer")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the layer's file in its base: %v", err)
	}

	// Built again from the base that is there, and failing.
	if err := pool.Delete(ctx, path); err != nil {
		t.Fatal(err)
	}
	fail, lines = true, nil
	if _, err := c.Ensure(ctx, "layer", func(line string) { lines = append(lines, line) }); errdefs.CodeOf(err) != api.CodeImageBuildFailed {
		t.Fatalf("a failed build: %v, want %s", err, api.CodeImageBuildFailed)
	}
	if !slices.Equal(lines, []string{"Building image layer", "Image layer starts from image busybox"}) {
		t.Errorf("reported %q", lines)
	}
	for _, p := range []string{path, pool.TempPath("image-layer"), filepath.Join(pool.ImagePath("busybox"), "etc/layer")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a failed build: %v", p, err)
		}
	}
}

// The built-in images are listed with a description each; an image pulled
// under a name cairn later had built in stays what that name means.
func TestBuiltinsAndAPulledNamesake(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	pool, err := volume.OpenLoop(ctx, dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	store, err := sqlite.Open(filepath.Join(dir, "cairn.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := New(pool, filepath.Join(dir, "cache"), store)

	list, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, img := range list {
		names = append(names, img.Name)
		if img.Description == "" || img.Ready {
			t.Errorf("built-in %+v: no description, or ready before a build", img)
		}
	}
	if !slices.Equal(names, []string{"busybox", "debian", "node", "python"}) {
		t.Fatalf("built-in images %q", names)
	}
	if c.builders["python"].base != "debian" || c.builders["node"].base != "debian" {
		t.Errorf("python and node do not start from debian")
	}

	// A "python" pulled before: listed once, as pulled, and used as it is.
	if err := pool.Create(ctx, pool.ImagePath("python")); err != nil {
		t.Fatal(err)
	}
	rec := metadata.Image{Name: "python", Digest: "sha256:" + strings.Repeat("ab", 32), Source: "python:3.12", DiskPath: "images/python", CreatedAt: time.Now()}
	if err := store.CreateImage(ctx, rec); err != nil {
		t.Fatal(err)
	}
	list, err = c.List()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, img := range list {
		if img.Name == "python" {
			n++
			if img.Source != "python:3.12" {
				t.Errorf("python listed as %+v, want the pulled one", img)
			}
		}
	}
	if n != 1 {
		t.Errorf("python listed %d times", n)
	}
	var lines []string
	if path, err := c.Ensure(ctx, "python", func(line string) { lines = append(lines, line) }); err != nil || path != pool.ImagePath("python") || len(lines) != 0 {
		t.Errorf("Ensure of the pulled python: %q %v, reported %q", path, err, lines)
	}
}
