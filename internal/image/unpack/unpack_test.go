package unpack_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/image/unpack"
)

// Three layers as an image's: the later ones whiteout files and
// directories of the ones below, make a directory opaque, link to files
// below, replace and re-add what was removed.
func TestLayersApplyInOrder(t *testing.T) {
	im := newImage(t)
	base := layer(t,
		dirE("./", 0o755),
		dirE("./etc/", 0o755),
		fileE("./etc/passwd", "root:x:0:0\n"),
		fileE("./etc/hostname", "one\n"),
		dirE("./bin/", 0o755),
		fileE("./bin/busybox", "BB").with(func(h *tar.Header) { h.Mode = 0o755 }),
		symlinkE("./bin/sh", "busybox"),
		dirE("./usr/", 0o755),
		dirE("./usr/lib/", 0o755),
		fileE("./usr/lib/libc.so", "libc"),
		fileE("./usr/lib/old.so", "old"),
		dirE("./var/", 0o755),
		dirE("./var/cache/", 0o755),
		fileE("./var/cache/a", "a"),
		dirE("./var/cache/sub/", 0o700),
		fileE("./var/cache/sub/b", "b"),
		dirE("./opt/tool/", 0o755),
		fileE("./opt/tool/bin", "tool"),
		dirE("./srv/", 0o755),
		fileE("./srv/lower", "l"),
		dirE("./srv/keep/", 0o755),
		fileE("./srv/keep/lower", "lk"),
		dirE("./home/u/", 0o700).with(owner(1000, 1000)),
		fileE("./home/u/.profile", "p").with(owner(1000, 1000)),
	)
	second := layer(t,
		whiteoutE("./etc/.wh.hostname"),
		fileE("./etc/hostname2", "two\n"),
		whiteoutE("./var/.wh.cache"),
		dirE("./srv/", 0o750),
		dirE("./srv/keep/", 0o755),
		fileE("./srv/keep/upper", "u"),
		whiteoutE("./srv/.wh..wh..opq"),
		fileE("./srv/new", "n"),
		linkE("./usr/lib/libc.so.6", "usr/lib/libc.so"),
		whiteoutE("./usr/lib/.wh.old.so"),
		fileE("./opt/new", "N"),
		linkE("./opt/new2", "./opt/new"),
		linkE("./bin/ash", "/bin/busybox"),
	)
	third := layer(t,
		whiteoutE("opt/.wh.tool"),
		fileE("etc/hostname", "three\n"),
		dirE("var/cache/", 0o755),
		whiteoutE("srv/.wh.new"),
		fileE("bin/sh", "real sh").with(func(h *tar.Header) { h.Mode = 0o755 }),
	)
	st := im.must(base, second, third)
	want := `. dir 0755 0:0
bin dir 0755 0:0
bin/ash file 0755 0:0 "BB" n2
bin/busybox file 0755 0:0 "BB" n2
bin/sh file 0755 0:0 "real sh" n1
etc dir 0755 0:0
etc/hostname file 0644 0:0 "three\n" n1
etc/hostname2 file 0644 0:0 "two\n" n1
etc/passwd file 0644 0:0 "root:x:0:0\n" n1
home dir 0755 0:0
home/u dir 0700 1000:1000
home/u/.profile file 0644 1000:1000 "p" n1
opt dir 0755 0:0
opt/new file 0644 0:0 "N" n2
opt/new2 file 0644 0:0 "N" n2
srv dir 0750 0:0
srv/keep dir 0755 0:0
srv/keep/upper file 0644 0:0 "u" n1
usr dir 0755 0:0
usr/lib dir 0755 0:0
usr/lib/libc.so file 0644 0:0 "libc" n2
usr/lib/libc.so.6 file 0644 0:0 "libc" n2
var dir 0755 0:0
var/cache dir 0755 0:0`
	if got := im.tree(); got != want {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, want)
	}
	if st.Whiteouts != 6 {
		t.Errorf("%d whiteouts applied, want 6", st.Whiteouts)
	}
	body := "root:x:0:0\none\nBBlibcoldabtoolllkp" + "two\nunN" + "three\nreal sh"
	if st.Entries != 24+13+5 || st.Bytes != int64(len(body)) {
		t.Errorf("stats %+v", st)
	}
	im.untouched()
}

