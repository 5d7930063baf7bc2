package browse

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// btrfsFixture is a fixture whose pool is a real btrfs pool on a loop
// file, as cairnd's, with a sandbox root subvolume at sandboxes/sb.
func btrfsFixture(t testing.TB) (*fixture, *volume.Pool) {
	t.Helper()
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	f := newFixture(t)
	pool, err := volume.OpenLoop(context.Background(), f.dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	// Registered before any server: cleanups run in reverse, so every
	// server (which holds the pool open) is stopped before this.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", pool.Root()).CombinedOutput(); err != nil {
			t.Errorf("umount pool: %v: %s", err, out)
		}
	})
	f.pool = pool.Root()
	if err := pool.Create(context.Background(), pool.SandboxPath("sb")); err != nil {
		t.Fatal(err)
	}
	return f, pool
}

// snapshot writes files into the sandbox's root and takes a read-only
// snapshot of it as checkpoint id, as cairn does; it returns the entry path.
func snapshot(t testing.TB, pool *volume.Pool, id string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(pool.SandboxPath("sb"), name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := pool.Snapshot(context.Background(), pool.SandboxPath("sb"), pool.CheckpointPath(id), true); err != nil {
		t.Fatal(err)
	}
	return pool.Rel(pool.CheckpointPath(id))
}

// Checkpoints are read-only btrfs snapshots, each its own subvolume (its
// own st_dev): the view crosses into them, shows each as it was, and holds
// none open, so a checkpoint taken out of the table can be deleted at once.
func TestBtrfsCheckpoints(t *testing.T) {
	f, pool := btrfsFixture(t)
	ctx := context.Background()
	ck1 := snapshot(t, pool, "ck1", map[string]string{"etc/hostname": "one\n", "home/a": "a"})
	ck2 := snapshot(t, pool, "ck2", map[string]string{"etc/hostname": "two\n"})
	if ck1 != "checkpoints/ck1" {
		t.Fatalf("Rel gives %q", ck1)
	}
	if err := Ensure(ctx, f.config(t)); err != nil {
		t.Fatal(err)
	}
	publish(t, f.tables, "sb", Entry{Name: "v1", Path: ck1}, Entry{Name: "v2", Path: ck2})
	view := filepath.Join(f.mnt, "sb")
	for p, want := range map[string]string{"v1/etc/hostname": "one\n", "v2/etc/hostname": "two\n", "v2/home/a": "a"} {
		if got, err := os.ReadFile(filepath.Join(view, p)); err != nil || string(got) != want {
			t.Fatalf("read %s: %q %v, want %q", p, got, err, want)
		}
	}

	// Delete ck1 while a file of it is open through the view: btrfs
	// allows it, the open file reads on; then the name is gone.
	held, err := os.Open(filepath.Join(view, "v1", "home", "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	publish(t, f.tables, "sb", Entry{Name: "v2", Path: ck2})
	if err := pool.Delete(ctx, pool.CheckpointPath("ck1")); err != nil {
		t.Fatalf("deleting a checkpoint just taken out of the view: %v", err)
	}
	if _, err := os.Stat(pool.CheckpointPath("ck1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ck1 still there: %v", err)
	}
	buf := make([]byte, 4)
	if n, err := held.ReadAt(buf, 0); string(buf[:n]) != "a" {
		t.Fatalf("held file reads %q %v", buf[:n], err)
	}
	if _, err := os.Stat(filepath.Join(view, "v1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("v1 after its deletion: %v", err)
	}
	// A table still naming a deleted checkpoint serves nothing for it.
	publish(t, f.tables, "sb", Entry{Name: "v1", Path: ck1}, Entry{Name: "v2", Path: ck2})
	if got := names(t, view); len(got) != 1 || got[0] != "v2" {
		t.Fatalf("lists %v, want [v2]", got)
	}
	if err := pool.Delete(ctx, pool.CheckpointPath("ck2")); err != nil {
		t.Fatalf("deleting a checkpoint still in the view: %v", err)
	}
	if got := names(t, view); len(got) != 0 {
		t.Fatalf("lists %v after ck2's deletion", got)
	}
}

// Regular files are read by the kernel straight from the pool (FUSE
// passthrough, 6x faster through gVisor than reads served by the
// process): a file opened through the view reads on while its server is
// stopped with SIGSTOP.
func TestReadsBypassTheServer(t *testing.T) {
	f, pool := btrfsFixture(t)
	ck := snapshot(t, pool, "ck", map[string]string{"big": string(make([]byte, 4<<20))})
	if err := Ensure(context.Background(), f.config(t)); err != nil {
		t.Fatal(err)
	}
	publish(t, f.tables, "sb", Entry{Name: "v1", Path: ck})
	file, err := os.Open(filepath.Join(f.mnt, "sb", "v1", "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	pid := livePid(t, f.mnt)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<20)
		var err error
		for off := int64(0); off < 4<<20 && err == nil; off += int64(len(buf)) {
			_, err = file.ReadAt(buf, off)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		syscall.Kill(pid, syscall.SIGCONT)
		<-done
		t.Fatal("reading an open file waits for the server: no FUSE passthrough")
	}
}
