package testregistry

import (
	"archive/tar"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Check reports, with t.Errorf, every way the tree at root differs from
// e.Files and e.Absent: a path missing, of another type, mode, owner,
// content, link target, time or extended attribute, a hard link that is
// not the same inode as its target, a path that should be absent, and a
// path e.Files does not list. It reads the tree without following
// symbolic links. e.Config is not checked: it is not in the tree.
func (e Expect) Check(t testing.TB, root string) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(e.Files)) {
		checkPath(t, root, p, e.Files[p])
	}
	for _, p := range e.Absent {
		if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: should not exist (lstat: %v)", p, err)
		}
	}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		if _, ok := e.Files[rel]; !ok && rel != "/" {
			t.Errorf("%s: not expected in the tree", rel)
		}
		return nil
	})
	if err != nil {
		t.Errorf("walk %s: %v", root, err)
	}
}

func checkPath(t testing.TB, root, p string, w Want) {
	t.Helper()
	full := filepath.Join(root, p)
	fi, err := os.Lstat(full)
	if err != nil {
		t.Errorf("%s: %v", p, err)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	var typ byte
	switch fi.Mode().Type() {
	case 0:
		typ = tar.TypeReg
	case fs.ModeDir:
		typ = tar.TypeDir
	case fs.ModeSymlink:
		typ = tar.TypeSymlink
	default:
		typ = '?'
	}
	want := w.Type
	if want == tar.TypeLink {
		want = tar.TypeReg
	}
	if typ != want {
		t.Errorf("%s: type %q (mode %v), want %q", p, typ, fi.Mode(), want)
		return
	}
	if mode := int64(st.Mode & 0o7777); mode != w.Mode {
		t.Errorf("%s: mode %#o, want %#o", p, mode, w.Mode)
	}
	if int(st.Uid) != w.UID || int(st.Gid) != w.GID {
		t.Errorf("%s: owner %d:%d, want %d:%d", p, st.Uid, st.Gid, w.UID, w.GID)
	}
	if !w.ModTime.IsZero() && !fi.ModTime().Equal(w.ModTime) {
		t.Errorf("%s: modified %v, want %v", p, fi.ModTime().UTC(), w.ModTime.UTC())
	}
	switch w.Type {
	case tar.TypeReg, tar.TypeLink:
		body, err := os.ReadFile(full)
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if string(body) != w.Body {
			t.Errorf("%s: content %q, want %q", p, shorten(string(body)), shorten(w.Body))
		}
	case tar.TypeSymlink:
		if target, err := os.Readlink(full); err != nil || target != w.Linkname {
			t.Errorf("%s: link to %q (%v), want %q", p, target, err, w.Linkname)
		}
	}
	if w.Type == tar.TypeLink {
		other, err := os.Lstat(filepath.Join(root, w.Linkname))
		if err != nil {
			t.Errorf("%s: hard link target: %v", p, err)
		} else if !os.SameFile(fi, other) {
			t.Errorf("%s: not the same inode as %s", p, w.Linkname)
		}
	}
	for k, v := range w.Xattrs {
		buf := make([]byte, 64<<10)
		n, err := unix.Lgetxattr(full, k, buf)
		if err != nil {
			t.Errorf("%s: extended attribute %s: %v", p, k, err)
		} else if string(buf[:n]) != v {
			t.Errorf("%s: extended attribute %s = %q, want %q", p, k, buf[:n], v)
		}
	}
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
