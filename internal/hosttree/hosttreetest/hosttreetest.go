// Package hosttreetest makes, for tests, the trees a sandbox can make that
// full host paths cannot handle (deeper than PATH_MAX, 255-byte names,
// names with newlines, escapes and invalid UTF-8, symbolic links that
// point out of the tree), and lists trees exactly to compare them.
package hosttreetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
)

// DeepLevels is how many nested directories OddTree makes: their path,
// over 5,000 bytes, is past PATH_MAX.
const DeepLevels = 1100

// DeepDir is the path, below the root, of OddTree's deepest directory.
var DeepDir = strings.TrimSuffix(strings.Repeat("deep/", DeepLevels), "/")

// DeepFile is the path of the file at the bottom of the deep directories.
var DeepFile = DeepDir + "/bottom"

// OddNames are names OddTree gives files at the root: 255 bytes, a
// newline, an escape sequence, invalid UTF-8 and other control bytes.
var OddNames = []string{
	strings.Repeat("L", 255),
	"new\nline",
	"\x1b[31mred\x1b[0m",
	"bad\xff\xfeutf8",
	"ctl\x01\x7f\t",
	"-dash",
}

// OddTree fills the directory dir (empty) with the odd tree: the deep
// directories with DeepFile at the bottom (a symbolic link "up" to
// ../../.. beside it), a file for each of OddNames, a 255-byte directory
// name holding a file, a symbolic link "passwd" to /etc/passwd and one
// "escape" to ../../.., and a hard link.
func OddTree(t testing.TB, dir string) {
	t.Helper()
	root, err := hosttree.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	for _, name := range OddNames {
		WriteAt(t, root, name, "content of "+name)
	}
	long := strings.Repeat("D", 255)
	must(t, unix.Mkdirat(mustFd(t, root), long, 0o755))
	WriteAt(t, root, long+"/"+strings.Repeat("f", 255), "in a long directory")
	must(t, unix.Symlinkat("/etc/passwd", mustFd(t, root), "passwd"))
	must(t, unix.Symlinkat("../../..", mustFd(t, root), "escape"))
	must(t, unix.Linkat(mustFd(t, root), OddNames[1], mustFd(t, root), "hardlink", 0))
	fd, err := unix.Dup(mustFd(t, root))
	must(t, err)
	for range DeepLevels {
		if err := unix.Mkdirat(fd, "deep", 0o755); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "deep", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "bottom", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o640)
	must(t, err)
	_, err = unix.Write(f, []byte("the deep file\n"))
	unix.Close(f)
	must(t, err)
	must(t, unix.Symlinkat("../../..", fd, "up"))
}

// WriteAt writes content to the file rel below root (its directory must
// exist), replacing it.
func WriteAt(t testing.TB, root *hosttree.Dir, rel, content string) {
	t.Helper()
	fd, err := hosttree.OpenBeneath(root, parent(rel), unix.O_RDONLY|unix.O_DIRECTORY)
	must(t, err)
	defer unix.Close(fd)
	f, err := unix.Openat(fd, base(rel), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW, 0o644)
	must(t, err)
	defer unix.Close(f)
	_, err = unix.Write(f, []byte(content))
	must(t, err)
}

// Read returns the content of the file rel below root.
func Read(t testing.TB, root *hosttree.Dir, rel string) string {
	t.Helper()
	fd, err := hosttree.OpenBeneath(root, rel, unix.O_RDONLY)
	must(t, err)
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(fd, buf)
		must(t, err)
		if n == 0 {
			return string(out)
		}
		out = append(out, buf[:n]...)
	}
}

func parent(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

func base(rel string) string { return rel[strings.LastIndexByte(rel, '/')+1:] }

// List describes every entry of the tree at dir, one line each, in walk
// order: path, type, mode, owner, mtime (not for the root), link target
// or content digest, and the hard-link group of a regular file.
func List(t testing.TB, dir string) []string {
	t.Helper()
	root, err := hosttree.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	inodes := map[uint64]string{}
	var out []string
	must(t, hosttree.Walk(context.Background(), root, func(e *hosttree.Entry) error {
		st := &e.Stat
		line := fmt.Sprintf("%q %o %d:%d", e.Path, st.Mode, st.Uid, st.Gid)
		if e.Path != "." {
			line += fmt.Sprintf(" mtime %d", st.Mtim.Nano())
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := e.Dir.Readlink(e.Name)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" -> %q", target)
		case unix.S_IFREG:
			f, err := e.Dir.OpenFile(e.Name, unix.O_RDONLY, 0)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = f.WriteTo(h)
			f.Close()
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", st.Size, h.Sum(nil)[:8])
			if st.Nlink > 1 {
				if first, ok := inodes[st.Ino]; ok {
					line += " = " + first
				} else {
					inodes[st.Ino] = fmt.Sprintf("%q", e.Path)
				}
			}
		}
		out = append(out, line)
		return nil
	}))
	return out
}

// Equal fails t unless the trees at a and b list the same (see List).
func Equal(t testing.TB, a, b string) {
	t.Helper()
	la, lb := List(t, a), List(t, b)
	if slices.Equal(la, lb) {
		return
	}
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			t.Fatalf("trees differ at entry %d:\n %s\n %s", i, hosttree.Shorten(x, 300), hosttree.Shorten(y, 300))
		}
	}
}

func mustFd(t testing.TB, d *hosttree.Dir) int {
	t.Helper()
	fd, err := d.Fd()
	must(t, err)
	return fd
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
