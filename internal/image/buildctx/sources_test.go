package buildctx_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
)

// contextDir is an extracted build context for the tests.
func contextDir(t testing.TB) string {
	dir := t.TempDir()
	tree(t, dir,
		".cairn-build/Dockerfile", "FROM x",
		"a.txt", "a",
		"b.txt", "b",
		"c.md", "c",
		"src/x.go", "x",
		"src/y.go", "y",
		"src/sub/z.go", "z",
		"lib/l.go", "l",
		"current", "-> src",
		"escape", "-> ../../../../..",
		"passwd", "-> /etc/passwd",
		"abs", "-> /src",
		"hidden", "-> .cairn-build",
	)
	return dir
}

func paths(srcs []buildctx.Source) []string {
	var out []string
	for _, s := range srcs {
		out = append(out, s.Path)
	}
	return out
}

func TestSources(t *testing.T) {
	root := openDir(t, contextDir(t))
	tests := []struct {
		patterns []string
		want     []string
	}{
		{[]string{"a.txt"}, []string{"a.txt"}},
		{[]string{"/a.txt", "./b.txt"}, []string{"a.txt", "b.txt"}},
		{[]string{"src/../a.txt"}, []string{"a.txt"}},
		{[]string{"*.txt"}, []string{"a.txt", "b.txt"}},
		{[]string{"[ac].*"}, []string{"a.txt", "c.md"}},
		{[]string{"*/*.go"}, []string{"abs/x.go", "abs/y.go", "current/x.go", "current/y.go", "lib/l.go", "src/x.go", "src/y.go"}},
		{[]string{"src/*"}, []string{"src/sub", "src/x.go", "src/y.go"}},
		{[]string{"."}, []string{"."}},
		{[]string{"/"}, []string{"."}},
		{[]string{"src"}, []string{"src"}},
		// A link as the last component is a source of its own.
		{[]string{"current"}, []string{"current"}},
		{[]string{"passwd"}, []string{"passwd"}},
		// Links on the way are followed inside the context.
		{[]string{"current/sub/z.go"}, []string{"current/sub/z.go"}},
		{[]string{"abs/x.go"}, []string{"abs/x.go"}},
		{[]string{"escape/a.txt"}, []string{"escape/a.txt"}},
		// The reserved directory is no source.
		{[]string{".*"}, nil},
		{[]string{"*"}, []string{"a.txt", "abs", "b.txt", "c.md", "current", "escape", "hidden", "lib", "passwd", "src"}},
	}
	for _, tt := range tests {
		srcs, err := buildctx.Sources(root, tt.patterns)
		if tt.want == nil {
			if !errors.Is(err, buildctx.ErrNotFound) {
				t.Errorf("%q: got %v, %v, want ErrNotFound", tt.patterns, paths(srcs), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.patterns, err)
			continue
		}
		if got := paths(srcs); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%q: got %q, want %q", tt.patterns, got, tt.want)
		}
	}
	srcs, err := buildctx.Sources(root, []string{"src", "a.txt", "current"})
	must(t, err)
	if !srcs[0].IsDir() || srcs[1].IsDir() || srcs[2].IsDir() || srcs[1].Mode.Perm() != 0o644 {
		t.Errorf("modes %v %v %v", srcs[0].Mode, srcs[1].Mode, srcs[2].Mode)
	}
}

func TestSourcesRefused(t *testing.T) {
	root := openDir(t, contextDir(t))
	for _, tt := range []struct {
		pattern string
		want    error
		msg     string
	}{
		{"../x", buildctx.ErrOutside, "outside the build context"},
		{"src/../../x", buildctx.ErrOutside, "outside the build context"},
		{"/../etc/passwd", buildctx.ErrOutside, "outside the build context"},
		{"missing", buildctx.ErrNotFound, `"missing": file not found in the build context`},
		{"*.none", buildctx.ErrNotFound, "no source files were specified"},
		{"src/x.go/y", buildctx.ErrNotFound, "not found"},
		{".cairn-build/Dockerfile", buildctx.ErrNotFound, "not found"},
		{".cairn-build", buildctx.ErrNotFound, "not found"},
		{"hidden/Dockerfile", buildctx.ErrNotFound, "not found"},
		{"current/../.cairn-build/Dockerfile", buildctx.ErrNotFound, "not found"},
		{"escape/.cairn-build/Dockerfile", buildctx.ErrNotFound, "not found"},
		{"passwd/x", buildctx.ErrNotFound, "not found"},
	} {
		srcs, err := buildctx.Sources(root, []string{"a.txt", tt.pattern})
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: got %v, %v, want %v (%q)", tt.pattern, paths(srcs), err, tt.want, tt.msg)
		}
	}
	if _, err := buildctx.Sources(root, nil); err == nil {
		t.Error("no patterns: no error")
	}
	if _, err := buildctx.Sources(root, []string{"[x"}); err == nil {
		t.Error("a bad pattern: no error")
	}
}