// The opaque marker hides what the layers below put in its directory,
// at every depth, whether it comes before the layer's entries there or
// after them, and whether those have entries for their directories.
func TestOpaqueDirectoryWhateverTheOrder(t *testing.T) {
	lower := []entry{
		dirE("a/", 0o755), dirE("a/b/", 0o755), dirE("a/b/c/", 0o755),
		fileE("a/b/c/bar", "bar"), fileE("a/x", "x"), symlinkE("a/l", "/etc"),
		fileE("z", "z"),
	}
	marker := whiteoutE("a/.wh..wh..opq")
	upper := []entry{dirE("a/", 0o755), dirE("a/b/", 0o755), dirE("a/b/c/", 0o755), fileE("a/b/c/foo", "foo")}
	for name, entries := range map[string][]entry{
		"marker first":       append([]entry{upper[0], marker}, upper[1:]...),
		"marker last":        append(upper[:4:4], marker),
		"no directory entry": {fileE("a/b/c/foo", "foo"), marker},
	} {
		t.Run(name, func(t *testing.T) {
			im := newImage(t)
			im.must(layer(t, lower...), layer(t, entries...))
			im.has(`a/b/c/foo file 0644 0:0 "foo" n1`, `z file 0644 0:0 "z" n1`)
			im.lacks("a/b/c/bar", "a/x", "a/l", "a/.wh..wh..opq")
			im.untouched()
		})
	}
	t.Run("at the root", func(t *testing.T) {
		im := newImage(t)
		im.must(layer(t, lower...), layer(t, fileE("y", "y"), whiteoutE(".wh..wh..opq"), dirE("a/", 0o700)))
		if got, want := im.tree(), ". dir 0755 0:0\na dir 0700 0:0\ny file 0644 0:0 \"y\" n1"; got != want {
			t.Fatalf("tree:\n%s\nwant:\n%s", got, want)
		}
		im.untouched()
	})
}

// A whiteout hides what the layers below have at its name, never what
// its own layer wrote there.
func TestWhiteoutHidesOnlyLowerLayers(t *testing.T) {
	im := newImage(t)
	im.must(
		layer(t, fileE("a/f", "lower"), fileE("a/d/old", "old"), fileE("a/g", "g")),
		layer(t, fileE("a/f", "upper"), whiteoutE("a/.wh.f"), fileE("a/d/new", "new"), whiteoutE("a/.wh.d"),
			whiteoutE("a/.wh.g"), whiteoutE("a/.wh.missing"), whiteoutE("nowhere/.wh.x"), whiteoutE("a/f/.wh.x")),
	)
	im.has(`a/f file 0644 0:0 "upper" n1`, `a/d/new file 0644 0:0 "new" n1`)
	im.lacks("a/d/old", "a/g", "a/.wh.f", "nowhere")
	im.untouched()
}

// An entry over an existing one of another type replaces it; a
// directory over a directory merges, taking the entry's attributes.
func TestEntriesReplaceOtherTypes(t *testing.T) {
	im := newImage(t)
	im.must(
		layer(t,
			fileE("tree/deep/er/f", "f"), fileE("file", "file"), symlinkE("link", im.outside),
			fileE("merge/kept", "kept"), symlinkE("dirlink", "merge"), fileE("fifo", "x"),
		),
		layer(t,
			fileE("tree", "now a file"), dirE("file/", 0o755), fileE("file/in", "in"),
			dirE("link/", 0o711), dirE("merge/", 0o700).with(owner(1000, 1000)), fileE("dirlink", "not a link"),
			entry{hdr: hdr(tar.TypeFifo, "fifo", 0o600)},
		),
	)
	im.has(`tree file 0644 0:0 "now a file" n1`, `file dir 0755 0:0`, `file/in file 0644 0:0 "in" n1`,
		`link dir 0711 0:0`, `merge dir 0700 1000:1000`, `merge/kept file 0644 0:0 "kept" n1`,
		`dirlink file 0644 0:0 "not a link" n1`, `fifo fifo 0600 0:0`)
	im.lacks("tree/deep")
	im.untouched()
}

