package repo

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/hosttree/hosttreetest"
	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Any tree a sandbox can make goes off-site and comes back exactly: 1,100
// nested directories (a path over 4,096 bytes) with a file at the bottom,
// 255-byte names, names with a newline, an escape and invalid UTF-8, and
// symbolic links to /etc/passwd and ../../.., stored as links and never
// followed. An incremental upload of a change at the bottom reads it too.
func TestAnyTreeASandboxCanMakeRoundTrips(t *testing.T) {
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	ctx := context.Background()
	dir := t.TempDir()
	pool, err := volume.OpenLoop(ctx, dir, 1<<30)
	must(t, err)
	t.Cleanup(func() { exec.Command("umount", filepath.Join(dir, "pool")).Run() })
	live := pool.TempPath("live")
	must(t, pool.Create(ctx, live))
	hosttreetest.OddTree(t, live)
	lroot, err := hosttree.OpenRoot(live)
	must(t, err)
	defer lroot.Close()
	deepData := string(randomBytes(3<<20, 7))
	hosttreetest.WriteAt(t, lroot, hosttreetest.DeepFile, deepData)
	snap1 := pool.TempPath("snap1")
	must(t, pool.Snapshot(ctx, live, snap1, true))

	f := newFixture(t)
	ref1, _ := f.backup(t, snap1, nil)
	m := loadManifest(t, f, ref1)
	targets := map[string]string{}
	for _, n := range m.Nodes {
		if n.Type == manifest.Symlink {
			targets[n.Path] = n.Target
		}
	}
	for link, want := range map[string]string{"passwd": "/etc/passwd", "escape": "../../..", hosttreetest.DeepDir + "/up": "../../.."} {
		if targets[link] != want {
			t.Errorf("%s stored as link to %q, want %q", hosttree.Shorten(link, 40), targets[link], want)
		}
	}
	for _, n := range m.Nodes {
		if strings.HasPrefix(n.Path, "escape/") || strings.HasPrefix(n.Path, "passwd/") {
			t.Fatalf("the backup followed a link: %q", n.Path)
		}
	}
	restored := filepath.Join(t.TempDir(), "restored")
	must(t, f.repo.Restore(ctx, ref1, restored, RestoreOptions{}))
	hosttreetest.Equal(t, snap1, restored)
	f.verifyClean(t)

	// A change at the bottom, a new odd name there, one removed.
	hosttreetest.WriteAt(t, lroot, hosttreetest.DeepFile, deepData[:1<<20]+"changed"+deepData[1<<20:])
	hosttreetest.WriteAt(t, lroot, hosttreetest.DeepDir+"/new\n\xff", "new")
	fd, err := lroot.Fd()
	must(t, err)
	must(t, unix.Unlinkat(fd, hosttreetest.OddNames[2], 0))
	snap2 := pool.TempPath("snap2")
	must(t, pool.Snapshot(ctx, live, snap2, true))
	ref2, st, err := f.repo.Backup(ctx, snap2, BackupOptions{Parent: &ref1, ParentDir: snap1})
	must(t, err)
	if st.FilesRead != 2 {
		t.Errorf("the incremental upload read %d files, want the 2 changed", st.FilesRead)
	}
	restored2 := filepath.Join(t.TempDir(), "restored2")
	must(t, f.repo.Restore(ctx, ref2, restored2, RestoreOptions{}))
	hosttreetest.Equal(t, snap2, restored2)
	r2, err := hosttree.OpenRoot(restored2)
	must(t, err)
	defer r2.Close()
	if got := hosttreetest.Read(t, r2, hosttreetest.DeepFile); !strings.Contains(got[1<<20-10:1<<20+20], "changed") {
		t.Errorf("the restored deep file lacks the change")
	}
	f.verifyClean(t)
}
