package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// The Files API on real sandboxes (docs/files.md).

// randReader yields n pseudo-random bytes of seed, hashing them.
type randReader struct {
	r *rand.ChaCha8
	n int64
	h hash.Hash
}

func newRandReader(seed byte, n int64) *randReader {
	var s [32]byte
	s[0] = seed
	return &randReader{r: rand.NewChaCha8(s), n: n, h: sha256.New()}
}

func (r *randReader) Read(b []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), r.n)]
	r.r.Read(b)
	r.h.Write(b)
	r.n -= int64(len(b))
	return len(b), nil
}

func (r *randReader) sum() string { return hex.EncodeToString(r.h.Sum(nil)) }

func filesCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func wantAPICode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := client.CodeOf(err); got != code {
		t.Errorf("%s: %v, want code %s", what, err, code)
	}
}

// 100 MiB and 10,000 small files written through the API read back equal,
// list, rename and remove; bad input gets its code.
func TestFilesLargeAndMany(t *testing.T) {
	d := startDaemon(t)
	d.create("fs")
	c, ctx := d.client, filesCtx(t)

	big := newRandReader(1, 100<<20)
	mode := uint32(0o600)
	e, err := c.WriteFile(ctx, "fs", "/data/big.bin", big, client.WriteOptions{Mode: &mode, Owner: "1000:1000"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Size != 100<<20 || e.Mode != 0o600 || e.UID != 1000 || e.GID != 1000 {
		t.Errorf("big file's entry: %+v", e)
	}
	if inside := strings.Fields(d.sh("fs", "sha256sum /data/big.bin"))[0]; inside != big.sum() {
		t.Errorf("sha256 inside %s, written %s", inside, big.sum())
	}
	rc, err := c.ReadFile(ctx, "fs", "/data/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil || n != 100<<20 || hex.EncodeToString(h.Sum(nil)) != big.sum() {
		t.Fatalf("read back %d bytes (%v), sha256 %x, want %s", n, err, h.Sum(nil), big.sum())
	}

	// 10,000 small files, 8 at a time, in 100 directories.
	const files = 10000
	content := func(i int) string { return fmt.Sprintf("file %d\n", i) }
	each := func(fn func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, files)
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range next {
					if err := fn(i); err != nil {
						errs <- fmt.Errorf("file %d: %w", i, err)
					}
				}
			})
		}
		for i := range files {
			next <- i
		}
		close(next)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	name := func(i int) string { return fmt.Sprintf("/many/d%02d/f%04d", i%100, i) }
	start := time.Now()
	each(func(i int) error {
		_, err := c.WriteFile(ctx, "fs", name(i), strings.NewReader(content(i)), client.WriteOptions{})
		return err
	})
	t.Logf("wrote %d files in %v", files, time.Since(start))
	each(func(i int) error {
		rc, err := c.ReadFile(ctx, "fs", name(i))
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err == nil && string(b) != content(i) {
			err = fmt.Errorf("read %q, want %q", b, content(i))
		}
		return err
	})
	list, err := c.ListFiles(ctx, "fs", "/many", 2)
	if err != nil {
		t.Fatal(err)
	}
	var nfiles, ndirs int
	for _, e := range list {
		switch e.Type {
		case api.FileTypeFile:
			nfiles++
		case api.FileTypeDir:
			ndirs++
		}
	}
	if nfiles != files || ndirs != 100 {
		t.Errorf("list depth 2: %d files, %d directories, want %d, 100", nfiles, ndirs, files)
	}
	if top, err := c.ListFiles(ctx, "fs", "/many", 1); err != nil || len(top) != 100 {
		t.Errorf("list depth 1: %d entries, %v", len(top), err)
	}
	if _, err := c.RenameFile(ctx, "fs", "/many", "/moved"); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(d.sh("fs", "find /moved -type f | wc -l")); got != "10000" {
		t.Errorf("after rename: %s files under /moved", got)
	}
	_, err = c.StatFile(ctx, "fs", "/many")
	wantAPICode(t, "stat of the old name", err, api.CodeNoFile)
	err = c.RemoveFile(ctx, "fs", "/moved", false)
	wantAPICode(t, "remove of a full directory", err, api.CodeDirNotEmpty)
	if err := c.RemoveFile(ctx, "fs", "/moved", true); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(d.sh("fs", "test -e /moved && echo there || echo gone")); got != "gone" {
		t.Errorf("after remove: %s", got)
	}

	_, err = c.ReadFile(ctx, "fs", "/nothing")
	wantAPICode(t, "read of nothing", err, api.CodeNoFile)
	_, err = c.ReadFile(ctx, "fs", "/data")
	wantAPICode(t, "read of a directory", err, api.CodeIsDir)
	_, err = c.ListFiles(ctx, "fs", "/data/big.bin", 1)
	wantAPICode(t, "list of a file", err, api.CodeNotDir)
	_, err = c.ReadFile(ctx, "fs", "relative/path")
	wantAPICode(t, "relative path", err, api.CodeInvalidArgument)
	_, err = c.WriteFile(ctx, "fs", "/proc/nope", strings.NewReader("x"), client.WriteOptions{})
	if code := client.CodeOf(err); code == "" || code == api.CodeInternal {
		t.Errorf("write into /proc: %v, want a file code", err)
	}
	_, err = c.StatFile(ctx, "nosuch", "/")
	wantAPICode(t, "a missing sandbox", err, api.CodeNoSandbox)
}

