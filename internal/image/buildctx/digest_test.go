package buildctx_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
)

func digestOf(t testing.TB, dir string, patterns ...string) string {
	t.Helper()
	root := openDir(t, dir)
	srcs, err := buildctx.Sources(root, patterns)
	must(t, err)
	d, err := buildctx.Digest(context.Background(), srcs)
	must(t, err)
	return d
}

func TestDigest(t *testing.T) {
	dir := contextDir(t)
	base := digestOf(t, dir, "src", "a.txt")
	if !strings.HasPrefix(base, "sha256:") || len(base) != len("sha256:")+64 {
		t.Fatalf("digest %q", base)
	}
	if again := digestOf(t, dir, "src", "a.txt"); again != base {
		t.Error("two digests of the same sources differ")
	}
	changes := []struct {
		name   string
		change func(t *testing.T)
		same   bool
	}{
		{"mtime of a file", func(t *testing.T) {
			later := time.Now().Add(time.Hour)
			must(t, os.Chtimes(filepath.Join(dir, "src/x.go"), later, later))
		}, true},
		{"mtime of a directory", func(t *testing.T) {
			must(t, os.Chtimes(filepath.Join(dir, "src/sub"), t0, t0))
		}, true},
		{"owner", func(t *testing.T) {
			must(t, os.Lchown(filepath.Join(dir, "src/y.go"), 1000, 1000))
			must(t, os.Chmod(filepath.Join(dir, "src/y.go"), 0o644))
		}, true},
		{"a file outside the sources", func(t *testing.T) {
			must(t, os.WriteFile(filepath.Join(dir, "lib/new"), []byte("n"), 0o644))
		}, true},
		{"one byte of a file", func(t *testing.T) {
			must(t, os.WriteFile(filepath.Join(dir, "src/sub/z.go"), []byte("Z"), 0o644))
		}, false},
		{"a new file", func(t *testing.T) {
			must(t, os.WriteFile(filepath.Join(dir, "src/sub/new"), nil, 0o644))
		}, false},
		{"a new empty directory", func(t *testing.T) {
			must(t, os.Mkdir(filepath.Join(dir, "src/empty"), 0o755))
		}, false},
		{"a mode", func(t *testing.T) {
			must(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o600))
		}, false},
		{"setuid", func(t *testing.T) {
			must(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o600|os.ModeSetuid))
		}, false},
		{"a link's target", func(t *testing.T) {
			must(t, os.Symlink("x.go", filepath.Join(dir, "src/link")))
		}, false},
		{"a link's target changed", func(t *testing.T) {
			must(t, os.Remove(filepath.Join(dir, "src/link")))
			must(t, os.Symlink("y.go", filepath.Join(dir, "src/link")))
		}, false},
		{"a file renamed", func(t *testing.T) {
			must(t, os.Rename(filepath.Join(dir, "src/x.go"), filepath.Join(dir, "src/w.go")))
		}, false},
		{"a file moved into a directory", func(t *testing.T) {
			must(t, os.Rename(filepath.Join(dir, "src/w.go"), filepath.Join(dir, "src/sub/w.go")))
		}, false},
	}
	prev := base
	for _, c := range changes {
		c.change(t)
		got := digestOf(t, dir, "src", "a.txt")
		if c.same && got != prev {
			t.Errorf("%s: the digest changed", c.name)
		}
		if !c.same && got == prev {
			t.Errorf("%s: the digest did not change", c.name)
		}
		prev = got
	}
}

func TestDigestNamesAndOrder(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, "a", "same", "b", "same", "d/a", "same")
	if digestOf(t, dir, "a") == digestOf(t, dir, "b") {
		t.Error("two files of the same content under other names: same digest")
	}
	if digestOf(t, dir, "a", "b") == digestOf(t, dir, "b", "a") {
		t.Error("the order of the sources does not count")
	}
	// A directory's own name is not copied, only what it holds.
	other := t.TempDir()
	tree(t, other, "e/a", "same")
	if digestOf(t, dir, "d") != digestOf(t, other, "e") {
		t.Error("two directories holding the same: digests differ")
	}
	// A file and a directory holding it differ.
	if digestOf(t, dir, "a") == digestOf(t, dir, "d") {
		t.Error("a file and a directory holding it: same digest")
	}
}