func TestHardLinks(t *testing.T) {
	im := newImage(t)
	im.must(
		layer(t, fileE("lower", "L"), symlinkE("sym", "lower"), fileE("over", "old")),
		layer(t,
			fileE("mine", "M"),
			linkE("to-mine", "mine"),
			linkE("to-lower", "/lower"),
			linkE("to-sym", "sym"),
			linkE("over", "lower"),
			linkE("mine", "mine"), // to itself: nothing to do
			linkE("again", "to-mine"),
			linkE("again", "mine"),
		),
	)
	same := func(a, b string) {
		if x, y := im.lstat(a), im.lstat(b); x.Ino != y.Ino {
			t.Errorf("%s and %s are different files", a, b)
		}
	}
	same("mine", "to-mine")
	same("mine", "again")
	same("lower", "to-lower")
	same("lower", "over")
	same("sym", "to-sym")
	im.has(`mine file 0644 0:0 "M" n3`, `lower file 0644 0:0 "L" n3`, `to-sym link 0777 0:0 -> lower`)

	for _, target := range []string{"missing", "dir", "dir/missing", "lower/x", "."} {
		t.Run(target, func(t *testing.T) {
			im := newImage(t)
			im.must(layer(t, fileE("lower", "L"), dirE("dir/", 0o755)))
			_, err := im.apply(layer(t, linkE("link", target)), unpack.Options{})
			if !errors.Is(err, unpack.ErrInvalid) || !strings.Contains(err.Error(), `"link"`) {
				t.Fatalf("a hard link to %q: %v", target, err)
			}
			im.lacks("link")
			im.untouched()
		})
	}
}

func TestSymlinksKeepTheirTargets(t *testing.T) {
	im := newImage(t)
	targets := map[string]string{
		"rel": "../lib/x", "abs": "/etc/passwd", "dangling": "nowhere/at/all", "up": "../../../..",
		"self": "self", "odd": "bad\xff\n\x1b[0m", "long": strings.Repeat("x/", 2000) + "y",
	}
	var entries []entry
	for name, target := range targets {
		entries = append(entries, symlinkE("d/"+name, target).with(owner(1000, 1001)).with(mtime(t0.Add(time.Hour))))
	}
	im.must(layer(t, entries...))
	for name, target := range targets {
		got, err := os.Readlink(filepath.Join(im.root, "d", name))
		if err != nil || got != target {
			t.Errorf("%s -> %q, %v; want %q", name, got, err, target)
		}
		st := im.lstat("d/" + name)
		if st.Uid != 1000 || st.Gid != 1001 || st.Mtim.Sec != t0.Add(time.Hour).Unix() {
			t.Errorf("%s: owner %d:%d, mtime %d", name, st.Uid, st.Gid, st.Mtim.Sec)
		}
	}
	im.untouched()
}

