package buildctx_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
)

// An image root's links are followed as a container would follow them,
// inside the root; nothing outside it is ever written (newImage's
// cleanup checks the outside directory, what is beside the root, and
// the host's /etc).

func TestCopyThroughLinkToAbsoluteHostPath(t *testing.T) {
	im := newImage(t)
	tree(t, im.root, "etc/", "", "x", "-> /etc")
	must(t, im.copy(t, contextDir(t), []string{"a.txt"}, "/x/", buildctx.CopyOptions{}))
	if got := read(t, im.path("etc/a.txt")); got != "a" {
		t.Errorf("the root's /etc/a.txt: %q", got)
	}
	if _, err := os.Lstat("/etc/a.txt"); err == nil {
		t.Error("the host's /etc/a.txt was written")
	}
}

func TestCopyThroughLinkToOutside(t *testing.T) {
	im := newImage(t)
	tree(t, im.root, "x", "-> "+im.outside, "y", "-> "+filepath.Join(im.outside, "sub"))
	// The links lead to directories that are not in the root.
	for _, dest := range []string{"/x/", "/y/", "/y/new/"} {
		err := im.copy(t, contextDir(t), []string{"a.txt"}, dest, buildctx.CopyOptions{})
		if !errors.Is(err, buildctx.ErrDest) {
			t.Errorf("%s: got %v, want ErrDest", dest, err)
		}
	}
	if err := im.copy(t, contextDir(t), []string{"src"}, "/x", buildctx.CopyOptions{}); !errors.Is(err, buildctx.ErrDest) {
		t.Errorf("a directory to /x: got %v, want ErrDest", err)
	}
}

func TestCopyThroughDotDotLinks(t *testing.T) {
	im := newImage(t)
	tree(t, im.root, "x", "-> ../../../../../..", "d/y", "-> ../../..", "d/z", "-> ../../outside")
	must(t, im.copy(t, contextDir(t), []string{"a.txt"}, "/x/", buildctx.CopyOptions{}))
	must(t, im.copy(t, contextDir(t), []string{"b.txt"}, "/d/y/", buildctx.CopyOptions{}))
	must(t, im.copy(t, contextDir(t), []string{"src"}, "/d/y/x/deep", buildctx.CopyOptions{}))
	if read(t, im.path("a.txt")) != "a" || read(t, im.path("b.txt")) != "b" || read(t, im.path("deep/sub/z.go")) != "z" {
		t.Error("the links did not stop at the root's top")
	}
	// ../../outside is the root's /outside, which does not exist.
	if err := im.copy(t, contextDir(t), []string{"a.txt"}, "/d/z/", buildctx.CopyOptions{}); !errors.Is(err, buildctx.ErrDest) {
		t.Errorf("/d/z/: got %v, want ErrDest", err)
	}
}

func TestCopyReplacesLinkAtTheName(t *testing.T) {
	im := newImage(t)
	keep := filepath.Join(im.outside, "keep")
	tree(t, im.root,
		"abs", "-> "+keep,
		"rel", "-> ../outside/keep",
		"d/a.txt", "-> "+keep,
		"passwd", "-> /etc/passwd",
	)
	ctxDir := contextDir(t)
	for _, c := range []struct {
		patterns []string
		dest     string
	}{
		{[]string{"a.txt"}, "/abs"},
		{[]string{"a.txt"}, "/rel"},
		{[]string{"a.txt"}, "/d/"},
		{[]string{"a.txt"}, "/passwd"},
		{[]string{"current"}, "/abs"}, // a link replaced by a link
	} {
		must(t, im.copy(t, ctxDir, c.patterns, c.dest, buildctx.CopyOptions{UID: 1000, GID: 1000}))
	}
	equal(t, listing(t, im.root), []string{
		"abs Lrwxrwxrwx -> src",
		"d drwxr-xr-x",
		"d/a.txt -rw-r--r-- a",
		"passwd -rw-r--r-- a",
		"rel -rw-r--r-- a",
	})
}

func TestCopyDirectoryOverLinksInside(t *testing.T) {
	im := newImage(t)
	// The directory copied holds sub/z.go: each sub below is a link
	// planted by an earlier step.
	tree(t, im.root,
		"a/sub", "-> "+im.outside,
		"b/sub", "-> ../../outside",
		"c/sub", "-> /etc",
		"e/sub", "-> "+filepath.Join(im.outside, "keep"),
	)
	must(t, os.Mkdir(im.path("etc"), 0o755))
	ctxDir := contextDir(t)
	for _, dest := range []string{"/a", "/b", "/c", "/e"} {
		must(t, im.copy(t, ctxDir, []string{"src"}, dest, buildctx.CopyOptions{UID: 1000, GID: 1000}))
	}
	// A link to a directory of the root is copied into; the others, to
	// nothing in the root, are replaced by the directory.
	for _, p := range []string{"a/sub/z.go", "b/sub/z.go", "etc/z.go", "e/sub/z.go"} {
		if read(t, im.path(p)) != "z" {
			t.Errorf("%s: not copied", p)
		}
	}
	if st, err := os.Lstat(im.path("a/sub")); err != nil || !st.IsDir() {
		t.Errorf("a/sub: %v, %v", st.Mode(), err)
	}
}

func TestCopySourceLinkToHostFile(t *testing.T) {
	im := newImage(t)
	ctxDir := contextDir(t)
	// passwd -> /etc/passwd; in a directory copied too.
	tree(t, ctxDir, "dir/passwd", "-> /etc/passwd", "dir/up", "-> ../../../../../../etc/shadow")
	must(t, im.copy(t, ctxDir, []string{"passwd"}, "/p", buildctx.CopyOptions{}))
	must(t, im.copy(t, ctxDir, []string{"dir"}, "/d", buildctx.CopyOptions{}))
	equal(t, listing(t, im.root), []string{
		"d drwxr-xr-x",
		"d/passwd Lrwxrwxrwx -> /etc/passwd",
		"d/up Lrwxrwxrwx -> ../../../../../../etc/shadow",
		"p Lrwxrwxrwx -> /etc/passwd",
	})
}

func TestCopySourceOutsideContext(t *testing.T) {
	root := openDir(t, contextDir(t))
	_, err := buildctx.Sources(root, []string{"../x"})
	if !errors.Is(err, buildctx.ErrOutside) {
		t.Errorf("../x: got %v, want ErrOutside", err)
	}
	// Links leading out of the context lead to its root instead.
	srcs, err := buildctx.Sources(root, []string{"escape/src/x.go"})
	must(t, err)
	im := newImage(t)
	must(t, buildctx.Copy(t.Context(), openDir(t, im.root), srcs, "/x", buildctx.CopyOptions{}))
	if read(t, im.path("x")) != "x" {
		t.Error("escape/src/x.go is not the context's src/x.go")
	}
}

func TestCopyNeverCopiesReserved(t *testing.T) {
	im := newImage(t)
	ctxDir := contextDir(t)
	must(t, im.copy(t, ctxDir, []string{"."}, "/all", buildctx.CopyOptions{}))
	must(t, im.copy(t, ctxDir, []string{"escape"}, "/e/", buildctx.CopyOptions{}))
	if _, err := os.Lstat(im.path("all/.cairn-build")); err == nil {
		t.Error("COPY . copied the reserved directory")
	}
	if _, err := os.Lstat(im.path("all/src/x.go")); err != nil {
		t.Error(err)
	}
}
