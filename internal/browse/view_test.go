package browse

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPublishRefusesBadTables(t *testing.T) {
	tables := t.TempDir()
	for _, bad := range [][]Entry{
		{{Name: "v1", Path: "../x"}},
		{{Name: "v1", Path: "checkpoints/../../x"}},
		{{Name: "v1", Path: "/etc"}},
		{{Name: "v1", Path: ""}},
		{{Name: "v1", Path: "."}},
		{{Name: "v1", Path: "checkpoints//a"}},
		{{Name: "v1", Path: "checkpoints/a/"}},
		{{Name: "", Path: "checkpoints/a"}},
		{{Name: "..", Path: "checkpoints/a"}},
		{{Name: "a/b", Path: "checkpoints/a"}},
		{{Name: ".hidden", Path: "checkpoints/a"}},
		{{Name: "v1", Path: "checkpoints/a"}, {Name: "v1", Path: "checkpoints/b"}},
	} {
		if err := Publish(tables, "sb", bad); err == nil {
			t.Errorf("Publish(%v) succeeded", bad)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", ".x"} {
		if err := Publish(tables, id, nil); err == nil {
			t.Errorf("Publish for sandbox %q succeeded", id)
		}
	}
	if got := names(t, tables); len(got) != 0 {
		t.Fatalf("refused tables left files: %v", got)
	}

	want := []Entry{{Name: "v2", Path: "checkpoints/b"}, {Name: "v1", Path: "checkpoints/a"}}
	publish(t, tables, "sb", want...)
	publish(t, tables, "sb", want...) // replaces
	if got := names(t, tables); !reflect.DeepEqual(got, []string{"sb.json"}) {
		t.Fatalf("tables directory holds %v, want only sb.json", got)
	}
	data, err := os.ReadFile(filepath.Join(tables, "sb.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(data)); got != `[{"name":"v2","path":"checkpoints/b"},{"name":"v1","path":"checkpoints/a"}]` {
		t.Fatalf("table is %s", got)
	}
	if got, bad := parseTable(data); !reflect.DeepEqual(got, want) || bad != nil {
		t.Fatalf("parseTable: %v, %v", got, bad)
	}
	publish(t, tables, "empty")
	if data, _ := os.ReadFile(filepath.Join(tables, "empty.json")); strings.TrimSpace(string(data)) != "[]" {
		t.Fatalf("empty table is %q", data)
	}
	for _, id := range []string{"sb", "empty", "never"} {
		if err := Unpublish(tables, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(t, tables); len(got) != 0 {
		t.Fatalf("after Unpublish: %v", got)
	}
}

// The server keeps the good entries of a table written by someone else and
// leaves out the rest.
func TestParseTableKeepsGoodEntries(t *testing.T) {
	got, bad := parseTable([]byte(`[{"name":"v1","path":"checkpoints/a"},{"name":"v2","path":"../x"},
		{"name":"v3","path":"/etc"},{"name":"v1","path":"checkpoints/b"},{"name":"../v4","path":"checkpoints/c"}]`))
	if want := []Entry{{Name: "v1", Path: "checkpoints/a"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
	if len(bad) != 4 {
		t.Fatalf("reasons: %q", bad)
	}
	for _, junk := range []string{``, `{}`, `[{"name":"v1","path":"a","extra":1}]`, `not json`} {
		if got, bad := parseTable([]byte(junk)); got != nil || len(bad) == 0 {
			t.Errorf("parseTable(%q) = %v, %v", junk, got, bad)
		}
	}
}

// Entries appear and vanish with the table, at once, and read as the
// pool's files.
func TestEntriesFollowTheTable(t *testing.T) {
	f := newFixture(t)
	a := f.checkpoint(t, "ck-a", map[string]string{"etc/hostname": "a\n", "big": strings.Repeat("0123456789", 100000)})
	b := f.checkpoint(t, "ck-b", map[string]string{"etc/hostname": "b\n"})
	f.serve(t)
	sb := filepath.Join(f.mnt, "sb1")

	if _, err := os.Stat(sb); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a sandbox without a table: stat says %v", err)
	}
	if got := names(t, f.mnt); len(got) != 0 {
		t.Fatalf("the view lists %v with no tables", got)
	}

	publish(t, f.tables, "sb1")
	if got := names(t, sb); len(got) != 0 {
		t.Fatalf("an empty table lists %v", got)
	}
	if got := names(t, f.mnt); !reflect.DeepEqual(got, []string{"sb1"}) {
		t.Fatalf("the view lists %v, want [sb1]", got)
	}

	// A directory kept open and read again from its start (as gVisor
	// does) is listed afresh.
	open, err := os.Open(sb)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if got, err := open.Readdirnames(-1); err != nil || len(got) != 0 {
		t.Fatalf("lists %v %v", got, err)
	}
	publish(t, f.tables, "sb1", Entry{Name: "v1", Path: a})
	if got := names(t, sb); !reflect.DeepEqual(got, []string{"v1"}) {
		t.Fatalf("lists %v, want [v1]", got)
	}
	if _, err := open.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := open.Readdirnames(-1); err != nil || !reflect.DeepEqual(got, []string{"v1"}) {
		t.Fatalf("the open directory, rewound, lists %v %v, want [v1]", got, err)
	}
	for name, want := range map[string]string{"etc/hostname": "a\n", "big": strings.Repeat("0123456789", 100000)} {
		got, err := os.ReadFile(filepath.Join(sb, "v1", name))
		if err != nil || string(got) != want {
			t.Fatalf("read v1/%s: %v (%d bytes, want %d)", name, err, len(got), len(want))
		}
	}
	// An open file and an open directory of v1, held across its removal.
	held, err := os.Open(filepath.Join(sb, "v1", "etc", "hostname"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldDir, err := os.Open(filepath.Join(sb, "v1", "etc"))
	if err != nil {
		t.Fatal(err)
	}
	defer heldDir.Close()

	publish(t, f.tables, "sb1", Entry{Name: "v2", Path: b})
	if got := names(t, sb); !reflect.DeepEqual(got, []string{"v2"}) {
		t.Fatalf("after v1 went: lists %v, want [v2]", got)
	}
	if _, err := os.Stat(filepath.Join(sb, "v1", "etc", "hostname")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("v1 was removed, yet stat of a file in it says %v", err)
	}
	if _, err := heldDir.ReadDir(-1); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("listing a directory of a removed entry: got %v, want ENOENT", err)
	}
	if _, err := os.Stat(filepath.Join(heldDir.Name(), "hostname")); err == nil {
		t.Fatal("a lookup inside a removed entry still answers")
	}
	buf := make([]byte, 8)
	if n, err := held.ReadAt(buf, 0); string(buf[:n]) != "a\n" {
		t.Fatalf("a file held open across its entry's removal reads %q, %v", buf[:n], err)
	}
	if got, err := os.ReadFile(filepath.Join(sb, "v2", "etc", "hostname")); err != nil || string(got) != "b\n" {
		t.Fatalf("read v2: %q %v", got, err)
	}

	// The same name for another path is another entry.
	publish(t, f.tables, "sb1", Entry{Name: "v2", Path: a}, Entry{Name: "v1", Path: a})
	if got := names(t, sb); !reflect.DeepEqual(got, []string{"v2", "v1"}) {
		t.Fatalf("lists %v, want [v2 v1] (the table's order)", got)
	}
	if got, err := os.ReadFile(filepath.Join(sb, "v2", "etc", "hostname")); err != nil || string(got) != "a\n" {
		t.Fatalf("v2 now names ck-a, yet reads %q %v", got, err)
	}
	// Two entries over one directory are distinct files to the kernel.
	var s1, s2 unix.Stat_t
	if err := unix.Stat(filepath.Join(sb, "v1", "big"), &s1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(sb, "v2", "big"), &s2); err != nil {
		t.Fatal(err)
	}
	if s1.Ino == s2.Ino {
		t.Fatalf("v1/big and v2/big have one inode number %d", s1.Ino)
	}

	if err := Unpublish(f.tables, "sb1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sb); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Unpublish, stat says %v", err)
	}
	if got := names(t, f.mnt); len(got) != 0 {
		t.Fatalf("after Unpublish the view lists %v", got)
	}
}

// Nothing can be written through the view.
func TestViewIsReadOnly(t *testing.T) {
	f := newFixture(t)
	a := f.checkpoint(t, "ck-a", map[string]string{"file": "data\n", "dir/x": "x"})
	f.serve(t)
	publish(t, f.tables, "sb", Entry{Name: "v1", Path: a})
	v1 := filepath.Join(f.mnt, "sb", "v1")
	if _, err := os.Stat(v1); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(v1, "file")

	_, err := os.OpenFile(file, os.O_WRONLY, 0)
	requireErrno(t, "open for writing", err, unix.EROFS)
	_, err = os.OpenFile(file, os.O_RDWR, 0)
	requireErrno(t, "open read-write", err, unix.EROFS)
	_, err = os.OpenFile(file, os.O_RDONLY|os.O_TRUNC, 0)
	requireErrno(t, "open with O_TRUNC", err, unix.EROFS)
	requireErrno(t, "create", os.WriteFile(filepath.Join(v1, "new"), nil, 0o644), unix.EROFS)
	requireErrno(t, "mkdir", os.Mkdir(filepath.Join(v1, "newdir"), 0o755), unix.EROFS)
	requireErrno(t, "remove", os.Remove(file), unix.EROFS)
	requireErrno(t, "rmdir", os.Remove(filepath.Join(v1, "dir")), unix.EROFS)
	requireErrno(t, "rename", os.Rename(file, filepath.Join(v1, "moved")), unix.EROFS)
	requireErrno(t, "chmod", os.Chmod(file, 0o777), unix.EROFS)
	requireErrno(t, "truncate", os.Truncate(file, 0), unix.EROFS)
	requireErrno(t, "symlink", os.Symlink("file", filepath.Join(v1, "link")), unix.EROFS)
	requireErrno(t, "link", os.Link(file, filepath.Join(v1, "hard")), unix.EROFS)
	requireErrno(t, "setxattr", unix.Setxattr(file, "user.x", []byte("1"), 0), unix.EROFS)
	requireErrno(t, "mkdir in the sandbox directory", os.Mkdir(filepath.Join(f.mnt, "sb", "v9"), 0o755), unix.EROFS)
	requireErrno(t, "create in the root", os.WriteFile(filepath.Join(f.mnt, "x"), nil, 0o644), unix.EROFS)

	if got, _ := os.ReadFile(filepath.Join(f.pool, a, "file")); string(got) != "data\n" {
		t.Fatalf("the pool's file now holds %q", got)
	}
	if got := names(t, filepath.Join(f.pool, a)); len(got) != 2 {
		t.Fatalf("the checkpoint now holds %v", got)
	}
}

// No table and no symbolic link makes the view show anything outside the
// pool.
func TestNeverOutsideThePool(t *testing.T) {
	f := newFixture(t)
	outside := filepath.Join(f.dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "sub", "secret"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := f.checkpoint(t, "good", map[string]string{"ok": "ok"})
	// Inside a checkpoint: a link to a file outside and to a directory
	// outside, both with absolute targets, as a sandbox could write.
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(f.pool, good, "filelink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.pool, good, "dirlink")); err != nil {
		t.Fatal(err)
	}
	// In the pool: a checkpoint that is a link out, one below a linked
	// directory, and a regular file.
	if err := os.Symlink(outside, filepath.Join(f.pool, "checkpoints", "evil")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.dir, filepath.Join(f.pool, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.pool, "checkpoints", "plain"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.serve(t)

	// Written by hand: Publish refuses these.
	table := `[{"name":"up","path":"../outside"},{"name":"abs","path":"` + outside + `"},
		{"name":"evil","path":"checkpoints/evil"},{"name":"via","path":"up/outside"},
		{"name":"plain","path":"checkpoints/plain"},{"name":"missing","path":"checkpoints/none"},
		{"name":"good","path":"` + good + `"}]`
	if err := os.WriteFile(filepath.Join(f.tables, "sb.json"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := filepath.Join(f.mnt, "sb")
	if got := names(t, sb); !reflect.DeepEqual(got, []string{"good"}) {
		t.Fatalf("lists %v, want only [good]", got)
	}
	for _, name := range []string{"up", "abs", "evil", "via", "plain", "missing"} {
		if _, err := os.Stat(filepath.Join(sb, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("entry %s: stat says %v, want it absent", name, err)
		}
	}
	// A link inside a checkpoint is shown as the link it is, never as
	// what it points to on the host.
	for _, name := range []string{"filelink", "dirlink"} {
		p := filepath.Join(sb, "good", name)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s: %v, mode %v: want a symbolic link", name, err, fi.Mode())
		}
		if target, err := os.Readlink(p); err != nil || !strings.HasPrefix(target, outside) {
			t.Fatalf("readlink %s: %q %v", name, target, err)
		}
	}
	// The server itself never resolves a link: a lookup below one (as
	// the kernel would send if it did not follow links itself) fails.
	n := &passNode{fsys: &fileSystem{tables: f.tables, pool: openDir(t, f.pool)}, e: &entry{path: good}, rel: "dirlink/sub/secret"}
	var st unix.Stat_t
	if err := n.lstat(&st); !errors.Is(err, unix.ELOOP) {
		t.Fatalf("stat of %s/dirlink/sub/secret below the pool: got %v, want ELOOP", good, err)
	}
	if _, err := n.fsys.open(good+"/filelink", unix.O_RDONLY); !errors.Is(err, unix.ELOOP) {
		t.Fatalf("opening %s/filelink below the pool: got %v, want ELOOP", good, err)
	}
	if _, err := n.fsys.open("up/outside", unix.O_PATH); !errors.Is(err, unix.ELOOP) {
		t.Fatalf("opening up/outside below the pool: got %v, want ELOOP", err)
	}
	if got, err := os.ReadFile(filepath.Join(sb, "good", "ok")); err != nil || !bytes.Equal(got, []byte("ok")) {
		t.Fatalf("the good entry reads %q %v", got, err)
	}

	// A table too large to be one serves nothing.
	huge := `[{"name":"good","path":"` + good + `"}` + strings.Repeat(" ", maxTable) + `]`
	if err := os.WriteFile(filepath.Join(f.tables, "sb.json"), []byte(huge), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := names(t, sb); len(got) != 0 {
		t.Fatalf("a %d-byte table lists %v", len(huge), got)
	}
}

func openDir(t testing.TB, dir string) *os.File {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