func TestOwnersAndModes(t *testing.T) {
	im := newImage(t)
	mode := func(m int64) func(h *tar.Header) { return func(h *tar.Header) { h.Mode = m } }
	im.must(layer(t,
		fileE("su", "su").with(mode(0o4755)),
		fileE("user-setuid", "x").with(mode(0o4755)).with(owner(1000, 1000)),
		fileE("setgid", "x").with(mode(0o2711)).with(owner(0, 1000)),
		fileE("both", "x").with(mode(0o6755)).with(owner(1000, 1000)),
		fileE("none", "x").with(mode(0o0000)).with(owner(65534, 65534)),
		dirE("tmp/", 0o1777),
		dirE("shared/", 0o2775).with(owner(1000, 1000)),
		fileE("shared/inherits-nothing", "x").with(owner(1001, 1002)),
		fileE("high", "x").with(owner(4000000000, 3000000000)),
	))
	im.has(`su file 4755 0:0 "su" n1`, `user-setuid file 4755 1000:1000 "x" n1`,
		`setgid file 2711 0:1000 "x" n1`, `both file 6755 1000:1000 "x" n1`, `none file 0000 65534:65534 "x" n1`,
		`tmp dir 1777 0:0`, `shared dir 2775 1000:1000`, `shared/inherits-nothing file 0644 1001:1002 "x" n1`,
		`high file 0644 4000000000:3000000000 "x" n1`)
	for _, o := range [][2]int{{-1, 0}, {0, -1}, {1<<32 - 1, 0}, {0, 1 << 32}} {
		_, err := im.apply(layer(t, fileE("bad", "x").with(owner(o[0], o[1]))), unpack.Options{})
		if !errors.Is(err, unpack.ErrInvalid) {
			t.Errorf("owner %d:%d: %v", o[0], o[1], err)
		}
	}
	im.untouched()
}

func TestDevicesAndFifos(t *testing.T) {
	im := newImage(t)
	dev := func(typ byte, name string, mode int64, major, minor int64) entry {
		h := hdr(typ, name, mode)
		h.Devmajor, h.Devminor = major, minor
		return entry{hdr: h}
	}
	im.must(layer(t,
		dev(tar.TypeChar, "dev/null", 0o666, 1, 3),
		dev(tar.TypeBlock, "dev/loop0", 0o660, 7, 0).with(owner(0, 6)),
		dev(tar.TypeChar, "dev/big", 0o600, 4095, 1<<20-1),
		dev(tar.TypeFifo, "run/fifo", 0o4644, 0, 0).with(owner(1000, 1000)).with(mtime(t0.Add(time.Minute))),
	))
	im.has(`dev/null char 0666 0:0 1:3`, `dev/loop0 block 0660 0:6 7:0`, `dev/big char 0600 0:0 4095:1048575`,
		`run/fifo fifo 4644 1000:1000`)
	if st := im.lstat("run/fifo"); st.Mtim.Sec != t0.Add(time.Minute).Unix() {
		t.Errorf("fifo mtime %d", st.Mtim.Sec)
	}
	_, err := im.apply(layer(t, dev(tar.TypeChar, "dev/huge", 0o600, 4096, 0)), unpack.Options{})
	if !errors.Is(err, unpack.ErrInvalid) {
		t.Errorf("device 4096:0: %v", err)
	}
	im.untouched()
}

// capNetRaw is security.capability for cap_net_raw+ep (VFS_CAP_REVISION_2).
const capNetRaw = "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