// treeOf describes a tree inside a sandbox: each entry's path, mode,
// owner, size, type and, for a file, its checksum.
func treeOf(d *daemon, name, dir string) string {
	d.t.Helper()
	out := d.sh(name, "cd "+dir+" && find . | sort | while read -r p; do "+
		`s=$(stat -c '%a %u %g %F' "$p"); `+
		`if [ -f "$p" ] && [ ! -L "$p" ]; then s="$s $(md5sum < "$p" | cut -c1-32)"; fi; `+
		`if [ -L "$p" ]; then s="$s -> $(readlink "$p")"; fi; echo "$p $s"; done`)
	return out
}

// A directory tarred out of one sandbox and into another is equal there:
// contents, modes (setuid included), owners, links.
func TestFilesTarBetweenSandboxes(t *testing.T) {
	d := startDaemon(t)
	d.create("src")
	d.create("dst")
	c, ctx := d.client, filesCtx(t)
	d.sh("src", `mkdir -p /tree/a/b /tree/empty && echo one > /tree/a/one && head -c 3000000 /dev/urandom > /tree/a/b/big &&
		chmod 0751 /tree/a && chmod 04755 /tree/a/one && chown 1234:5678 /tree/a/b/big && chown 42:43 /tree/empty &&
		ln -s ../a/one /tree/a/b/link && ln /tree/a/one /tree/a/hard && chmod 1777 /tree/empty`)
	want := treeOf(d, "src", "/tree")
	rc, err := c.Tar(ctx, "src", "/tree")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ExtractTar(ctx, "dst", "/copy", rc, client.WriteOptions{})
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.Entries != 8 {
		t.Errorf("extracted %+v, want 8 entries", res)
	}
	if got := treeOf(d, "dst", "/copy/tree"); got != want {
		t.Errorf("tree in dst:\n%s\nwant:\n%s", got, want)
	}
	// cairn cp between the two, as a new name.
	d.mustCLI("cp", "src:/tree", "dst:/again")
	if got := treeOf(d, "dst", "/again"); got != want {
		t.Errorf("cairn cp src:/tree dst:/again:\n%s\nwant:\n%s", got, want)
	}
	// A tar that climbs out is refused, nothing made outside.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "../../escaped", Typeflag: tar.TypeReg, Mode: 0o644})
	tw.Close()
	_, err = c.ExtractTar(ctx, "dst", "/in/here", &buf, client.WriteOptions{})
	wantAPICode(t, "tar with ../../", err, api.CodeBadTar)
	if got := strings.TrimSpace(d.sh("dst", "ls /escaped /in/escaped 2>/dev/null; echo done")); got != "done" {
		t.Errorf("an entry escaped: %q", got)
	}
}

