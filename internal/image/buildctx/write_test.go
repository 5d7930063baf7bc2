package buildctx_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
	"github.com/cairn-sandbox/cairn/internal/image/unpack"
)

// headers returns the tar's entries: name and type, in order.
func headers(t testing.TB, data []byte) []*tar.Header {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	var out []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		must(t, err)
		out = append(out, h)
	}
}

func names(hs []*tar.Header) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name)
	}
	return out
}

func TestWriteContextRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir,
		"a.txt", "a",
		"src/main.go", "package main",
		"src/main_test.go", "package main // test",
		"src/deep/x", "x",
		"empty/", "",
		"link", "-> /etc/passwd",
		"rel", "-> src/main.go",
		"docs/one", "1",
		"docs/keep/k", "k",
		"node_modules/m/index.js", "js",
		".dockerignore", "# ignore\n**/*_test.go\ndocs\n!docs/keep\nnode_modules\n",
	)
	must(t, os.Lchown(filepath.Join(dir, "a.txt"), 1234, 5678))
	must(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o755|os.ModeSetuid))
	must(t, os.Chmod(filepath.Join(dir, "docs"), 0o750))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	outside := t.TempDir()
	dockerfile := filepath.Join(outside, "build.Dockerfile")
	must(t, os.WriteFile(dockerfile, []byte("FROM scratch\n"), 0o600))

	var buf bytes.Buffer
	var progress []buildctx.Stats
	st, err := buildctx.WriteContext(&buf, dir, buildctx.WriteOptions{
		Dockerfile: dockerfile,
		Progress:   func(s buildctx.Stats) { progress = append(progress, s) },
	})
	must(t, err)
	hs := headers(t, buf.Bytes())
	equal(t, names(hs), []string{
		".cairn-build/", ".cairn-build/Dockerfile", ".cairn-build/dockerignore",
		"./", ".dockerignore", "a.txt",
		"docs/", "docs/keep/", "docs/keep/k",
		"empty/", "link", "rel",
		"src/", "src/deep/", "src/deep/x", "src/main.go",
	})
	for _, h := range hs {
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d (%q:%q), want 0:0", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if h.Name == "a.txt" && (h.Mode != 0o4755 || !h.ModTime.Equal(t0)) {
			t.Errorf("a.txt: mode %o, time %v", h.Mode, h.ModTime)
		}
		if h.Name == "docs/" && h.Mode != 0o750 {
			t.Errorf("docs/ (excluded, sent for docs/keep): mode %o", h.Mode)
		}
	}
	if st.Skipped != 1 || st.Files != 7 || st.Dirs != 7 || st.Symlinks != 2 {
		t.Errorf("stats %+v: want 1 skipped, 7 files, 7 directories, 2 links", st)
	}
	if len(progress) == 0 || progress[len(progress)-1] != st {
		t.Errorf("progress %v: want it to end with %+v", progress, st)
	}

	// Extracted by cairnd's layer applier, it is the directory minus
	// what was excluded, plus the reserved files.
	out := t.TempDir()
	_, err = unpack.Apply(context.Background(), openDir(t, out), bytes.NewReader(buf.Bytes()), unpack.Options{})
	must(t, err)
	equal(t, listing(t, out), []string{
		".cairn-build drwxr-xr-x",
		".cairn-build/Dockerfile -rw-r--r-- FROM scratch\n",
		".cairn-build/dockerignore -rw-r--r-- # ignore\n**/*_test.go\ndocs\n!docs/keep\nnode_modules\n",
		".dockerignore -rw-r--r-- # ignore\n**/*_test.go\ndocs\n!docs/keep\nnode_modules\n",
		"a.txt urwxr-xr-x a",
		"docs drwxr-x---",
		"docs/keep drwxr-xr-x",
		"docs/keep/k -rw-r--r-- k",
		"empty drwxr-xr-x",
		"link Lrwxrwxrwx -> /etc/passwd",
		"rel Lrwxrwxrwx -> src/main.go",
		"src drwxr-xr-x",
		"src/deep drwxr-xr-x",
		"src/deep/x -rw-r--r-- x",
		"src/main.go -rw-r--r-- package main",
	})
	root := openDir(t, out)
	df, err := buildctx.ReadDockerfile(root)
	must(t, err)
	ign, err := buildctx.ReadIgnore(root)
	must(t, err)
	if string(df) != "FROM scratch\n" || !strings.HasPrefix(string(ign), "# ignore") {
		t.Errorf("ReadDockerfile %q, ReadIgnore %q", df, ign)
	}
}