func TestXattrs(t *testing.T) {
	im := newImage(t)
	im.must(
		layer(t,
			dirE("d/", 0o755).with(xattrs("user.old", "1", "user.kept", "k", "security.selinux", "host_t")),
		),
		layer(t,
			dirE("d/", 0o755).with(xattrs("user.kept", "k2", "trusted.t", "T")),
			fileE("d/ping", "ping").with(owner(1000, 1000)).with(func(h *tar.Header) { h.Mode = 0o4755 }).
				with(xattrs("security.capability", capNetRaw, "user.bin", "\x00\xff", "security.selinux", "x_t",
					"trusted.overlay.opaque", "y", "security.ima", "sig")),
			symlinkE("d/link", "ping").with(xattrs("user.no", "1", "trusted.yes", "1")),
			entry{hdr: hdr(tar.TypeFifo, "d/fifo", 0o644)}.with(xattrs("user.no", "1", "trusted.yes", "2")),
		),
	)
	full := list(t, im.root, true)
	for _, want := range []string{
		`d dir 0755 0:0 t` + fmt.Sprint(t0.Unix()) + `.000000000 x[trusted.t="T",user.kept="k2"]`,
		`d/ping file 4755 1000:1000 "ping" n1 t` + fmt.Sprint(t0.Unix()) + `.000000000 x[security.capability=` +
			fmt.Sprintf("%q", capNetRaw) + `,user.bin="\x00\xff"]`,
		`d/link link 0777 0:0 -> ping t` + fmt.Sprint(t0.Unix()) + `.000000000 x[trusted.yes="1"]`,
		`d/fifo fifo 0644 0:0 t` + fmt.Sprint(t0.Unix()) + `.000000000 x[trusted.yes="2"]`,
	} {
		if !strings.Contains(full, want+"\n") && !strings.HasSuffix(full, want) {
			t.Errorf("no line %s in\n%s", want, full)
		}
	}
	// A capability the kernel refuses is an error, not skipped.
	_, err := im.apply(layer(t, fileE("bad", "x").with(xattrs("security.capability", "junk"))), unpack.Options{})
	if err == nil || !strings.Contains(err.Error(), "security.capability") {
		t.Errorf("a malformed capability: %v", err)
	}
	im.untouched()
}

func TestXattrsSkippedAreCounted(t *testing.T) {
	im := newImage(t)
	st := im.must(layer(t,
		fileE("f", "f").with(xattrs("security.selinux", "x", "trusted.overlay.redirect", "/etc", "user.ok", "1")),
		symlinkE("l", "f").with(xattrs("user.x", "1")),
	))
	if st.XattrsSkipped != 3 {
		t.Errorf("%d attributes skipped, want 3", st.XattrsSkipped)
	}
}

// Every object gets its entry's modification time, directories too once
// the layer has filled them; a later layer's changes leave the times of
// the directories it has no entries for to the kernel.
func TestModificationTimes(t *testing.T) {
	im := newImage(t)
	at := func(d time.Duration) func(h *tar.Header) { return mtime(t0.Add(d)) }
	im.must(layer(t,
		dirE("./", 0o755).with(at(1*time.Second)),
		dirE("a/", 0o755).with(at(2*time.Second)),
		dirE("a/b/", 0o755).with(at(3*time.Second)),
		fileE("a/b/f", "f").with(at(4*time.Second)).with(func(h *tar.Header) {
			h.AccessTime = t0.Add(40 * time.Second)
			h.ModTime = t0.Add(4*time.Second + 500*time.Millisecond)
		}),
		symlinkE("a/l", "b").with(at(5*time.Second)),
		fileE("a/b/g", "g").with(at(6*time.Second)),
		dirE("old/", 0o755).with(at(7*time.Second)),
		whiteoutE("a/.wh.gone"),
	))
	for rel, want := range map[string]time.Duration{
		".": 1 * time.Second, "a": 2 * time.Second, "a/b": 3 * time.Second, "a/b/f": 4*time.Second + 500*time.Millisecond,
		"a/l": 5 * time.Second, "a/b/g": 6 * time.Second, "old": 7 * time.Second,
	} {
		st := im.lstat(rel)
		if got := time.Unix(st.Mtim.Sec, st.Mtim.Nsec); !got.Equal(t0.Add(want)) {
			t.Errorf("%s: mtime %v, want %v", rel, got.UTC(), t0.Add(want))
		}
	}
	if st := im.lstat("a/b/f"); st.Atim.Sec != t0.Add(40*time.Second).Unix() {
		t.Errorf("a/b/f: atime %d", st.Atim.Sec)
	}
	// A directory made for an entry, replaced by a later entry of the
	// layer: the times recorded for the first go nowhere.
	im.must(layer(t, dirE("r/", 0o755).with(at(time.Hour)), fileE("r", "file").with(at(2*time.Hour))))
	if st := im.lstat("r"); st.Mtim.Sec != t0.Add(2*time.Hour).Unix() {
		t.Errorf("r: mtime %d", st.Mtim.Sec)
	}
}

