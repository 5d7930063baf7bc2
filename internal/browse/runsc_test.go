package browse

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/sandbox/runsc"
)

// container is a busybox sandbox run by cairn's runsc driver with the
// view's directory of sandbox "sb" bound read-only at /.cairn/checkpoints,
// as cairnd binds it.
type container struct {
	t     testing.TB
	r     *runsc.Runsc
	bin   string
	state string
	spec  runsc.Spec
}

func requireRunsc(t testing.TB) string {
	t.Helper()
	bin, err := runsc.Find("")
	if err == nil {
		_, err = exec.LookPath("busybox")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return bin
}

// startContainer starts container id with a busybox root made in dir.
func startContainer(t testing.TB, dir, id, viewDir string) *container {
	t.Helper()
	bin := requireRunsc(t)
	root := filepath.Join(dir, "root")
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		for _, d := range []string{"bin", "proc", "dev", "sys", "tmp", ".cairn/checkpoints"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		busybox, _ := exec.LookPath("busybox")
		data, err := os.ReadFile(busybox)
		if err != nil {
			t.Fatal(err)
		}
		bb := filepath.Join(root, "bin", "busybox")
		if err := os.WriteFile(bb, data, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bb, "--install", filepath.Join(root, "bin")).CombinedOutput(); err != nil {
			t.Fatalf("busybox --install: %v: %s", err, out)
		}
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// runsc pins an empty network namespace with a bind mount there.
	t.Cleanup(func() { unix.Unmount(filepath.Join(state, "null-netns"), unix.MNT_DETACH) })
	c := &container{t: t, r: runsc.New(bin, state), bin: bin, state: state, spec: runsc.Spec{
		ID: id, Hostname: id, Root: root,
		Args:      []string{"/bin/sh", "-c", "while :; do sleep 1; done"},
		Env:       []string{"PATH=/bin"},
		Mounts:    []runsc.Mount{{Source: viewDir, Destination: "/.cairn/checkpoints", ReadOnly: true}},
		BundleDir: filepath.Join(dir, "bundle-"+id),
		LogPath:   filepath.Join(dir, "console-"+id+".log"),
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.r.Start(ctx, c.spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.r.Delete(context.Background(), id); err != nil {
			t.Errorf("delete container %s: %v", id, err)
		}
	})
	return c
}

// sh runs script in the container and returns its output and error.
func (c *container) sh(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.bin, "--root="+c.state, "--overlay2=none", "--host-uds=open", "--network=none",
		"exec", c.spec.ID, "/bin/sh", "-c", script).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// must runs script and fails the test unless it succeeds with output want.
func (c *container) must(script, want string) {
	c.t.Helper()
	out, err := c.sh(script)
	if err != nil || out != want {
		c.t.Fatalf("in the sandbox, %q: %v: got %q, want %q", script, err, out, want)
	}
}

// A runsc sandbox bound to its directory of the view sees entries
// published after it started and loses those unpublished, cannot write,
// keeps the view across a memory checkpoint and restore, and (the
// documented limit) keeps a dead view after its server is killed, while a
// sandbox started after Ensure replaced the server sees the new one.
func TestRunscSandboxSeesTheView(t *testing.T) {
	f, pool := btrfsFixture(t)
	ck1 := snapshot(t, pool, "ck1", map[string]string{"hello": "one"})
	ck2 := snapshot(t, pool, "ck2", map[string]string{"hello": "two", "sub/deep": "deep"})
	cfg := f.config(t)
	if err := Ensure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	// The sandbox's directory exists once its table does: before start,
	// with no checkpoint yet.
	publish(t, f.tables, "sb")
	c := startContainer(t, f.dir, "browse-a", SandboxDir(f.mnt, "sb"))

	c.must("ls /.cairn/checkpoints", "")
	publish(t, f.tables, "sb", Entry{Name: "v1", Path: ck1})
	c.must("ls /.cairn/checkpoints", "v1")
	c.must("cat /.cairn/checkpoints/v1/hello", "one")
	publish(t, f.tables, "sb", Entry{Name: "v2", Path: ck2}, Entry{Name: "v1", Path: ck1})
	c.must("ls /.cairn/checkpoints | tr '\\n' ' '", "v1 v2")
	c.must("cat /.cairn/checkpoints/v2/hello /.cairn/checkpoints/v2/sub/deep", "twodeep")
	publish(t, f.tables, "sb", Entry{Name: "v2", Path: ck2})
	c.must("ls /.cairn/checkpoints", "v2")
	if out, err := c.sh("cat /.cairn/checkpoints/v1/hello"); err == nil {
		t.Fatalf("an unpublished entry still reads: %q", out)
	}
	if out, err := c.sh("touch /.cairn/checkpoints/v2/new || mkdir /.cairn/checkpoints/v9"); err == nil || !strings.Contains(out, "Read-only") {
		t.Fatalf("writing into the view: %v: %q", err, out)
	}

	// A memory checkpoint and a restore: the restored sandbox binds the
	// view again and follows the table.
	ctx := context.Background()
	image := filepath.Join(f.dir, "image")
	if err := c.r.Checkpoint(ctx, c.spec.ID, image, false); err != nil {
		t.Fatal(err)
	}
	if err := c.r.WaitStopped(ctx, c.spec.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.r.Delete(ctx, c.spec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.r.Restore(ctx, c.spec, image); err != nil {
		t.Fatalf("restore with the view bound: %v", err)
	}
	c.must("cat /.cairn/checkpoints/v2/hello", "two")
	publish(t, f.tables, "sb", Entry{Name: "v1", Path: ck1}, Entry{Name: "v2", Path: ck2})
	c.must("ls /.cairn/checkpoints | tr '\\n' ' '", "v1 v2")

	// The server dies: the running sandbox's view is dead for good (its
	// bind holds the old connection); one started after Ensure works.
	pid := livePid(t, f.mnt)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, f.mnt)
	if out, err := c.sh("ls /.cairn/checkpoints"); err == nil {
		t.Fatalf("the view of a dead server still lists %q", out)
	} else {
		t.Logf("after the server's death the running sandbox sees: %v: %q", err, out)
	}
	if err := Ensure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	d := startContainer(t, f.dir, "browse-b", SandboxDir(f.mnt, "sb"))
	d.must("cat /.cairn/checkpoints/v1/hello", "one")
	if out, err := c.sh("ls /.cairn/checkpoints"); err == nil {
		t.Logf("the sandbox started before the new server now lists %q (the limit is gone?)", out)
	}
}
