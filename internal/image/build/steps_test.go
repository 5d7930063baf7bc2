package build

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/dockerfile"
)

// A WORKDIR through a symbolic link the image holds is made where the
// link leads inside the root, never outside it.
func TestMkdirInRootStaysInside(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	for link, target := range map[string]string{"etc-link": "/etc", "up": "../../../../..", "abs": outside, "dangling": "/nowhere"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(root, "etc"), 0o755)
	os.MkdirAll(filepath.Join(root, outside), 0o755) // where "abs" leads inside the root
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, dir := range []string{"/etc-link/cairn-test-dir", "/up/made/here", "/abs/in-root", "/a/b/c", "/a/b/c"} {
		if err := mkdirInRoot(f, dir, 0, 0); err != nil {
			t.Fatalf("mkdirInRoot(%s): %v", dir, err)
		}
	}
	for _, p := range []string{"etc/cairn-test-dir", "made/here", filepath.Join(outside[1:], "in-root"), "a/b/c"} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || !fi.IsDir() {
			t.Errorf("%s not made inside the root: %v", p, err)
		}
	}
	if _, err := os.Stat("/etc/cairn-test-dir"); err == nil {
		os.Remove("/etc/cairn-test-dir")
		t.Fatal("a directory was made in the host's /etc")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("made outside the root: %v", entries)
	}
	// A link to nowhere inside the root is not made a directory of the
	// host's.
	if err := mkdirInRoot(f, "/dangling/x", 0, 0); err == nil {
		t.Error("a directory through a dangling link was made")
	}
	if _, err := os.Stat("/nowhere"); err == nil {
		t.Fatal("/nowhere exists on the host")
	}
	// A file where a directory is wanted is an error, not followed.
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	if err := mkdirInRoot(f, "/file/sub", 0, 0); err == nil {
		t.Error("a directory under a regular file was made")
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{emit: func(l string) { got = append(got, l) }}
	w.Write([]byte("one\ntw"))
	w.Write([]byte("o\r\nthree"))
	w.Write([]byte(strings.Repeat("x", maxLine+10)))
	w.Flush()
	want := []string{"one", "two", "three" + strings.Repeat("x", maxLine-5), strings.Repeat("x", 15)}
	if !slices.Equal(got, want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
}

func TestRunEnvDefaults(t *testing.T) {
	if got := runEnv([]string{"A=1"}, ""); !slices.Equal(got, []string{"A=1", defaultPath, "HOME=/root"}) {
		t.Errorf("defaults: %q", got)
	}
	if got := runEnv([]string{"PATH=/x", "HOME=/h"}, "/other"); !slices.Equal(got, []string{"PATH=/x", "HOME=/h"}) {
		t.Errorf("kept: %q", got)
	}
	if got := runEnv(nil, "/home/u"); got[1] != "HOME=/home/u" {
		t.Errorf("user's home: %q", got)
	}
}

// Keys differ whenever a part or the split into parts does.
func TestKeyParts(t *testing.T) {
	if key("ab", "c") == key("a", "bc") || key("a") == key("a", "") {
		t.Fatal("keys collide")
	}
	if x := "x"; key(x) != key("x") || len(key(x)) != 64 {
		t.Fatal("keys are unstable or not hex SHA-256")
	}
}

// A RUN whose sandbox failed keeps the sandbox's code (no network: N01),
// else is I02; both name the step's line.
func TestRunErrorCodes(t *testing.T) {
	st := dockerfile.Step{Line: 7, Text: "RUN make"}
	for _, tc := range []struct {
		err  error
		code string
	}{
		{errors.New("runsc run: exit status 128"), api.CodeImageBuildFailed},
		{errdefs.New(api.CodeNetworkUnavailable, "networking is off"), api.CodeNetworkUnavailable},
	} {
		err := runError(st, tc.err)
		if errdefs.CodeOf(err) != tc.code || !strings.Contains(err.Error(), "Dockerfile:7: RUN make") {
			t.Errorf("runError(%v) = %v (%s), want %s naming the line", tc.err, err, errdefs.CodeOf(err), tc.code)
		}
	}
}