// Names hold any byte but '/' and NUL; 255-byte names and paths past
// PATH_MAX work.
func TestOddNamesAndDeepTrees(t *testing.T) {
	im := newImage(t)
	odd := []string{"new\nline", "\x1b[31mred", "bad\xff\xfeutf8", "ctl\x01\x7f\t", "-dash", " space ", strings.Repeat("L", 255), "..."}
	var entries []entry
	for _, name := range odd {
		entries = append(entries, fileE("odd/"+name, name))
	}
	// Deeper than the descriptors the walks keep open (hosttree.MaxOpen),
	// and longer than PATH_MAX.
	const levels = 300
	comp := strings.Repeat("d", 20)
	deep := strings.TrimSuffix(strings.Repeat(comp+"/", levels), "/") // 6,299 bytes
	entries = append(entries, dirE(deep+"/", 0o750).with(mtime(t0.Add(time.Hour))), fileE(deep+"/bottom", "bottom"),
		fileE(deep+"/gone", "gone"), symlinkE(deep+"/up", "../../.."))
	fds := openFds(t)
	im.must(layer(t, entries...))
	// The deep directory's mtime, set at the end through descriptors.
	if st := statDeep(t, im.root, comp, levels); st.Mtim.Sec != t0.Add(time.Hour).Unix() {
		t.Errorf("deep directory: mtime %d", st.Mtim.Sec)
	}
	im.must(layer(t, linkE("top", deep+"/bottom"), whiteoutE(deep+"/.wh.gone"), linkE(deep+"/down", "odd/-dash")))
	for _, name := range odd {
		b, err := os.ReadFile(filepath.Join(im.root, "odd", name))
		if err != nil || string(b) != name {
			t.Errorf("%q: %q, %v", name, b, err)
		}
	}
	tree := im.tree()
	for _, want := range []string{
		deep + " dir 0750 0:0",
		deep + `/bottom file 0644 0:0 "bottom" n2`,
		`top file 0644 0:0 "bottom" n2`,
		deep + `/down file 0644 0:0 "-dash" n2`,
		deep + "/up link 0777 0:0 -> ../../..",
	} {
		if !strings.Contains(tree, want+"\n") && !strings.HasSuffix(tree, want) {
			t.Errorf("no line %.60q…", want[max(0, len(want)-80):])
		}
	}
	if strings.Contains(tree, deep+"/gone") {
		t.Error("the deep whiteout left its file")
	}
	// And an opaque marker at the top removes the whole deep tree.
	im.must(layer(t, whiteoutE(".wh..wh..opq")))
	if got := im.tree(); got != ". dir 0755 0:0" {
		t.Errorf("after the opaque root:\n%.300s", got)
	}
	if n := openFds(t); n != fds {
		t.Errorf("%d descriptors open, %d before", n, fds)
	}
	im.untouched()
}

