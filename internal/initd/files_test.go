package initd_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// The files op against a cairn-init in the test process: paths are the
// host's here (a temporary directory), as they are the sandbox's in a
// sandbox (test/integration/files_test.go).

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := errdefs.CodeOf(err); got != code {
		t.Errorf("%s: %v (code %s), want code %s", what, err, got, code)
	}
}

// A write of several frames reads back equal, with its mode and owner,
// parents made; a second write keeps the mode; a link is written through.
func TestFilesWriteRead(t *testing.T) {
	h := start(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	data := make([]byte, 3*api.FileChunk+17)
	rand.Read(data)
	p := filepath.Join(dir, "a/b/f")
	mode := uint32(0o640)
	e, err := h.Write(ctx, api.FileRequest{Path: p, Mode: &mode, Owner: "1000:1000", Parents: true}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if e.Size != int64(len(data)) || e.Mode != 0o640 || e.UID != 1000 || e.GID != 1000 || e.Type != api.FileTypeFile || e.Permissions != "-rw-r-----" {
		t.Errorf("entry %+v", e)
	}
	_, rc, err := h.Read(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	if e, err = h.Write(ctx, api.FileRequest{Path: p}, strings.NewReader("x")); err != nil || e.Mode != 0o640 || e.UID != 1000 {
		t.Errorf("rewrite: %+v %v: want mode and owner kept", e, err)
	}
	os.Symlink("f", filepath.Join(dir, "a/b/link"))
	if _, err := h.Write(ctx, api.FileRequest{Path: filepath.Join(dir, "a/b/link")}, strings.NewReader("through")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "through" {
		t.Errorf("write through a link: the target holds %q", b)
	}
	if e, _ := h.Stat(ctx, filepath.Join(dir, "a/b/link")); e.Type != api.FileTypeSymlink || e.SymlinkTarget != "f" {
		t.Errorf("stat of the link: %+v", e)
	}
	_, _, err = h.Read(ctx, dir)
	wantCode(t, "read of a directory", err, api.CodeIsDir)
	_, _, err = h.Read(ctx, filepath.Join(dir, "nothing"))
	wantCode(t, "read of nothing", err, api.CodeNoFile)
	_, err = h.Write(ctx, api.FileRequest{Path: filepath.Join(dir, "x/y")}, strings.NewReader("x"))
	wantCode(t, "write without parents", err, api.CodeNoFile)
	_, err = h.Write(ctx, api.FileRequest{Path: "relative"}, strings.NewReader("x"))
	wantCode(t, "write of a relative path", err, api.CodeInvalidArgument)
}

// failing is a body that fails after some bytes.
type failing struct{ n int }

func (f *failing) Read(b []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("client went away")
	}
	n := min(len(b), f.n)
	f.n -= n
	return n, nil
}

// A write whose body fails leaves the file as it was, and nothing beside
// it.
func TestFilesWriteCutLeavesFile(t *testing.T) {
	h := start(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("old"), 0o644)
	_, err := h.Write(ctx, api.FileRequest{Path: p}, &failing{n: 2 * api.FileChunk})
	var be *agent.BodyError
	if !errors.As(err, &be) {
		t.Fatalf("write with a failing body: %v, want a BodyError", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		des, _ := os.ReadDir(dir)
		b, _ := os.ReadFile(p)
		if len(des) == 1 && string(b) == "old" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a cut write: %d entries, file %q", len(des), b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// list (with depth), mkdir -p, rename, remove and their errors.
func TestFilesTree(t *testing.T) {
	h := start(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	e, created, err := h.MakeDir(ctx, api.FileRequest{Path: dir + "/a/b/c", Parents: true})
	if err != nil || !created || e.Type != api.FileTypeDir || e.Mode != 0o755 {
		t.Fatalf("mkdir -p: %+v %v %v", e, created, err)
	}
	if _, created, err = h.MakeDir(ctx, api.FileRequest{Path: dir + "/a/b/c", Parents: true}); err != nil || created {
		t.Errorf("mkdir -p again: %v %v, want no error, not created", created, err)
	}
	_, _, err = h.MakeDir(ctx, api.FileRequest{Path: dir + "/a"})
	wantCode(t, "mkdir of an existing directory", err, api.CodeFileExists)
	os.WriteFile(dir+"/a/f", []byte("1"), 0o600)
	var names []string
	list := func(depth int) {
		names = nil
		if err := h.List(ctx, dir, depth, func(e api.FileEntry) error {
			names = append(names, strings.TrimPrefix(e.Path, dir))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	list(1)
	if strings.Join(names, " ") != "/a" {
		t.Errorf("depth 1: %v", names)
	}
	list(3)
	if strings.Join(names, " ") != "/a /a/b /a/b/c /a/f" {
		t.Errorf("depth 3: %v", names)
	}
	err = h.List(ctx, dir+"/a/f", 1, func(api.FileEntry) error { return nil })
	wantCode(t, "list of a file", err, api.CodeNotDir)
	if e, err := h.Rename(ctx, dir+"/a/f", dir+"/g"); err != nil || e.Path != dir+"/g" {
		t.Errorf("rename: %+v %v", e, err)
	}
	err = h.Remove(ctx, dir+"/a", false)
	wantCode(t, "remove of a full directory", err, api.CodeDirNotEmpty)
	if err := h.Remove(ctx, dir+"/a", true); err != nil {
		t.Fatal(err)
	}
	err = h.Remove(ctx, dir+"/a", true)
	wantCode(t, "remove of nothing", err, api.CodeNoFile)
	if err := h.Remove(ctx, dir+"/g", false); err != nil {
		t.Fatal(err)
	}
	err = h.Remove(ctx, "/", true)
	wantCode(t, "remove of /", err, api.CodeInvalidArgument)
}

// A tree goes out as a tar and back in elsewhere equal: modes (setgid
// too), owners, links, hard links, times.
func TestFilesTarRoundTrip(t *testing.T) {
	h := start(t)
	ctx := ctxT(t)
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(src+"/d/e", 0o755)
	os.WriteFile(src+"/d/f", []byte("content"), 0o600)
	os.Chown(src+"/d/f", 1001, 1002)
	syscall.Chmod(src+"/d/e", 0o2775)
	os.Symlink("../d/f", src+"/d/e/l")
	os.Link(src+"/d/f", src+"/d/hard")
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(src+"/d/f", old, old)
	_, rc, err := h.TarOut(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	res, err := h.TarIn(ctx, api.FileRequest{Path: dst + "/x", Parents: true}, rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 6 || res.Bytes != 7 {
		t.Errorf("tar in: %+v, want 6 entries, 7 bytes", res)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dst+"/x/src/d/f", &st); err != nil || st.Uid != 1001 || st.Gid != 1002 || st.Mode&0o7777 != 0o600 || st.Nlink != 2 {
		t.Errorf("file: %+v %v", st, err)
	}
	if fi, err := os.Stat(dst + "/x/src/d/f"); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("file's time: %v %v", fi, err)
	}
	if err := syscall.Stat(dst+"/x/src/d/e", &st); err != nil || st.Mode&0o7777 != 0o2775 {
		t.Errorf("setgid dir: %o %v", st.Mode, err)
	}
	if l, err := os.Readlink(dst + "/x/src/d/e/l"); err != nil || l != "../d/f" {
		t.Errorf("link: %q %v", l, err)
	}
}

// A tar entry may not leave the directory it is extracted into, by name
// or through a link.
func TestFilesTarInStaysInside(t *testing.T) {
	h := start(t)
	ctx := ctxT(t)
	outside := t.TempDir()
	for _, entries := range [][]tar.Header{
		{{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside}, {Name: "l/escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		{{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, hdr := range entries {
			tw.WriteHeader(&hdr)
		}
		tw.Close()
		dst := t.TempDir()
		_, err := h.TarIn(ctx, api.FileRequest{Path: dst + "/in", Parents: true}, &buf)
		wantCode(t, "tar with "+entries[len(entries)-1].Name, err, api.CodeBadTar)
		if des, _ := os.ReadDir(outside); len(des) != 0 {
			t.Errorf("an entry landed outside: %v", des)
		}
	}
	_, err := h.TarIn(ctx, api.FileRequest{Path: t.TempDir()}, strings.NewReader(strings.Repeat("not a tar", 200)))
	wantCode(t, "garbage", err, api.CodeBadTar)
}

// A watch sees a create, a write, a rename and a remove, in order, and a
// new subdirectory's files when recursive.
func TestFilesWatch(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	dir := t.TempDir()
	evs := make(chan api.FileEvent, 64)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- h.Watch(ctx, dir, true, func() { close(ready) }, func(ev api.FileEvent) error { evs <- ev; return nil })
	}()
	<-ready
	os.WriteFile(dir+"/a", []byte("x"), 0o644)
	os.Rename(dir+"/a", dir+"/b")
	os.Remove(dir + "/b")
	os.Mkdir(dir+"/sub", 0o755)
	time.Sleep(100 * time.Millisecond) // the new directory's watch is set
	os.WriteFile(dir+"/sub/c", nil, 0o644)
	want := []string{"create a", "write a", "rename a", "remove b", "create sub", "create sub/c"}
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case ev := <-evs:
			if ev.Type == api.FileEventChmod {
				continue
			}
			got = append(got, ev.Type+" "+ev.Name)
			if ev.Type == api.FileEventRename && ev.To != dir+"/b" {
				t.Errorf("rename to %q", ev.To)
			}
		case <-timeout:
			t.Fatalf("events %q, want %q", got, want)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events %q, want %q", got, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch ended with %v", err)
	}
}

// A sandbox holds at most api.MaxWatchStreams watches at once: the next is
// L08; one that ends frees its place.
func TestFilesWatchLimit(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	dir := t.TempDir()
	done := make(chan error, api.MaxWatchStreams)
	for range api.MaxWatchStreams {
		ready := make(chan struct{})
		go func() {
			done <- h.Watch(ctx, dir, false, func() { close(ready) }, func(api.FileEvent) error { return nil })
		}()
		<-ready
	}
	err := h.Watch(ctx, dir, false, nil, func(api.FileEvent) error { return nil })
	wantCode(t, "one watch too many", err, api.CodeWatchLimit)
	cancel()
	for range api.MaxWatchStreams {
		<-done
	}
	ctx2, cancel2 := context.WithCancel(ctxT(t))
	defer cancel2()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ready := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			errc <- h.Watch(ctx2, dir, false, func() { close(ready) }, func(api.FileEvent) error { return nil })
		}()
		select {
		case <-ready:
			cancel2()
			<-errc
			return
		case err := <-errc:
			if time.Now().After(deadline) {
				t.Fatalf("a watch after the others ended: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