func TestWriteContextDeterministic(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, "Dockerfile", "FROM x", "b/c", "c", "a", "a", "z/", "")
	var one, two bytes.Buffer
	_, err := buildctx.WriteContext(&one, dir, buildctx.WriteOptions{})
	must(t, err)
	_, err = buildctx.WriteContext(&two, dir, buildctx.WriteOptions{})
	must(t, err)
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Error("two writes of the same context differ")
	}
}

func TestWriteContextDockerignoreBesideDockerfile(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir,
		"Dockerfile", "FROM x",
		"web.Dockerfile", "FROM y",
		"web.Dockerfile.dockerignore", "secret\n",
		".dockerignore", "public\n",
		"secret", "s", "public", "p")
	var buf bytes.Buffer
	_, err := buildctx.WriteContext(&buf, dir, buildctx.WriteOptions{Dockerfile: filepath.Join(dir, "web.Dockerfile")})
	must(t, err)
	got := strings.Join(names(headers(t, buf.Bytes())), " ")
	if strings.Contains(got, "secret") || !strings.Contains(got, "public") {
		t.Errorf("sent %s: want public, not secret", got)
	}
}

func TestWriteContextDockerfileData(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, "f", "f")
	var buf bytes.Buffer
	_, err := buildctx.WriteContext(&buf, dir, buildctx.WriteOptions{DockerfileData: []byte("FROM stdin")})
	must(t, err)
	out := t.TempDir()
	_, err = unpack.Apply(context.Background(), openDir(t, out), &buf, unpack.Options{})
	must(t, err)
	if got := read(t, filepath.Join(out, buildctx.DockerfileName)); got != "FROM stdin" {
		t.Errorf("Dockerfile %q", got)
	}
}

