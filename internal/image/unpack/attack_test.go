package unpack_test

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/image/unpack"
)

// attack is a hostile image: layers applied in order, the last of which
// must fail with want (nil: must succeed, doing the safe thing), touching
// nothing outside the root.
type attack struct {
	layers func(outside string) [][]entry
	want   error
	check  func(t *testing.T, im *image) // after the last layer; may be nil
}

func (a attack) run(t *testing.T) {
	im := newImage(t)
	layers := a.layers(im.outside)
	for i, entries := range layers {
		_, err := im.apply(layer(t, entries...), unpack.Options{})
		if i < len(layers)-1 {
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			continue
		}
		switch {
		case a.want == nil && err != nil:
			t.Fatalf("the last layer: %v", err)
		case a.want != nil && !errors.Is(err, a.want):
			t.Fatalf("the last layer: %v, want %v", err, a.want)
		case err != nil && !strings.Contains(err.Error(), "layer entry "):
			t.Errorf("the error names no entry: %v", err)
		}
	}
	im.untouched()
	if a.check != nil {
		a.check(t, im)
	}
}

// one is an attack of a single layer.
func one(entries ...func(o string) entry) func(string) [][]entry {
	return func(o string) [][]entry {
		var l []entry
		for _, e := range entries {
			l = append(l, e(o))
		}
		return [][]entry{l}
	}
}

// two is an attack of a lower layer and the layer on it.
func two(lower []func(o string) entry, upper ...func(o string) entry) func(string) [][]entry {
	return func(o string) [][]entry {
		a, b := one(lower...)(o), one(upper...)(o)
		return [][]entry{a[0], b[0]}
	}
}

// e makes an entry that does not depend on where the outside is.
func e(x entry) func(string) entry { return func(string) entry { return x } }

// toOutside is a symbolic link name to the outside directory (absolute),
// or below it.
func toOutside(name, below string) entryFunc {
	return func(o string) entry { return symlinkE(name, filepath.Join(o, below)) }
}

func TestWritesThroughSymlinksAreRefused(t *testing.T) {
	for name, a := range map[string]attack{
		"file through a link, same layer":  {layers: one(toOutside("a", ""), e(fileE("a/secret", "pwned"))), want: unpack.ErrUnsafe},
		"file through a link, lower layer": {layers: two(fl(e(symlinkE("a", "../outside"))), e(fileE("a/secret", "pwned"))), want: unpack.ErrUnsafe},
		"file through a chain of ..":       {layers: one(e(symlinkE("up", "..")), e(fileE("up/outside/secret", "pwned"))), want: unpack.ErrUnsafe},
		"file through a link in a link":    {layers: one(e(symlinkE("a", ".")), e(symlinkE("a/b", "..")), e(fileE("a/b/outside/x", "x"))), want: unpack.ErrUnsafe},
		"deep file through a link":         {layers: two(fl(toOutside("a", "")), e(fileE("a/sub/new/x", "x"))), want: unpack.ErrUnsafe},
		"directory through a link":         {layers: two(fl(toOutside("a", "")), e(dirE("a/sub/", 0o700).with(owner(1000, 1000)))), want: unpack.ErrUnsafe},
		"symlink through a link":           {layers: two(fl(toOutside("a", "")), e(symlinkE("a/new", "x"))), want: unpack.ErrUnsafe},
		"device through a link":            {layers: two(fl(toOutside("a", "")), e(entry{hdr: hdr(tar.TypeFifo, "a/fifo", 0o666)})), want: unpack.ErrUnsafe},
		"hard link made through a link":    {layers: two(fl(toOutside("a", ""), e(fileE("f", "f"))), e(linkE("a/f", "f"))), want: unpack.ErrUnsafe},
	} {
		t.Run(name, a.run)
	}
}

