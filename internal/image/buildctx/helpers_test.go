package buildctx_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// t0 is the modification time the test trees' objects get.
var t0 = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// tree makes the objects of spec below dir: "name/" a directory,
// "name -> target" a symbolic link, anything else a file with that
// content. Parents are made as needed.
func tree(t testing.TB, dir string, spec ...string) {
	t.Helper()
	for i := 0; i < len(spec); i += 2 {
		name, content := spec[i], spec[i+1]
		full := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		switch {
		case strings.HasSuffix(name, "/"):
			must(t, os.MkdirAll(full, 0o755))
		case strings.HasPrefix(content, "-> "):
			must(t, os.Symlink(strings.TrimPrefix(content, "-> "), full))
		default:
			must(t, os.WriteFile(full, []byte(content), 0o644))
			must(t, os.Chtimes(full, t0, t0))
		}
	}
}

// listing returns what dir holds, one line an object: its path, type,
// mode and content or target (not owners or times).
func listing(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := rel + " " + st.Mode().String()
		switch {
		case st.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + string(b)
		case st.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		}
		out = append(out, line)
		return nil
	})
	must(t, err)
	slices.Sort(out)
	return out
}

// openDir opens the directory dir, closed at the test's end.
func openDir(t testing.TB, dir string) *os.File {
	t.Helper()
	f, err := os.Open(dir)
	must(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// owner returns the uid and gid of path (not following a link).
func owner(t testing.TB, path string) (uint32, uint32) {
	t.Helper()
	st, err := os.Lstat(path)
	must(t, err)
	sys := st.Sys().(*syscall.Stat_t)
	return sys.Uid, sys.Gid
}

func read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return string(b)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func equal(t testing.TB, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
