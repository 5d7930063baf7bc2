package buildctx_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// image is an image root to copy into, with a directory beside it that
// no copy may touch.
type image struct {
	base, root, outside string
	before              []string // outside's listing
	hostEtc             []string // the host's /etc, its names
}

func newImage(t *testing.T) *image {
	t.Helper()
	testenv.Require(t)
	base := t.TempDir()
	im := &image{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	must(t, os.Mkdir(im.root, 0o755))
	tree(t, im.outside, "keep", "k", "sub/keep", "k")
	im.before = listing(t, im.outside)
	im.hostEtc = dirNames(t, "/etc")
	t.Cleanup(func() { im.untouched(t) })
	return im
}

func dirNames(t testing.TB, dir string) []string {
	entries, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// untouched checks that nothing outside the root changed.
func (im *image) untouched(t *testing.T) {
	t.Helper()
	equal(t, listing(t, im.outside), im.before)
	for _, p := range []string{filepath.Join(im.outside, "keep"), filepath.Join(im.outside, "sub")} {
		if uid, gid := owner(t, p); uid != 0 || gid != 0 {
			t.Errorf("%s: owner changed to %d:%d", p, uid, gid)
		}
	}
	if got := dirNames(t, im.base); !slices.Equal(got, []string{"outside", "root"}) {
		t.Errorf("beside the root: %q", got)
	}
	if got := dirNames(t, "/etc"); !slices.Equal(got, im.hostEtc) {
		t.Errorf("the host's /etc changed: %q", got)
	}
}

// copy copies the context dir's patterns to dest in the image.
func (im *image) copy(t *testing.T, ctxDir string, patterns []string, dest string, opts buildctx.CopyOptions) error {
	t.Helper()
	srcs, err := buildctx.Sources(openDir(t, ctxDir), patterns)
	must(t, err)
	return buildctx.Copy(context.Background(), openDir(t, im.root), srcs, dest, opts)
}

func (im *image) path(rel string) string { return filepath.Join(im.root, rel) }

func TestCopyRules(t *testing.T) {
	ctxDir := contextDir(t)
	tests := []struct {
		name     string
		prepare  []string // tree spec of the root before
		patterns []string
		dest     string
		opts     buildctx.CopyOptions
		want     []string // tree of the root after, below want's prefix
		prefix   string
	}{
		{
			name: "a file into a directory", patterns: []string{"a.txt"}, dest: "/d/",
			prefix: "d", want: []string{"a.txt -rw-r--r-- a"},
		},
		{
			name: "a file to a new name", patterns: []string{"a.txt"}, dest: "/d/new",
			prefix: "d", want: []string{"new -rw-r--r-- a"},
		},
		{
			name: "a file into an existing directory, no slash", prepare: []string{"d/", ""},
			patterns: []string{"a.txt"}, dest: "/d",
			prefix: "d", want: []string{"a.txt -rw-r--r-- a"},
		},
		{
			name: "a file replaces a file", prepare: []string{"d/a.txt", "old", "d/other", "o"},
			patterns: []string{"a.txt"}, dest: "/d/",
			prefix: "d", want: []string{"a.txt -rw-r--r-- a", "other -rw-r--r-- o"},
		},
		{
			name: "a directory copies what it holds", patterns: []string{"src"}, dest: "/app",
			prefix: "app", want: []string{
				"sub drwxr-xr-x", "sub/z.go -rw-r--r-- z", "x.go -rw-r--r-- x", "y.go -rw-r--r-- y",
			},
		},
		{
			name: "a directory merges into one", prepare: []string{"app/old", "o", "app/sub/old", "o"},
			patterns: []string{"src"}, dest: "/app/",
			prefix: "app", want: []string{
				"old -rw-r--r-- o", "sub drwxr-xr-x", "sub/old -rw-r--r-- o", "sub/z.go -rw-r--r-- z",
				"x.go -rw-r--r-- x", "y.go -rw-r--r-- y",
			},
		},
		{
			name: "a directory replaces a file inside", prepare: []string{"app/sub", "a file"},
			patterns: []string{"src"}, dest: "/app",
			prefix: "app", want: []string{
				"sub drwxr-xr-x", "sub/z.go -rw-r--r-- z", "x.go -rw-r--r-- x", "y.go -rw-r--r-- y",
			},
		},
		{
			name: "a wildcard", patterns: []string{"*.txt"}, dest: "/t/",
			prefix: "t", want: []string{"a.txt -rw-r--r-- a", "b.txt -rw-r--r-- b"},
		},
		{
			name: "several sources", patterns: []string{"c.md", "src/sub", "a.txt"}, dest: "/t/",
			prefix: "t", want: []string{"a.txt -rw-r--r-- a", "c.md -rw-r--r-- c", "z.go -rw-r--r-- z"},
		},
		{
			name: "a symbolic link is copied as one", patterns: []string{"passwd", "current"}, dest: "/l/",
			prefix: "l", want: []string{"current Lrwxrwxrwx -> src", "passwd Lrwxrwxrwx -> /etc/passwd"},
		},
		{
			name: "the context's root", patterns: []string{"."}, dest: "/c",
			prefix: "c/src", want: []string{
				"sub drwxr-xr-x", "sub/z.go -rw-r--r-- z", "x.go -rw-r--r-- x", "y.go -rw-r--r-- y",
			},
		},
		{
			name: "relative to the working directory", patterns: []string{"a.txt"}, dest: "rel/",
			opts:   buildctx.CopyOptions{WorkDir: "/work"},
			prefix: "work", want: []string{"rel drwxr-xr-x", "rel/a.txt -rw-r--r-- a"},
		},
		{
			name: "dot is the working directory", patterns: []string{"a.txt"}, dest: ".",
			opts:   buildctx.CopyOptions{WorkDir: "/work"},
			prefix: "work", want: []string{"a.txt -rw-r--r-- a"},
		},
		{
			name: "a symbolic link to a directory is copied into", prepare: []string{"usr/lib/", "", "lib", "-> usr/lib"},
			patterns: []string{"a.txt"}, dest: "/lib/",
			prefix: "usr", want: []string{"lib drwxr-xr-x", "lib/a.txt -rw-r--r-- a"},
		},
		{
			name: "a symbolic link to a directory inside is merged into", prepare: []string{"usr/lib/", "", "app/sub", "-> /usr/lib"},
			patterns: []string{"src"}, dest: "/app",
			prefix: "usr", want: []string{"lib drwxr-xr-x", "lib/z.go -rw-r--r-- z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im := newImage(t)
			tree(t, im.root, tt.prepare...)
			must(t, im.copy(t, ctxDir, tt.patterns, tt.dest, tt.opts))
			equal(t, listing(t, im.path(tt.prefix)), tt.want)
		})
	}
}

func TestCopyKeepsTimesAndMakesParents(t *testing.T) {
	im := newImage(t)
	ctxDir := contextDir(t)
	must(t, os.Chtimes(filepath.Join(ctxDir, "src/sub"), t0, t0))
	must(t, im.copy(t, ctxDir, []string{"src"}, "/a/b/c", buildctx.CopyOptions{UID: 1000, GID: 2000}))
	for _, p := range []string{"a", "a/b", "a/b/c", "a/b/c/sub", "a/b/c/x.go", "a/b/c/sub/z.go"} {
		if uid, gid := owner(t, im.path(p)); uid != 1000 || gid != 2000 {
			t.Errorf("%s: owner %d:%d, want 1000:2000", p, uid, gid)
		}
	}
	for _, p := range []string{"a", "a/b"} {
		if st, err := os.Stat(im.path(p)); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, %v: want 0755", p, st.Mode(), err)
		}
	}
	for _, p := range []string{"a/b/c/sub", "a/b/c/x.go"} {
		if st, err := os.Stat(im.path(p)); err != nil || !st.ModTime().Equal(t0) {
			t.Errorf("%s: time %v, %v: want %v", p, st.ModTime(), err, t0)
		}
	}
}

func TestCopyChownChmod(t *testing.T) {
	im := newImage(t)
	ctxDir := contextDir(t)
	tree(t, im.root, "app/", "", "app/old", "o")
	mode := fs.FileMode(0o640) | fs.ModeSetgid
	opts := buildctx.CopyOptions{UID: 1000, GID: 2000, Chmod: &mode}
	must(t, im.copy(t, ctxDir, []string{"src", "current"}, "/app/", opts))
	for _, p := range []string{"app/x.go", "app/sub", "app/sub/z.go", "app/current"} {
		if uid, gid := owner(t, im.path(p)); uid != 1000 || gid != 2000 {
			t.Errorf("%s: owner %d:%d, want 1000:2000", p, uid, gid)
		}
	}
	for _, p := range []string{"app/x.go", "app/sub/z.go"} {
		if st, err := os.Lstat(im.path(p)); err != nil || st.Mode() != mode {
			t.Errorf("%s: mode %v, %v: want %v", p, st.Mode(), err, mode)
		}
	}
	if st, err := os.Lstat(im.path("app/sub")); err != nil || st.Mode() != fs.ModeDir|mode {
		t.Errorf("app/sub: mode %v, %v", st.Mode(), err)
	}
	// What was there keeps its owner and mode.
	for _, p := range []string{"app", "app/old"} {
		if uid, _ := owner(t, im.path(p)); uid != 0 {
			t.Errorf("%s (there before): owner %d", p, uid)
		}
	}
	if st, err := os.Lstat(im.path("app")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("app (there before): mode %v, %v", st.Mode(), err)
	}
}

func TestCopyRefusals(t *testing.T) {
	ctxDir := contextDir(t)
	for _, tt := range []struct {
		name     string
		prepare  []string
		patterns []string
		dest     string
	}{
		{"several sources to a file", nil, []string{"a.txt", "b.txt"}, "/t"},
		{"a wildcard of several to a file", nil, []string{"*.txt"}, "/t"},
		{"several sources to an existing directory with no slash", []string{"t/", ""}, []string{"a.txt", "b.txt"}, "/t"},
		{"a directory onto a file", []string{"app", "f"}, []string{"src"}, "/app"},
		{"a file onto a directory", []string{"d/a.txt/", ""}, []string{"a.txt"}, "/d/"},
		{"a path through a file", []string{"f", "x"}, []string{"a.txt"}, "/f/a"},
		{"an empty destination", nil, []string{"a.txt"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			im := newImage(t)
			tree(t, im.root, tt.prepare...)
			err := im.copy(t, ctxDir, tt.patterns, tt.dest, buildctx.CopyOptions{})
			if !errors.Is(err, buildctx.ErrDest) {
				t.Errorf("got %v, want ErrDest", err)
			}
		})
	}
}

func TestCopySkipsSpecialFiles(t *testing.T) {
	im := newImage(t)
	ctxDir := contextDir(t)
	must(t, syscall.Mkfifo(filepath.Join(ctxDir, "src/fifo"), 0o644))
	must(t, im.copy(t, ctxDir, []string{"src"}, "/app", buildctx.CopyOptions{}))
	if _, err := os.Lstat(im.path("app/fifo")); err == nil {
		t.Error("a FIFO inside a directory was copied")
	}
	err := im.copy(t, ctxDir, []string{"src/fifo"}, "/f", buildctx.CopyOptions{})
	if !errors.Is(err, buildctx.ErrUnsupported) {
		t.Errorf("a FIFO as the source: got %v, want ErrUnsupported", err)
	}
}
