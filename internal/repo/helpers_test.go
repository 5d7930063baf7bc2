package repo

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/local"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// fixture is a repository over two local locations, each behind a Faulty.
type fixture struct {
	key    *crypto.Key
	dirs   [2]string
	faulty [2]*backendtest.Faulty
	locs   []Location
	repo   *Repository
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	key, err := crypto.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureKey(t, key)
}

// newFixtureKey is newFixture with a given master key.
func newFixtureKey(t *testing.T, key *crypto.Key) *fixture {
	t.Helper()
	f := &fixture{key: key}
	var err error
	for i, name := range []string{"primary", "secondary"} {
		f.dirs[i] = filepath.Join(t.TempDir(), name)
		b, err := local.New(f.dirs[i])
		if err != nil {
			t.Fatal(err)
		}
		f.faulty[i] = backendtest.NewFaulty(b)
		f.locs = append(f.locs, Location{Name: name, Backend: f.faulty[i]})
	}
	if f.repo, err = Init(context.Background(), f.key, f.locs...); err != nil {
		t.Fatal(err)
	}
	return f
}

// reopen stands for a restart of the daemon.
func (f *fixture) reopen(t *testing.T) {
	t.Helper()
	var err error
	if f.repo, err = Open(context.Background(), f.key, f.locs...); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) backup(t *testing.T, src string, parent *ManifestRef) (ManifestRef, Stats) {
	t.Helper()
	ref, st, err := f.repo.Backup(context.Background(), src, BackupOptions{Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if st.Failed != nil {
		t.Fatalf("backup failed in %v", st.Failed)
	}
	return ref, st
}

// restoreEqual restores ref and compares it with want.
func (f *fixture) restoreEqual(t *testing.T, ref ManifestRef, want string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "restored")
	if err := f.repo.Restore(context.Background(), ref, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	compareTrees(t, want, dst)
}

func (f *fixture) verifyClean(t *testing.T) {
	t.Helper()
	for _, l := range f.locs {
		rep, err := f.repo.Verify(context.Background(), l.Name)
		if err != nil {
			t.Fatalf("verify %s: %v", l.Name, err)
		}
		if !rep.OK() {
			t.Fatalf("verify %s: %+v", l.Name, rep)
		}
	}
}

// storedBytes sums the sizes of every object in a location.
func storedBytes(t *testing.T, b backend.Backend) int64 {
	t.Helper()
	infos, err := b.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, i := range infos {
		n += i.Size
	}
	return n
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b9))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func write(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// secret is a distinctive string that must never reach a location in clear.
const secret = "TOP-SECRET-CONTENT-7f3a9c"

// makeTree builds a tree with every kind of file the manifest knows.
func makeTree(t *testing.T, dir string) {
	t.Helper()
	testenv.Require(t) // owners and device nodes need root
	write(t, filepath.Join(dir, "docs", "confidential-plans.txt"), bytes.Repeat([]byte(secret+"\n"), 1000))
	write(t, filepath.Join(dir, "bin", "random.bin"), randomBytes(3<<20, 1))
	write(t, filepath.Join(dir, "empty"), nil)
	if err := os.MkdirAll(filepath.Join(dir, "empty-dir"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	must(t, os.Chmod(filepath.Join(dir, "tmp"), 0o1777))
	must(t, os.Symlink("docs/confidential-plans.txt", filepath.Join(dir, "link-to-plans")))
	must(t, os.Symlink("/nonexistent/target", filepath.Join(dir, "dangling")))
	must(t, os.Link(filepath.Join(dir, "bin", "random.bin"), filepath.Join(dir, "hardlink.bin")))
	// Sparse: 64 MiB with 8 KiB of data in the middle and at the end.
	sp, err := os.Create(filepath.Join(dir, "sparse.img"))
	must(t, err)
	_, err = sp.WriteAt(randomBytes(8192, 2), 20<<20)
	must(t, err)
	_, err = sp.WriteAt([]byte("tail"), 64<<20-4)
	must(t, err)
	must(t, sp.Close())
	must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o640))
	must(t, unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(t, unix.Mknod(filepath.Join(dir, "sock"), unix.S_IFSOCK|0o600, 0))
	suid := filepath.Join(dir, "bin", "suid")
	write(t, suid, []byte("#!/bin/sh\n"))
	must(t, os.Lchown(suid, 1234, 5678))
	must(t, os.Chmod(suid, 0o4755))
	must(t, os.Lchown(filepath.Join(dir, "dangling"), 42, 43))
	must(t, unix.Lsetxattr(filepath.Join(dir, "docs", "confidential-plans.txt"), "user.note", []byte("xattr value"), 0))
	must(t, unix.Lsetxattr(filepath.Join(dir, "empty-dir"), "user.empty", nil, 0))
	old := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	must(t, os.Chtimes(filepath.Join(dir, "empty"), old, old))
	must(t, os.Chtimes(filepath.Join(dir, "docs"), old, old))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// compareTrees checks that b equals a: the same names, types, contents,
// modes, owners, mtimes, xattrs, symlink targets, device numbers, hard-link
// groups and holes.
func compareTrees(t *testing.T, a, b string) {
	t.Helper()
	list := func(root string) []string {
		var out []string
		must(t, filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
			return err
		}))
		return out
	}
	pa, pb := list(a), list(b)
	if !slices.Equal(pa, pb) {
		t.Fatalf("trees differ in names:\n%v\n%v", pa, pb)
	}
	linksA, linksB := map[uint64]string{}, map[uint64]string{}
	for _, rel := range pa {
		x, y := filepath.Join(a, rel), filepath.Join(b, rel)
		var sa, sb syscall.Stat_t
		must(t, syscall.Lstat(x, &sa))
		must(t, syscall.Lstat(y, &sb))
		desc := func(s syscall.Stat_t) string {
			return fmt.Sprintf("mode %o uid %d gid %d rdev %d mtime %d", s.Mode, s.Uid, s.Gid, s.Rdev, s.Mtim.Nano())
		}
		if s := desc(sa); rel != "." && s != desc(sb) || rel == "." && sa.Mode != sb.Mode {
			t.Errorf("%s: %s, restored %s", rel, s, desc(sb))
		}
		xa, _ := readXattrs(x)
		xb, _ := readXattrs(y)
		if fmt.Sprint(xa) != fmt.Sprint(xb) {
			t.Errorf("%s: xattrs %v, restored %v", rel, xa, xb)
		}
		switch sa.Mode & syscall.S_IFMT {
		case syscall.S_IFLNK:
			ta, _ := os.Readlink(x)
			tb, _ := os.Readlink(y)
			if ta != tb {
				t.Errorf("%s: symlink %q, restored %q", rel, ta, tb)
			}
		case syscall.S_IFREG:
			da, _ := os.ReadFile(x)
			db, _ := os.ReadFile(y)
			if !bytes.Equal(da, db) {
				t.Errorf("%s: contents differ", rel)
			}
			if sa.Blocks < sa.Size/512/2 && sb.Blocks > sa.Blocks*2+64 {
				t.Errorf("%s: sparse file restored with %d blocks (source %d)", rel, sb.Blocks, sa.Blocks)
			}
			if sa.Nlink > 1 {
				if prev, ok := linksA[sa.Ino]; ok && linksB[sb.Ino] != prev {
					t.Errorf("%s: hard link to %s lost", rel, prev)
				}
				linksA[sa.Ino], linksB[sb.Ino] = rel, rel
				if sb.Nlink != sa.Nlink {
					t.Errorf("%s: %d links, restored %d", rel, sa.Nlink, sb.Nlink)
				}
			}
		}
	}
}