func TestLimits(t *testing.T) {
	im := newImage(t)
	_, err := im.apply(layer(t, fileE("a", "1"), fileE("b", "2"), fileE("c", "3")), unpack.Options{MaxEntries: 2})
	if !errors.Is(err, unpack.ErrLimit) || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("3 entries, at most 2: %v", err)
	}
	// Parents made for an entry count.
	_, err = im.apply(layer(t, fileE("x/y/z", "1")), unpack.Options{MaxEntries: 2})
	if !errors.Is(err, unpack.ErrLimit) {
		t.Errorf("3 objects, at most 2: %v", err)
	}
	_, err = im.apply(layer(t, fileE("a", "12345"), fileE("b", "678")), unpack.Options{MaxBytes: 7})
	if !errors.Is(err, unpack.ErrLimit) || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("8 bytes, at most 7: %v", err)
	}
	for name, want := range map[string]error{
		strings.Repeat("a/", unpack.MaxDepth) + "b": unpack.ErrLimit,
		strings.Repeat("x", unpack.MaxNameLen+1):    unpack.ErrLimit,
		strings.Repeat("n", 256):                    unpack.ErrInvalid,
		"a/.wh.b/c":                                 unpack.ErrInvalid,
		".wh.":                                      unpack.ErrInvalid,
		"d/.wh..":                                   unpack.ErrInvalid,
	} {
		_, err := im.apply(layer(t, fileE(name, "")), unpack.Options{})
		if !errors.Is(err, want) {
			t.Errorf("%.40q: %v, want %v", name, err, want)
		}
	}
	im.untouched()
}

func TestMalformedLayers(t *testing.T) {
	im := newImage(t)
	good := layer(t, fileE("a", strings.Repeat("x", 3000)), fileE("b", "b"))
	for name, data := range map[string][]byte{
		"garbage":        bytes.Repeat([]byte("not a tar "), 100),
		"cut in a file":  good[:1024+512],
		"cut in headers": good[:100],
		"bad checksum":   append(append([]byte{}, good[:148]...), append([]byte("0000000\x00"), good[156:]...)...),
	} {
		_, err := im.apply(data, unpack.Options{})
		if !errors.Is(err, unpack.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := im.apply(good[:1024+512], unpack.Options{})
	if err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("the error does not name the entry: %v", err)
	}
	_, err = im.apply(layer(t, entry{hdr: hdr('V', "vol", 0)}), unpack.Options{})
	if !errors.Is(err, unpack.ErrInvalid) {
		t.Errorf("a volume header: %v", err)
	}
	_, err = im.apply(layer(t, symlinkE("s", "")), unpack.Options{})
	if !errors.Is(err, unpack.ErrInvalid) {
		t.Errorf("a symbolic link to nothing: %v", err)
	}
	_, err = im.apply(layer(t, fileE(".", "")), unpack.Options{})
	if !errors.Is(err, unpack.ErrInvalid) {
		t.Errorf("a file for the root: %v", err)
	}
	// An empty stream is an empty layer (no end marker either).
	if _, err := im.apply(nil, unpack.Options{}); err != nil {
		t.Errorf("an empty stream: %v", err)
	}
	im.untouched()
}

func TestProgressAndCancel(t *testing.T) {
	im := newImage(t)
	big := strings.Repeat("0123456789abcdef", 300<<10/16*10) // 3 MB
	data := append(layer(t, fileE("big", big), fileE("small", "s")), make([]byte, 5000)...)
	var reports []int64
	st, err := im.apply(data, unpack.Options{Progress: func(n int64) { reports = append(reports, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) < 3 || reports[len(reports)-1] != int64(len(data)) {
		t.Errorf("reports %v for %d bytes", reports, len(data))
	}
	for i := 1; i < len(reports); i++ {
		if reports[i] <= reports[i-1] {
			t.Errorf("reports go back: %v", reports)
		}
	}
	if st.Bytes != int64(len(big)+1) || st.Entries != 2 {
		t.Errorf("stats %+v", st)
	}

	ctx, cancel := context.WithCancel(context.Background())
	f, err := os.Open(im.root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := io.MultiReader(bytes.NewReader(data[:2<<20]), readerFunc(func(p []byte) (int, error) {
		cancel()
		return copy(p, data[2<<20:2<<20+1]), nil
	}))
	if _, err := unpack.Apply(ctx, f, r, unpack.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// statDeep returns the status of the directory n levels of comp below
// root, opened one level at a time.
func statDeep(t *testing.T, root, comp string, n int) unix.Stat_t {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		next, err := unix.Openat(fd, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// openFds counts this process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}
