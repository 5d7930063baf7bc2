package browse

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// config returns an Ensure config for f with this test binary as cairnd,
// and stops the server it starts when the test ends.
func (f *fixture) config(t testing.TB) Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Binary: exe, Mountpoint: f.mnt, Tables: f.tables, Pool: f.pool, Log: filepath.Join(f.dir, "browse.log")}
	t.Cleanup(func() {
		if err := Stop(f.mnt); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(c.Log); err == nil {
				t.Logf("server log:\n%s", b)
			}
		}
	})
	return c
}

// livePid returns the pid of the server answering at mp, failing the test
// unless there is one and it runs.
func livePid(t testing.TB, mp string) int {
	t.Helper()
	pid := serverPid(mp)
	if pid <= 0 || !isServer(pid, mp) {
		t.Fatalf("no live server at %s (pid %d)", mp, pid)
	}
	return pid
}

// waitGone waits until pid no longer runs as a server.
func waitGone(t testing.TB, pid int, mp string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); isServer(pid, mp); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("server %d still runs", pid)
		}
	}
}

// Ensure starts a server, reuses a live one, replaces one killed with
// SIGKILL (its dead mount first detached), and Stop ends it.
func TestEnsureStartsReusesAndReplaces(t *testing.T) {
	f := newFixture(t)
	a := f.checkpoint(t, "ck-a", map[string]string{"f": "a"})
	c := f.config(t)
	ctx := context.Background()

	if err := Ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	first := livePid(t, f.mnt)
	publish(t, f.tables, "sb", Entry{Name: "v1", Path: a})
	if got, err := os.ReadFile(filepath.Join(f.mnt, "sb", "v1", "f")); err != nil || string(got) != "a" {
		t.Fatalf("read through the started server: %q %v", got, err)
	}

	if err := Ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	if again := livePid(t, f.mnt); again != first {
		t.Fatalf("a second Ensure replaced server %d with %d", first, again)
	}
	if n := countMounts(t, f.mnt); n != 1 {
		t.Fatalf("%d mounts at %s, want 1", n, f.mnt)
	}
	other := c
	other.Pool = filepath.Join(f.dir, "other-pool")
	if err := Ensure(ctx, other); err == nil || !strings.Contains(err.Error(), "other-pool") {
		t.Fatalf("Ensure for another pool over a live view: %v", err)
	}
	if again := livePid(t, f.mnt); again != first {
		t.Fatalf("Ensure for another pool replaced server %d with %d", first, again)
	}

	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, first, f.mnt)
	if _, err := os.Stat(f.mnt); !dead(err) {
		t.Fatalf("after the server's death stat says %v, want ENOTCONN or ECONNABORTED", err)
	}
	if err := Ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	second := livePid(t, f.mnt)
	if second == first {
		t.Fatal("no new server")
	}
	if n := countMounts(t, f.mnt); n != 1 {
		t.Fatalf("%d mounts at %s after the replacement, want 1 (the dead one detached)", n, f.mnt)
	}
	if got, err := os.ReadFile(filepath.Join(f.mnt, "sb", "v1", "f")); err != nil || string(got) != "a" {
		t.Fatalf("read through the new server: %q %v", got, err)
	}

	if err := Stop(f.mnt); err != nil {
		t.Fatal(err)
	}
	waitGone(t, second, f.mnt)
	if n := countMounts(t, f.mnt); n != 0 {
		t.Fatalf("%d mounts at %s after Stop", n, f.mnt)
	}
	if err := Stop(f.mnt); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
	// The pool was never touched.
	if got, err := os.ReadFile(filepath.Join(f.pool, a, "f")); err != nil || string(got) != "a" {
		t.Fatalf("the pool's file: %q %v", got, err)
	}
}

// Ensure and Stop leave a mount of any other kind at the mount point alone,
// and Ensure reports a server that cannot start.
func TestEnsureTouchesNoOtherMount(t *testing.T) {
	f := newFixture(t)
	if err := unix.Mount("tmpfs", f.mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(f.mnt, unix.MNT_DETACH) })
	c := f.config(t)
	if err := Ensure(context.Background(), c); err == nil || !strings.Contains(err.Error(), "tmpfs") {
		t.Fatalf("Ensure over a tmpfs: %v", err)
	}
	if err := Stop(f.mnt); err == nil {
		t.Fatal("Stop of a tmpfs succeeded")
	}
	if n := countMounts(t, f.mnt); n != 1 {
		t.Fatalf("the tmpfs is gone (%d mounts)", n)
	}
	unix.Unmount(f.mnt, 0)

	c.Pool = filepath.Join(f.dir, "no-such-pool")
	err := Ensure(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "exited before") || !strings.Contains(err.Error(), "no-such-pool") {
		t.Fatalf("Ensure with a missing pool: %v", err)
	}
}

// The server outlives the process that started it: Ensure runs in a child
// that is then killed with SIGKILL, and the view keeps following the
// tables; a later Ensure (a restarted cairnd) keeps that same server.
func TestServerOutlivesItsStarter(t *testing.T) {
	f := newFixture(t)
	a := f.checkpoint(t, "ck-a", map[string]string{"f": "a"})
	b := f.checkpoint(t, "ck-b", map[string]string{"f": "b"})
	c := f.config(t)
	exe, _ := os.Executable()
	child := exec.Command(exe)
	child.Env = append(os.Environ(), ensureChildEnv+"="+fmt.Sprintf("%q %q %q %q", c.Mountpoint, c.Tables, c.Pool, c.Log))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		child.Process.Kill()
		child.Wait()
		t.Fatalf("the child said %q %v", line, err)
	}
	pid := livePid(t, f.mnt)
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()

	time.Sleep(100 * time.Millisecond)
	if again := livePid(t, f.mnt); again != pid {
		t.Fatalf("server %d replaced by %d", pid, again)
	}
	publish(t, f.tables, "sb", Entry{Name: "v1", Path: a})
	if got, err := os.ReadFile(filepath.Join(f.mnt, "sb", "v1", "f")); err != nil || string(got) != "a" {
		t.Fatalf("read after the starter's death: %q %v", got, err)
	}
	if err := Ensure(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if again := livePid(t, f.mnt); again != pid {
		t.Fatalf("Ensure after the starter's death replaced server %d with %d", pid, again)
	}
	publish(t, f.tables, "sb", Entry{Name: "v2", Path: b})
	if got := names(t, filepath.Join(f.mnt, "sb")); !reflect.DeepEqual(got, []string{"v2"}) {
		t.Fatalf("lists %v, want [v2]", got)
	}
}

// countMounts counts the mounts at exactly mp.
func countMounts(t testing.TB, mp string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := parseMountinfo(line); ok && m.mountPoint == mp {
			n++
		}
	}
	return n
}
