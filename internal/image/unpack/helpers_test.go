package unpack_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/image/unpack"
	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// t0 is the modification time the entries get unless they say otherwise.
var t0 = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// entry is one tar entry of a test layer: its header and content.
type entry struct {
	hdr  *tar.Header
	body string
}

func hdr(typ byte, name string, mode int64) *tar.Header {
	return &tar.Header{Typeflag: typ, Name: name, Mode: mode, ModTime: t0, Format: tar.FormatPAX}
}

func dirE(name string, mode int64) entry { return entry{hdr: hdr(tar.TypeDir, name, mode)} }

func fileE(name, body string) entry {
	h := hdr(tar.TypeReg, name, 0o644)
	h.Size = int64(len(body))
	return entry{hdr: h, body: body}
}

func symlinkE(name, target string) entry {
	h := hdr(tar.TypeSymlink, name, 0o777)
	h.Linkname = target
	return entry{hdr: h}
}

func linkE(name, target string) entry {
	h := hdr(tar.TypeLink, name, 0o644)
	h.Linkname = target
	return entry{hdr: h}
}

func whiteoutE(name string) entry { return fileE(name, "") }

// with changes an entry's header.
func (e entry) with(f func(h *tar.Header)) entry {
	h := *e.hdr
	f(&h)
	e.hdr = &h
	return e
}

func owner(uid, gid int) func(h *tar.Header) {
	return func(h *tar.Header) { h.Uid, h.Gid = uid, gid }
}

func mtime(t time.Time) func(h *tar.Header) {
	return func(h *tar.Header) { h.ModTime = t }
}

func xattrs(kv ...string) func(h *tar.Header) {
	return func(h *tar.Header) {
		h.PAXRecords = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			h.PAXRecords["SCHILY.xattr."+kv[i]] = kv[i+1]
		}
	}
}

// layer returns the tar stream of entries.
func layer(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := w.WriteHeader(e.hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.hdr.Name, err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// image is a root to apply layers into, with a sentinel directory beside
// it that no layer may touch.
type image struct {
	t       testing.TB
	root    string
	outside string
	before  string // outside's listing before any layer
	passwd  string // the host's /etc/passwd, hashed
}

func newImage(t testing.TB) *image {
	t.Helper()
	testenv.Require(t)
	base := t.TempDir()
	im := &image{t: t, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{im.root, im.outside, filepath.Join(im.outside, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"secret", "sub/file", "passwd"} {
		if err := os.WriteFile(filepath.Join(im.outside, f), []byte("outside "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	im.before = list(t, im.outside, true)
	im.passwd = hashFile(t, "/etc/passwd")
	return im
}

// apply applies a layer into the image's root.
func (im *image) apply(data []byte, opts unpack.Options) (unpack.Stats, error) {
	f, err := os.Open(im.root)
	if err != nil {
		im.t.Fatal(err)
	}
	defer f.Close()
	return unpack.Apply(context.Background(), f, bytes.NewReader(data), opts)
}

// must applies layers and fails the test on an error.
func (im *image) must(layers ...[]byte) unpack.Stats {
	im.t.Helper()
	var total unpack.Stats
	for i, l := range layers {
		st, err := im.apply(l, unpack.Options{})
		if err != nil {
			im.t.Fatalf("layer %d: %v", i, err)
		}
		total.Entries += st.Entries
		total.Bytes += st.Bytes
		total.Whiteouts += st.Whiteouts
		total.XattrsSkipped += st.XattrsSkipped
	}
	return total
}

// untouched fails the test if anything outside the root changed: the
// sentinel directory, the directory holding both, or the host's
// /etc/passwd.
func (im *image) untouched() {
	im.t.Helper()
	if got := list(im.t, im.outside, true); got != im.before {
		im.t.Fatalf("outside the root changed:\nbefore:\n%s\nafter:\n%s", im.before, got)
	}
	es, err := os.ReadDir(filepath.Dir(im.root))
	if err != nil {
		im.t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"outside", "root"}) {
		im.t.Fatalf("beside the root: %q", names)
	}
	if hashFile(im.t, "/etc/passwd") != im.passwd {
		im.t.Fatal("the host's /etc/passwd changed")
	}
}

// tree is the listing of the root.
func (im *image) tree() string { return listing(im.t, im.root) }

// has fails the test unless the root's listing has each line of want.
func (im *image) has(want ...string) {
	im.t.Helper()
	got := im.tree()
	lines := strings.Split(got, "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			im.t.Errorf("no line %q in:\n%s", w, got)
		}
	}
}

// lacks fails the test if a path of the root's listing is one of paths.
func (im *image) lacks(paths ...string) {
	im.t.Helper()
	got := im.tree()
	for line := range strings.SplitSeq(got, "\n") {
		p, _, _ := strings.Cut(line, " ")
		if slices.Contains(paths, p) {
			im.t.Errorf("%q is still there:\n%s", p, got)
		}
	}
}

func (im *image) lstat(rel string) unix.Stat_t {
	im.t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(im.root, rel), &st); err != nil {
		im.t.Fatal(err)
	}
	return st
}

// listing describes every name below dir, one line each, sorted:
// "path type mode uid:gid" and the content (short, or its size and hash)
// and link count, the link target, or the device number.
func listing(t testing.TB, dir string) string {
	t.Helper()
	return list(t, dir, false)
}

// list is listing, with every object's modification time and extended
// attributes when full.
func list(t testing.TB, dir string, full bool) string {
	t.Helper()
	root, err := hosttree.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var lines []string
	err = hosttree.Walk(context.Background(), root, func(e *hosttree.Entry) error {
		st := e.Stat
		line := fmt.Sprintf("%s %s %04o %d:%d", e.Path, kind(st.Mode), st.Mode&0o7777, st.Uid, st.Gid)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			f, err := e.Dir.OpenFile(e.Name, unix.O_RDONLY, 0)
			if err != nil {
				return err
			}
			buf, err := readAll(f)
			f.Close()
			if err != nil {
				return err
			}
			if len(buf) <= 40 {
				line += fmt.Sprintf(" %q", buf)
			} else {
				line += fmt.Sprintf(" %d:%x", len(buf), sha256.Sum256(buf))
			}
			line += fmt.Sprintf(" n%d", st.Nlink)
		case unix.S_IFLNK:
			target, err := e.Dir.Readlink(e.Name)
			if err != nil {
				return err
			}
			line += " -> " + target
		case unix.S_IFCHR, unix.S_IFBLK:
			line += fmt.Sprintf(" %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
		if full {
			line += fmt.Sprintf(" t%d.%09d", st.Mtim.Sec, st.Mtim.Nsec)
			p, err := e.Dir.ProcPath(e.Name)
			if err != nil {
				return err
			}
			line += " " + xattrList(p)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// xattrList lists the extended attributes of the path p (not following a
// final symbolic link) as "name=value,…".
func xattrList(p string) string {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		return "xattrs:" + err.Error()
	}
	var out []string
	for name := range strings.SplitSeq(string(buf[:n]), "\x00") {
		if name == "" {
			continue
		}
		v := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			out = append(out, name+"!"+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("%s=%q", name, v[:m]))
	}
	slices.Sort(out)
	return "x[" + strings.Join(out, ",") + "]"
}

func readAll(f *os.File) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(f)
	return buf.Bytes(), err
}

func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFREG:
		return "file"
	case unix.S_IFLNK:
		return "link"
	case unix.S_IFCHR:
		return "char"
	case unix.S_IFBLK:
		return "block"
	case unix.S_IFIFO:
		return "fifo"
	}
	return fmt.Sprintf("type%o", mode&unix.S_IFMT)
}

func hashFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}