// An entry whose own name is a symbolic link to the outside replaces the
// link; nothing is done through it.
func TestEntriesReplaceSymlinksToTheOutside(t *testing.T) {
	lower := fl(toOutside("file", "secret"), toOutside("dir", ""), toOutside("sub", "sub"), e(fileE("real", "real")))
	later := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, a := range map[string]attack{
		"file":      {layers: two(lower, e(fileE("file", "mine").with(owner(1000, 1000)).with(xattrs("user.x", "1")))), check: has(`file file 0644 1000:1000 "mine" n1`)},
		"directory": {layers: two(lower, e(dirE("dir/", 0o700).with(owner(1000, 1000)).with(mtime(later))), e(fileE("dir/secret", "mine"))), check: has(`dir dir 0700 1000:1000`, `dir/secret file 0644 0:0 "mine" n1`)},
		"hard link": {layers: two(lower, e(linkE("file", "real"))), check: has(`file file 0644 0:0 "real" n2`)},
		"symlink":   {layers: two(lower, e(symlinkE("sub", "elsewhere").with(owner(5, 5)))), check: has(`sub link 0777 5:5 -> elsewhere`)},
		"fifo":      {layers: two(lower, e(entry{hdr: hdr(tar.TypeFifo, "file", 0o600)}.with(owner(1000, 1000)))), check: has(`file fifo 0600 1000:1000`)},
		// A link entry's attributes go to the link, not its target.
		"link attributes": {layers: one(toOutside("l", "secret").with(func(h *tar.Header) { h.Uid, h.ModTime = 1000, later }).
			with(xattrs("trusted.x", "1")))},
		// Times of a directory replaced by a link to the outside go nowhere.
		"directory times": {layers: one(e(dirE("d/", 0o755).with(mtime(later))), e(dirE("d/e/", 0o755).with(mtime(later))), toOutside("d", ""))},
	} {
		t.Run(name, a.run)
	}
}

func has(lines ...string) func(t *testing.T, im *image) {
	return func(t *testing.T, im *image) { im.has(lines...) }
}

// entryFunc makes an entry that depends on where the outside is.
type entryFunc func(outside string) entry

// with changes the entry f makes.
func (f entryFunc) with(g func(h *tar.Header)) entryFunc {
	return func(o string) entry { return f(o).with(g) }
}

func fl(es ...func(string) entry) []func(string) entry { return es }

func TestNamesLeavingTheRootAreRefused(t *testing.T) {
	for _, name := range []string{"..", "../", "../outside/secret", "a/../../outside/secret", "./../outside/x", "a/..", "/../outside/x",
		"a/b/../../../outside/x", "../outside/.wh.secret", "../outside/.wh..wh..opq", "../.wh.outside"} {
		t.Run(name, func(t *testing.T) {
			x := fileE(name, "pwned")
			if strings.HasSuffix(name, "/") {
				x = dirE(name, 0o755)
			}
			attack{layers: one(e(x)), want: unpack.ErrUnsafe}.run(t)
		})
	}
	for _, target := range []string{"../outside/secret", "a/../../outside/secret", "/../outside/secret"} {
		t.Run("hard link to "+target, func(t *testing.T) {
			attack{layers: one(e(fileE("a/f", "f")), e(linkE("x", target))), want: unpack.ErrUnsafe}.run(t)
		})
	}
}

// Absolute names are below the root.
func TestAbsoluteNamesAreBelowTheRoot(t *testing.T) {
	attack{
		layers: func(o string) [][]entry {
			return [][]entry{{fileE(o+"/secret", "mine"), fileE("/etc/passwd", "root::0:0\n"), dirE("//abs//dir/", 0o755)}}
		},
		check: func(t *testing.T, im *image) {
			b, err := os.ReadFile(filepath.Join(im.root, im.outside, "secret"))
			if err != nil || string(b) != "mine" {
				t.Errorf("%q, %v", b, err)
			}
			im.has(`etc/passwd file 0644 0:0 "root::0:0\n" n1`, `abs/dir dir 0755 0:0`)
		},
	}.run(t)
}

func TestHardLinksOutOfTheRootAreRefused(t *testing.T) {
	var before unix.Stat_t
	if err := unix.Stat("/etc/passwd", &before); err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]attack{
		"to /etc/passwd":        {layers: one(e(linkE("p", "/etc/passwd"))), want: unpack.ErrInvalid},
		"to the outside's path": {layers: func(o string) [][]entry { return [][]entry{{linkE("p", o+"/secret")}} }, want: unpack.ErrInvalid},
		"through a linked dir":  {layers: two(fl(toOutside("esc", "")), e(linkE("p", "esc/secret"))), want: unpack.ErrUnsafe},
		"through a relative link": {layers: two(fl(e(symlinkE("esc", "../outside/sub"))), e(linkE("p", "esc/file"))),
			want: unpack.ErrUnsafe},
		"through a chain of ..": {layers: one(e(symlinkE("up", "..")), e(linkE("p", "up/outside/secret"))), want: unpack.ErrUnsafe},
		"deep through a link": {layers: two(fl(e(dirE("a/b/", 0o755)), toOutside("a/b/c", "")), e(linkE("p", "a/b/c/sub/file"))),
			want: unpack.ErrUnsafe},
		// A hard link to a link to the outside is another name of the link.
		"to a link to the outside": {layers: one(toOutside("s", "secret"), e(linkE("h", "s"))),
			check: func(t *testing.T, im *image) {
				if a, b := im.lstat("s"), im.lstat("h"); a.Ino != b.Ino || a.Mode&unix.S_IFMT != unix.S_IFLNK {
					t.Error("h is not the link s")
				}
			}},
	} {
		t.Run(name, a.run)
	}
	var after unix.Stat_t
	if err := unix.Stat("/etc/passwd", &after); err != nil || after.Nlink != before.Nlink || after.Ino != before.Ino {
		t.Errorf("the host's /etc/passwd: %d links (%d before), %v", after.Nlink, before.Nlink, err)
	}
}

