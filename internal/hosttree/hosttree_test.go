package hosttree_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/hosttree/hosttreetest"
)

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func TestWalkReachesTheBottomOfATreePastPathMax(t *testing.T) {
	dir := t.TempDir()
	hosttreetest.OddTree(t, dir)
	if len(dir)+len(hosttreetest.DeepFile) <= 4096 {
		t.Fatalf("the deep path is only %d bytes", len(dir)+len(hosttreetest.DeepFile))
	}
	root, err := hosttree.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	before := openFds(t)
	most := 0
	seen := map[string]unix.Stat_t{}
	err = hosttree.Walk(context.Background(), root, func(e *hosttree.Entry) error {
		seen[e.Path] = e.Stat
		if strings.HasPrefix(e.Path, hosttreetest.DeepDir) {
			most = max(most, openFds(t)-before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, ok := seen[hosttreetest.DeepFile]
	if !ok || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(len("the deep file\n")) {
		t.Fatalf("deep file not walked right: %v %+v", ok, st)
	}
	if got := hosttreetest.Read(t, root, hosttreetest.DeepFile); got != "the deep file\n" {
		t.Fatalf("deep file reads %q", got)
	}
	for _, name := range append(hosttreetest.OddNames, "passwd", "escape", hosttreetest.DeepDir+"/up") {
		if _, ok := seen[name]; !ok {
			t.Errorf("%q not walked", name)
		}
	}
	for _, link := range []string{"passwd", "escape", hosttreetest.DeepDir + "/up"} {
		if seen[link].Mode&unix.S_IFMT != unix.S_IFLNK {
			t.Errorf("%q walked as mode %o, not as a link", link, seen[link].Mode)
		}
	}
	for p := range seen {
		if strings.HasPrefix(p, "passwd/") || strings.HasPrefix(p, "escape/") {
			t.Fatalf("walked through a link: %q", p)
		}
	}
	if want := 1 + len(hosttreetest.OddNames) + 2 + 2 + 1 + hosttreetest.DeepLevels + 2; len(seen) != want {
		t.Errorf("walked %d entries, want %d", len(seen), want)
	}
	if most > hosttree.MaxOpen+4 {
		t.Errorf("the walk held %d descriptors at once (bound %d)", most, hosttree.MaxOpen)
	}
	if after := openFds(t); after != before {
		t.Errorf("%d descriptors open after the walk, %d before", after, before)
	}
}

func TestOpenBeneathRefusesLinksAndEscapes(t *testing.T) {
	dir := t.TempDir()
	hosttreetest.OddTree(t, dir)
	root, err := hosttree.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, rel := range []string{"passwd", "escape/etc/passwd", "../etc/passwd", "/etc/passwd", hosttreetest.DeepDir + "/up/deep"} {
		if fd, err := hosttree.OpenBeneath(root, rel, unix.O_RDONLY); err == nil {
			unix.Close(fd)
			t.Errorf("%s opened", hosttree.Shorten(rel, 60))
		}
	}
	// A path of a few thousand bytes opens, piece by piece.
	fd, err := hosttree.OpenBeneath(root, hosttreetest.DeepFile, unix.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
}

func TestQuoteKeepsLogsShortAndPrintable(t *testing.T) {
	q := hosttree.Quote(hosttreetest.DeepFile + "/\x1b[2J\nx")
	if len(q) > 200 || strings.ContainsAny(q, "\n\x1b") {
		t.Fatalf("quoted: %q", q)
	}
}

func TestRootAtKeepsItsOwnDescriptor(t *testing.T) {
	dir := t.TempDir()
	hosttreetest.WriteAt(t, mustRoot(t, dir), "f", "x")
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := hosttree.RootAt(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f.Close()
	if _, err := root.Lstat("f"); err != nil {
		t.Fatalf("after the caller closed its descriptor: %v", err)
	}
	file, err := os.Open(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := hosttree.RootAt(int(file.Fd())); err == nil {
		t.Fatal("a regular file made a root")
	}
}

func mustRoot(t *testing.T, dir string) *hosttree.Dir {
	t.Helper()
	root, err := hosttree.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}