// Links and ../.. resolve inside the sandbox: a marker in a host file
// never comes out, and nothing written lands on the host.
func TestFilesStayInSandbox(t *testing.T) {
	d := startDaemon(t)
	d.create("jail")
	c, ctx := d.client, filesCtx(t)
	marker := fmt.Sprintf("HOST-MARKER-%d", time.Now().UnixNano())
	hostDir := t.TempDir()
	hostFile := filepath.Join(hostDir, "secret")
	if err := os.WriteFile(hostFile, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostShadow, _ := os.ReadFile("/etc/shadow")
	d.sh("jail", fmt.Sprintf(`mkdir -p /etc /j/deep/er && echo sandbox-shadow > /etc/shadow &&
		ln -s /etc/shadow /j/shadow && ln -s %s /j/host && ln -s ../../../../../../../../%s /j/deep/er/climb &&
		ln -s / /j/root`, hostFile, hostFile))

	read := func(p string) (string, error) {
		rc, err := c.ReadFile(ctx, "jail", p)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	if got, err := read("/j/shadow"); err != nil || got != "sandbox-shadow\n" {
		t.Errorf("read through a link to /etc/shadow: %q %v, want the sandbox's", got, err)
	}
	for _, p := range []string{"/j/host", "/j/deep/er/climb", "/../../../../" + hostFile, "/j/root/../../" + hostFile, hostFile} {
		got, err := read(p)
		if strings.Contains(got, marker) {
			t.Fatalf("read %s gave the host's file", p)
		}
		wantAPICode(t, "read "+p, err, api.CodeNoFile)
	}
	if got, err := read("/../../../etc/shadow"); err != nil || got != "sandbox-shadow\n" || (len(hostShadow) > 0 && got == string(hostShadow)) {
		t.Errorf("read /../../../etc/shadow: %q %v", got, err)
	}
	// Writing through a link to the host's path writes the sandbox's.
	if _, err := c.WriteFile(ctx, "jail", "/j/host", strings.NewReader("overwritten"), client.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(hostFile); string(b) != marker+"\n" {
		t.Fatalf("the host file changed: %q", b)
	}
	if got := d.sh("jail", "cat "+hostFile); got != "overwritten" {
		t.Errorf("the sandbox's %s: %q", hostFile, got)
	}
	// A tar and a list of the links carry no host content.
	rc, err := c.Tar(ctx, "jail", "/j")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || bytes.Contains(b, []byte(marker)) {
		t.Errorf("tar of /j: %v, holds the marker: %v", err, bytes.Contains(b, []byte(marker)))
	}
	list, err := c.ListFiles(ctx, "jail", "/j", 3)
	if err != nil {
		t.Fatal(err)
	}
	if j, _ := json.Marshal(list); bytes.Contains(j, []byte(marker)) {
		t.Errorf("list holds the marker")
	}
	err = c.RemoveFile(ctx, "jail", "/", true)
	wantAPICode(t, "remove /", err, api.CodeInvalidArgument)
}

// A watch sees a create, a write, a rename and a remove made by a process
// inside, in order.
func TestFilesWatch(t *testing.T) {
	d := startDaemon(t)
	d.create("w")
	c := d.client
	d.sh("w", "mkdir -p /watched")
	ctx, cancel := context.WithCancel(filesCtx(t))
	defer cancel()
	evs := make(chan api.FileEvent, 100)
	done := make(chan error, 1)
	go func() {
		done <- c.WatchDir(ctx, "w", "/watched", true, func(ev api.FileEvent) error { evs <- ev; return nil })
	}()
	// The watch is set once the stream answered; give it a moment.
	time.Sleep(500 * time.Millisecond)
	d.sh("w", "echo hello > /watched/a && mv /watched/a /watched/b && rm /watched/b")
	want := []string{"create /watched/a", "write /watched/a", "rename /watched/a -> /watched/b", "remove /watched/b"}
	var got []string
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case ev := <-evs:
			if ev.Type == api.FileEventChmod {
				continue
			}
			s := ev.Type + " " + ev.Path
			if ev.To != "" {
				s += " -> " + ev.To
			}
			got = append(got, s)
		case err := <-done:
			t.Fatalf("watch ended: %v; events %q", err, got)
		case <-timeout:
			t.Fatalf("events %q, want %q", got, want)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("watch ended with %v", err)
	}
}

// localTree describes a local tree: each entry's path, mode, size and
// content.
func localTree(t *testing.T, root string) string {
	var lines []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		s := fmt.Sprintf("%s %v %d", rel, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			s += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			s += " -> " + l
		}
		lines = append(lines, s)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// cairn cp copies a local tree in and back out equal; cairn files does
// what it says.
func TestFilesCLI(t *testing.T) {
	d := startDaemon(t)
	d.create("cli")
	src := filepath.Join(t.TempDir(), "site")
	os.MkdirAll(src+"/css", 0o755)
	os.WriteFile(src+"/index.html", []byte("<h1>hi</h1>\n"), 0o644)
	os.WriteFile(src+"/run.sh", []byte("#!/bin/sh\necho run\n"), 0o755)
	os.WriteFile(src+"/css/a.css", bytes.Repeat([]byte("x"), 1<<20), 0o600)
	os.Symlink("index.html", src+"/home.html")

	d.sh("cli", "mkdir -p /srv")
	d.mustCLI("cp", src, "cli:/srv")      // into the existing /srv, as /srv/site
	d.mustCLI("cp", src, "cli:/srv/copy") // as the new /srv/copy
	if got := d.sh("cli", "/srv/site/run.sh; cat /srv/copy/index.html; stat -c %a:%u /srv/site/css/a.css; readlink /srv/copy/home.html"); got != "run\n<h1>hi</h1>\n600:0\nindex.html\n" {
		t.Errorf("inside after cp in: %q", got)
	}
	out := t.TempDir()
	d.mustCLI("cp", "cli:/srv/site", out)          // into out, as out/site
	d.mustCLI("cp", "cli:/srv/copy", out+"/other") // as out/other
	want := localTree(t, src)
	for _, dir := range []string{out + "/site", out + "/other"} {
		if got := localTree(t, dir); got != want {
			t.Errorf("%s after cp out:\n%s\nwant:\n%s", dir, got, want)
		}
	}
	d.mustCLI("cp", "cli:/srv/site/index.html", out+"/one.html")
	if b, _ := os.ReadFile(out + "/one.html"); string(b) != "<h1>hi</h1>\n" {
		t.Errorf("one file out: %q", b)
	}

	var entries []api.FileEntry
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "files", "ls", "cli", "/srv/site")), &entries); err != nil || len(entries) != 4 {
		t.Errorf("files ls --json: %d entries, %v", len(entries), err)
	}
	if ls := d.mustCLI("files", "ls", "cli", "/srv/site"); !strings.Contains(ls, "/srv/site/home.html -> index.html") || !strings.Contains(ls, "-rwxr-xr-x") {
		t.Errorf("files ls:\n%s", ls)
	}
	if got := d.mustCLI("files", "cat", "cli", "/srv/site/index.html"); got != "<h1>hi</h1>\n" {
		t.Errorf("files cat: %q", got)
	}
	if _, _, code := d.cli("written\n", "files", "write", "cli", "/srv/new/w.txt", "--mode", "0640"); code != 0 {
		t.Errorf("files write: exit %d", code)
	}
	d.mustCLI("files", "mkdir", "cli", "/srv/x/y/z", "-p")
	d.mustCLI("files", "mv", "cli", "/srv/x", "/srv/x2")
	if got := d.sh("cli", "cat /srv/new/w.txt; stat -c %a /srv/new/w.txt; test -d /srv/x2/y/z && echo dir"); got != "written\n640\ndir\n" {
		t.Errorf("after write, mkdir, mv: %q", got)
	}
	if code := d.errorCode("files", "rm", "cli", "/srv/x2"); code != api.CodeDirNotEmpty {
		t.Errorf("files rm of a full directory: %s", code)
	}
	d.mustCLI("files", "rm", "cli", "/srv/x2", "-r")
	if code := d.errorCode("files", "cat", "cli", "/srv/x2/y"); code != api.CodeNoFile {
		t.Errorf("files cat after rm: %s", code)
	}
}