func TestWhiteoutsStayInTheRoot(t *testing.T) {
	lower := fl(e(fileE("keep", "k")), e(fileE("sub/keep", "k")), toOutside("esc", ""), e(symlinkE("rel", "../outside")),
		e(symlinkE("up", "..")), e(dirE("d/", 0o755)), toOutside("d/esc", ""))
	kept := has(`keep file 0644 0:0 "k" n1`, `sub/keep file 0644 0:0 "k" n1`)
	for name, a := range map[string]attack{
		".wh.":                   {layers: two(lower, e(whiteoutE(".wh."))), want: unpack.ErrInvalid, check: kept},
		".wh..":                  {layers: two(lower, e(whiteoutE(".wh.."))), want: unpack.ErrInvalid, check: kept},
		".wh...":                 {layers: two(lower, e(whiteoutE(".wh..."))), want: unpack.ErrInvalid, check: kept},
		"sub/.wh..":              {layers: two(lower, e(whiteoutE("sub/.wh.."))), want: unpack.ErrInvalid, check: kept},
		"sub/.wh...":             {layers: two(lower, e(whiteoutE("sub/.wh..."))), want: unpack.ErrInvalid, check: kept},
		"through a link":         {layers: two(lower, e(whiteoutE("esc/.wh.secret"))), want: unpack.ErrUnsafe, check: kept},
		"through a relative one": {layers: two(lower, e(whiteoutE("rel/.wh.sub"))), want: unpack.ErrUnsafe, check: kept},
		"through ..":             {layers: two(lower, e(whiteoutE("up/.wh.outside"))), want: unpack.ErrUnsafe, check: kept},
		"deep through a link":    {layers: two(lower, e(whiteoutE("d/esc/sub/.wh.file"))), want: unpack.ErrUnsafe, check: kept},
		"opaque through a link":  {layers: two(lower, e(whiteoutE("esc/.wh..wh..opq"))), want: unpack.ErrUnsafe, check: kept},
		"opaque through ..":      {layers: two(lower, e(whiteoutE("up/outside/.wh..wh..opq"))), want: unpack.ErrUnsafe, check: kept},
		// Removing a link, or a tree that holds one, never follows it.
		"the link itself":  {layers: two(lower, e(whiteoutE(".wh.esc")), e(whiteoutE(".wh.rel"))), check: kept},
		"a tree with one":  {layers: two(lower, e(whiteoutE(".wh.d"))), check: kept},
		"opaque with one":  {layers: two(lower, e(whiteoutE("d/.wh..wh..opq"))), check: kept},
		"opaque root":      {layers: two(lower, e(whiteoutE(".wh..wh..opq")))},
		"replaced by file": {layers: two(lower, e(fileE("d", "file")))},
	} {
		t.Run(name, a.run)
	}
}

// The attack of the brief, against the host's real /etc: run only once
// the same attacks against the sentinel directory have passed.
func TestSymlinkToEtcThenPasswd(t *testing.T) {
	t.Run("sentinel", TestWritesThroughSymlinksAreRefused)
	if t.Failed() {
		t.Fatal("not trying the host's /etc")
	}
	attack{layers: one(e(symlinkE("a", "/etc")), e(fileE("a/passwd", "pwned::0:0\n"))), want: unpack.ErrUnsafe}.run(t)
	attack{layers: two(fl(e(symlinkE("a", "/etc"))), e(whiteoutE("a/.wh.passwd"))), want: unpack.ErrUnsafe}.run(t)
	attack{layers: two(fl(e(symlinkE("a", "/etc"))), e(linkE("p", "a/passwd"))), want: unpack.ErrUnsafe}.run(t)
}
