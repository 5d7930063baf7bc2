package build

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/image/cache"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// testBuilder is a Builder over a real pool on a loop file, whose RUN
// steps a fake runner does on the host (run), and whose FROM is an empty
// subvolume ("base").
type testBuilder struct {
	*Builder
	t      *testing.T
	pool   *volume.Pool
	cache  *cache.Cache
	runner *fakeRunner
	images *fakeImages
}

func newTestBuilder(t *testing.T) *testBuilder {
	t.Helper()
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	dir := t.TempDir()
	pool, err := volume.OpenLoop(context.Background(), dir, 512<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	base := pool.ImagePath("base")
	if err := pool.Create(context.Background(), base); err != nil {
		t.Fatal(err)
	}
	c := cache.New(pool)
	tb := &testBuilder{t: t, pool: pool, cache: c, runner: &fakeRunner{}, images: &fakeImages{base: base}}
	tb.Builder = New(pool, c, tb.images, tb.runner)
	return tb
}

// build builds dockerfile with a context of files for account, and
// returns the output lines and the error.
func (tb *testBuilder) build(account int64, dockerfile string, files map[string]string, mod func(*Request)) ([]string, error) {
	tb.t.Helper()
	ctxDir := tb.t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ctxDir, name), []byte(content), 0o644); err != nil {
			tb.t.Fatal(err)
		}
	}
	req := Request{Account: account, Context: ctxDir, Dockerfile: []byte(dockerfile), Name: "img", Network: metadata.NetworkNone}
	if mod != nil {
		mod(&req)
	}
	var lines []string
	var mu sync.Mutex
	_, err := tb.Build(context.Background(), req, func(_ api.Progress, line string) {
		mu.Lock()
		lines = append(lines, line)
		mu.Unlock()
	})
	return lines, err
}

// leftovers fails the test if the pool's work area holds anything.
func (tb *testBuilder) leftovers() {
	tb.t.Helper()
	if es, _ := os.ReadDir(filepath.Join(tb.pool.Root(), "tmp")); len(es) != 0 {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		tb.t.Errorf("left in the pool's work area: %s", strings.Join(names, " "))
	}
}

// fakeRunner runs a RUN step on the host: run, or by default writing the
// step's command line to /ran in its root.
type fakeRunner struct {
	mu    sync.Mutex
	specs []RunSpec
	run   func(ctx context.Context, spec RunSpec) (int, error)
}

func (f *fakeRunner) Run(ctx context.Context, spec RunSpec) (int, error) {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	run := f.run
	f.mu.Unlock()
	if run != nil {
		return run(ctx, spec)
	}
	return 0, os.WriteFile(filepath.Join(spec.Root, "ran"), []byte(strings.Join(spec.Args, " ")), 0o644)
}

func (f *fakeRunner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}

func (f *fakeRunner) last() RunSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.specs[len(f.specs)-1]
}

// fakeImages has one base, an empty subvolume, and installs an image by
// keeping a copy of the file /ran of its tree.
type fakeImages struct {
	base      string
	mu        sync.Mutex
	installed []string // /ran of each image installed
}

func (f *fakeImages) Base(ctx context.Context, ref string, report Reporter) (Base, error) {
	return Base{Path: f.base, ID: "test-base"}, nil
}

func (f *fakeImages) Install(ctx context.Context, rec metadata.Image, src func() (string, error), report Reporter) (api.Image, error) {
	dir, err := src()
	if err != nil {
		return api.Image{}, err
	}
	ran, _ := os.ReadFile(filepath.Join(dir, "ran"))
	f.mu.Lock()
	f.installed = append(f.installed, string(ran))
	f.mu.Unlock()
	return api.Image{Name: rec.Name, Digest: rec.Digest}, nil
}