// A write past the sandbox's disk size fails at once with F07 (the upload
// is stopped, not sent to its end), the file stays as it was, and the
// space is free again; a stopped sandbox's files are S04.
func TestFilesFullDisk(t *testing.T) {
	d := startDaemon(t)
	d.create("small", "--disk", "128M")
	c, ctx := d.client, filesCtx(t)
	if _, err := c.WriteFile(ctx, "small", "/f", strings.NewReader("old"), client.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.WriteFile(ctx, "small", "/f", newRandReader(2, 4<<30), client.WriteOptions{})
	wantAPICode(t, "a write of 4 GiB into 128 MiB", err, api.CodeFileNoSpace)
	t.Logf("failed after %v", time.Since(start))
	if got := d.sh("small", "cat /f; ls -a / | grep -c cairn- || true"); got != "old0\n" {
		t.Errorf("after the failed write: %q, want the old file and no temporary one", got)
	}
	if _, err := c.WriteFile(ctx, "small", "/g", newRandReader(3, 32<<20), client.WriteOptions{}); err != nil {
		t.Errorf("a write of 32 MiB after: %v", err)
	}
	d.mustCLI("stop", "small")
	_, err = c.StatFile(ctx, "small", "/f")
	wantAPICode(t, "stat in a stopped sandbox", err, api.CodeNotRunning)
}