func TestWriteContextRefusals(t *testing.T) {
	t.Run("no Dockerfile", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := buildctx.Measure(dir, buildctx.WriteOptions{}); err == nil {
			t.Error("no error")
		}
	})
	t.Run("reserved name", func(t *testing.T) {
		dir := t.TempDir()
		tree(t, dir, "Dockerfile", "FROM x", ".cairn-build/Dockerfile", "FROM evil")
		if _, err := buildctx.Measure(dir, buildctx.WriteOptions{}); !errors.Is(err, buildctx.ErrReserved) {
			t.Errorf("got %v, want ErrReserved", err)
		}
		tree(t, dir, ".dockerignore", ".cairn-build\n")
		if _, err := buildctx.Measure(dir, buildctx.WriteOptions{}); err != nil {
			t.Errorf("excluded: %v", err)
		}
		// Even an exception never sends what is in it.
		tree(t, dir, ".dockerignore", ".cairn-build\n!.cairn-build/Dockerfile\n")
		var buf bytes.Buffer
		_, err := buildctx.WriteContext(&buf, dir, buildctx.WriteOptions{})
		must(t, err)
		if n := strings.Count(strings.Join(names(headers(t, buf.Bytes())), " "), buildctx.DockerfileName); n != 1 {
			t.Errorf("%d entries %s", n, buildctx.DockerfileName)
		}
	})
	t.Run("whiteout name", func(t *testing.T) {
		dir := t.TempDir()
		tree(t, dir, "Dockerfile", "FROM x", "d/.wh.f", "")
		if _, err := buildctx.Measure(dir, buildctx.WriteOptions{}); !errors.Is(err, buildctx.ErrReserved) {
			t.Errorf("got %v, want ErrReserved", err)
		}
		tree(t, dir, ".dockerignore", "**/.wh.*\n!**/keep\n", "e/.wh.d/keep", "k")
		if _, err := buildctx.Measure(dir, buildctx.WriteOptions{}); err != nil {
			t.Errorf("excluded: %v", err)
		}
	})
	// cairnd refuses names a terminal could be attacked with (I13): the
	// CLI says so before it sends anything, unless they are excluded.
	for name, spec := range map[string][]string{
		"escape in a name":  {"a\x1b[2Jb", "x"},
		"newline in a name": {"d/a\nb", "x"},
		"not UTF-8":         {"caf\xe9", "x"},
		"escape in a link":  {"l", "-> \x1b[2J"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tree(t, dir, append([]string{"Dockerfile", "FROM x"}, spec...)...)
			if _, err := buildctx.Measure(dir, buildctx.WriteOptions{}); !errors.Is(err, buildctx.ErrReserved) {
				t.Errorf("got %v, want ErrReserved", err)
			}
			tree(t, dir, ".dockerignore", spec[0][:1]+"*\n")
			if _, err := buildctx.Measure(dir, buildctx.WriteOptions{}); err != nil {
				t.Errorf("excluded: %v", err)
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		dir := t.TempDir()
		tree(t, dir, "Dockerfile", "FROM x", "big", strings.Repeat("x", 1000))
		st, err := buildctx.Measure(dir, buildctx.WriteOptions{})
		must(t, err)
		if st.Bytes != 1012 { // the Dockerfile twice: reserved, and as a file of the context
			t.Errorf("Measure: %d bytes, want 1012", st.Bytes)
		}
		if _, err := buildctx.Measure(dir, buildctx.WriteOptions{MaxBytes: 1011}); !errors.Is(err, buildctx.ErrTooLarge) {
			t.Errorf("got %v, want ErrTooLarge", err)
		}
		if _, err := buildctx.Measure(dir, buildctx.WriteOptions{MaxBytes: 1012}); err != nil {
			t.Errorf("at the limit: %v", err)
		}
	})
}

func TestReadDockerfileRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, ".cairn-build/Dockerfile", "-> /etc/passwd")
	if _, err := buildctx.ReadDockerfile(openDir(t, dir)); err == nil {
		t.Error("read through a symbolic link")
	}
	dir = t.TempDir()
	tree(t, dir, ".cairn-build", "-> /etc", "etc/Dockerfile", "x")
	if _, err := buildctx.ReadDockerfile(openDir(t, dir)); err == nil {
		t.Error("read through a symbolic link on the way")
	}
}

func TestWriteContextExcludedDirectories(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir,
		"Dockerfile", "FROM x",
		".dockerignore", "logs\n!logs/*.keep\na\n!a/b/c\n",
		"logs/x.log", "l",
		"a/other", "o",
		"a/b/other", "o",
		"a/b/c", "c",
	)
	var buf bytes.Buffer
	_, err := buildctx.WriteContext(&buf, dir, buildctx.WriteOptions{})
	must(t, err)
	// logs/ holds nothing sent, so is not sent; a/ and a/b/ go before
	// a/b/c, once each.
	equal(t, names(headers(t, buf.Bytes()))[4:], []string{
		".dockerignore", "Dockerfile", "a/", "a/b/", "a/b/c",
	})
}

// The client writes the Dockerfile where the API says cairnd reads it.
func TestDockerfileNameIsTheAPIs(t *testing.T) {
	if buildctx.DockerfileName != api.BuildContextDockerfile {
		t.Fatalf("DockerfileName %q, the API's %q", buildctx.DockerfileName, api.BuildContextDockerfile)
	}
}
