package buildctx_test

import (
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
)

func TestIgnoreExcluded(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		excluded []string
		kept     []string
	}{
		{
			name:     "nothing",
			file:     "",
			kept:     []string{"a", "a/b", ".dockerignore", "."},
			excluded: nil,
		},
		{
			name:     "comments and blanks",
			file:     "# a\n\n   \n#b\n",
			kept:     []string{"a", "# a", "#b"},
			excluded: nil,
		},
		{
			name:     "a name excludes what it holds",
			file:     "docs\n",
			excluded: []string{"docs", "docs/a", "docs/a/b"},
			kept:     []string{"docs2", "a/docs", "doc"},
		},
		{
			name:     "cleaned: leading / and ./, trailing /, spaces",
			file:     "/a\n./b\nc/\n  d  \ne/../f\n",
			excluded: []string{"a", "b/x", "c", "d", "f"},
			kept:     []string{"e", "x/a"},
		},
		{
			name:     "wildcards per component",
			file:     "*.log\nsrc/*/tmp\nfile?.txt\n[ab]c\n",
			excluded: []string{"x.log", ".log", "src/a/tmp", "src/a/tmp/z", "file1.txt", "ac", "bc"},
			kept:     []string{"d/x.log", "src/tmp", "src/a/b/tmp", "file12.txt", "cc"},
		},
		{
			name:     "** any number of directories",
			file:     "**/*.go\na/**/z\n",
			excluded: []string{"m.go", "x/m.go", "x/y/m.go", "a/z", "a/b/z", "a/b/c/z", "a/b/c/z/in"},
			kept:     []string{"m.gox", "a", "a/b", "b/z"},
		},
		{
			name:     "** at the end",
			file:     "vendor/**\n",
			excluded: []string{"vendor/a", "vendor/a/b"},
			kept:     []string{"vendor", "vendorx/a"},
		},
		{
			name:     "an exception sends one back",
			file:     "*.md\n!README.md\n",
			excluded: []string{"a.md", "CHANGES.md"},
			kept:     []string{"README.md", "x/a.md"},
		},
		{
			name:     "the last match wins",
			file:     "!a.md\n*.md\n",
			excluded: []string{"a.md", "b.md"},
		},
		{
			name:     "exception inside an excluded directory",
			file:     "docs\n!docs/keep\n",
			excluded: []string{"docs", "docs/other", "docs/sub/x"},
			kept:     []string{"docs/keep", "docs/keep/in"},
		},
		{
			name:     "everything but",
			file:     "*\n!src\n!go.mod\nsrc/*_test.go\n",
			excluded: []string{"README", "bin", "bin/x", "src/a_test.go"},
			kept:     []string{"src", "src/a.go", "go.mod"},
		},
		{
			name:     "escapes",
			file:     `a\*b` + "\n",
			excluded: []string{"a*b"},
			kept:     []string{"axb"},
		},
		{
			name: "lone ! and the root",
			file: "!\n.\n",
			kept: []string{"a", "."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ig, err := buildctx.ParseIgnore(strings.NewReader(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.excluded {
				if !ig.Excluded(p) {
					t.Errorf("%q not excluded", p)
				}
			}
			for _, p := range tt.kept {
				if ig.Excluded(p) {
					t.Errorf("%q excluded", p)
				}
			}
		})
	}
}

func TestIgnoreReincludes(t *testing.T) {
	ig, err := buildctx.ParseIgnore(strings.NewReader("docs\n!docs/keep\nbuild\n!**/important\nout\n!out\n"))
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{
		"docs":      true, // !docs/keep is inside
		"docs/keep": true, // ** matches anything below
		"other":     true, // !**/important could be anywhere
		".":         true,
	} {
		if got := ig.Reincludes(dir); got != want {
			t.Errorf("Reincludes(%q) = %v, want %v", dir, got, want)
		}
	}
	ig, err = buildctx.ParseIgnore(strings.NewReader("docs\n!docs/keep\nsrc\n!src\n!x/*/y\n"))
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{
		"docs":      true,
		"docs/sub":  false, // docs/keep is not below docs/sub
		"docs/keep": false, // it matches docs/keep itself, not below it
		"src":       false, // !src matches src itself only
		"x":         true,
		"x/a":       true,
		"x/a/b":     false,
		"bin":       false,
	} {
		if got := ig.Reincludes(dir); got != want {
			t.Errorf("Reincludes(%q) = %v, want %v", dir, got, want)
		}
	}
	var none *buildctx.Ignore
	if none.Excluded("a") || none.Reincludes("a") {
		t.Error("a nil Ignore excludes")
	}
}

func TestParseIgnoreBadPattern(t *testing.T) {
	_, err := buildctx.ParseIgnore(strings.NewReader("ok\n[z-a\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("got %v, want an error naming line 2", err)
	}
}
