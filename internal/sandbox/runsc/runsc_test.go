package runsc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests run real sandboxes: they need root, runsc and a static
// busybox. Without them they skip, unless CI=true, where that is a failure.

func requireRunsc(t testing.TB) string {
	t.Helper()
	missing := ""
	bin, err := Find("")
	switch {
	case os.Geteuid() != 0:
		missing = "needs root"
	case err != nil:
		missing = err.Error()
	default:
		if _, err := exec.LookPath("busybox"); err != nil {
			missing = "busybox not installed"
		}
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(missing)
		}
		t.Skip(missing)
	}
	return bin
}

// counterSandbox runs a sandbox whose init writes an ever-growing counter to
// /out/count, a host directory; it returns the driver, the container id and
// the host path of the counter. The container is deleted when the test ends.
func counterSandbox(t testing.TB, stateRoot string) (*Runsc, string, string) {
	t.Helper()
	bin := requireRunsc(t)
	dir := t.TempDir()
	if stateRoot == "" {
		stateRoot = filepath.Join(dir, "state")
	}
	r := New(bin, newStateRoot(t, stateRoot))
	id := "pz-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	spec := busyboxSpec(t, dir, id, "i=0; while :; do i=$((i+1)); echo $i > /out/count; usleep 5000; done")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := r.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Delete(context.Background(), id); err != nil {
			t.Errorf("delete: %v", err)
		}
	})
	counter := filepath.Join(spec.Mounts[0].Source, "count")
	waitAdvances(t, counter)
	return r, id, counter
}

// newStateRoot makes the runsc state directory dir and cleans up after
// runsc in it when the test ends.
func newStateRoot(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// With --network=none runsc pins an empty network namespace with a
	// bind mount in the state root; unmount it before the directory goes.
	t.Cleanup(func() {
		if err := unix.Unmount(filepath.Join(dir, "null-netns"), unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("unmount null-netns: %v", err)
		}
	})
	return dir
}

// busyboxSpec returns the spec of container id, a busybox root made in dir
// whose init runs script with sh, with dir/out-<id> (made here) on /out.
func busyboxSpec(t testing.TB, dir, id, script string) Spec {
	t.Helper()
	root, out := filepath.Join(dir, "root"), filepath.Join(dir, "out-"+id)
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		for _, d := range []string{"bin", "proc", "dev", "sys", "tmp"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		busybox, _ := exec.LookPath("busybox")
		data, err := os.ReadFile(busybox)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, applet := range []string{"sh", "usleep", "dd", "md5sum", "cat"} {
			if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return Spec{
		ID: id, Hostname: id, Root: root,
		Args:      []string{"/bin/sh", "-c", script},
		Env:       []string{"PATH=/bin"},
		Mounts:    []Mount{{Source: out, Destination: "/out"}},
		BundleDir: filepath.Join(dir, "bundle-"+id),
		LogPath:   filepath.Join(dir, "console-"+id+".log"),
	}
}

// readCounter returns the counter; the shell truncates before it writes,
// so an empty read is retried.
func readCounter(t testing.TB, path string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile(path)
		if err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return n
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no counter in %s: %q %v", path, b, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitAdvances fails unless the counter moves within 10 s.
func waitAdvances(t testing.TB, path string) {
	t.Helper()
	first := -1
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		n := readCounter(t, path)
		if first < 0 {
			first = n
		} else if n > first {
			return
		}
	}
	t.Fatalf("counter %s does not advance (stays at %d)", path, first)
}

// requireFrozen fails if the counter file changes within 300 ms. It
// compares the file's bytes: a sandbox paused or killed between the
// counter's truncate and its write leaves the file empty.
func requireFrozen(t testing.TB, path string) {
	t.Helper()
	before, _ := os.ReadFile(path)
	time.Sleep(300 * time.Millisecond)
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Fatalf("counter moved from %q to %q while paused", before, after)
	}
}

func requireStatus(t testing.TB, r *Runsc, id string, want Status) {
	t.Helper()
	st, _, err := r.State(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st != want {
		t.Fatalf("runsc state says %q, want %q", st, want)
	}
}

// TestPauseResumeControl pauses and resumes through the control socket
// (the fast path itself, not the fallback), checks what the sandbox does
// and what runsc then reports, and mixes both ways.
func TestPauseResumeControl(t *testing.T) {
	r, id, counter := counterSandbox(t, "")
	ctx := context.Background()

	if err := r.control(ctx, id, pauseTransition); err != nil {
		t.Fatalf("pause through the control socket: %v", err)
	}
	requireStatus(t, r, id, "paused")
	requireFrozen(t, counter)
	if err := r.control(ctx, id, pauseTransition); !errors.Is(err, ErrWrongState) {
		t.Fatalf("second pause: got %v, want ErrWrongState", err)
	}

	if err := r.control(ctx, id, resumeTransition); err != nil {
		t.Fatalf("resume through the control socket: %v", err)
	}
	requireStatus(t, r, id, "running")
	waitAdvances(t, counter)
	// A second resume must not reach the sentry: an unpause without a
	// pause panics it and kills the sandbox.
	if err := r.control(ctx, id, resumeTransition); !errors.Is(err, ErrWrongState) {
		t.Fatalf("second resume: got %v, want ErrWrongState", err)
	}
	waitAdvances(t, counter)
	requireStatus(t, r, id, "running")

	// runsc resumes what the fast path paused, and the other way round.
	if err := r.control(ctx, id, pauseTransition); err != nil {
		t.Fatal(err)
	}
	if _, err := r.run(ctx, "resume", id); err != nil {
		t.Fatalf("runsc resume after a fast pause: %v", err)
	}
	waitAdvances(t, counter)
	if _, err := r.run(ctx, "pause", id); err != nil {
		t.Fatal(err)
	}
	requireFrozen(t, counter)
	if err := r.control(ctx, id, resumeTransition); err != nil {
		t.Fatalf("fast resume after runsc pause: %v", err)
	}
	waitAdvances(t, counter)
	if _, err := r.run(ctx, "resume", id); !errors.Is(err, ErrWrongState) {
		t.Fatalf("runsc resume of a running container: got %v, want ErrWrongState", err)
	}

	// The public methods, and a checkpoint of a sandbox paused this way.
	if err := r.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := r.Checkpoint(ctx, id, t.TempDir(), true); err != nil {
		t.Fatalf("runsc checkpoint --leave-running of a paused sandbox: %v", err)
	}
	requireStatus(t, r, id, "paused")
	requireFrozen(t, counter)
	if err := r.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitAdvances(t, counter)

	// No stray temporary state files.
	tmps, _ := filepath.Glob(filepath.Join(r.stateRoot, "*.tmp"))
	if len(tmps) > 0 {
		t.Errorf("temporary files left in the state root: %v", tmps)
	}
}

// TestControlFallbackAndErrors covers when the fast path gives way and
// when it must not.
func TestControlFallbackAndErrors(t *testing.T) {
	r, id, counter := counterSandbox(t, "")
	ctx := context.Background()

	// A method the sandbox does not know changes nothing: fall back.
	unknown := pauseTransition
	unknown.method = "containerManager.NoSuchMethod"
	var fb *fallbackError
	if err := r.control(ctx, id, unknown); !errors.As(err, &fb) {
		t.Fatalf("unknown method: got %v, want a fallback error", err)
	}
	requireStatus(t, r, id, "running")
	waitAdvances(t, counter)

	// While runsc holds the container's lock, Pause waits, until its
	// context ends; then nothing has changed.
	base := filepath.Join(r.stateRoot, id+"_sandbox:"+id)
	lock, err := lockFile(ctx, base+".lock")
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = r.Pause(tctx, id)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pause while locked: got %v, want context.DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Pause(ctx, id) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("pause returned while the lock was held: %v", err)
	default:
	}
	lock.Close()
	if err := <-done; err != nil {
		t.Fatalf("pause after the lock was released: %v", err)
	}
	requireFrozen(t, counter)
	if err := r.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitAdvances(t, counter)

	if err := r.Pause(ctx, "no-such-container"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("pause of a missing container: got %v, want ErrNotExist", err)
	}
	if err := r.Resume(ctx, "no-such-container"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("resume of a missing container: got %v, want ErrNotExist", err)
	}
}

// TestPauseResumeLongSocketPath: a state root deep enough that the control
// socket's path does not fit in a sockaddr_un (runsc binds it through
// /proc/self/fd, and so must the client).
func TestPauseResumeLongSocketPath(t *testing.T) {
	requireRunsc(t)
	root := t.TempDir()
	for len(root) < 110 {
		root = filepath.Join(root, "long-state-directory")
	}
	r, id, counter := counterSandbox(t, root)
	sock := filepath.Join(r.stateRoot, "runsc-"+id+".sock")
	if _, err := os.Stat(sock); err != nil || len(sock) < 108 {
		t.Fatalf("control socket %s (%d bytes): %v", sock, len(sock), err)
	}
	ctx := context.Background()
	if err := r.control(ctx, id, pauseTransition); err != nil {
		t.Fatalf("pause through a long socket path: %v", err)
	}
	requireFrozen(t, counter)
	if err := r.control(ctx, id, resumeTransition); err != nil {
		t.Fatalf("resume through a long socket path: %v", err)
	}
	waitAdvances(t, counter)
}

// BenchmarkPauseResume times one pause plus one resume of a running
// sandbox through the control socket and, for reference, with runsc.
func BenchmarkPauseResume(b *testing.B) {
	r, id, _ := counterSandbox(b, "")
	ctx := context.Background()
	b.Run("control", func(b *testing.B) {
		for b.Loop() {
			if err := r.control(ctx, id, pauseTransition); err != nil {
				b.Fatal(err)
			}
			if err := r.control(ctx, id, resumeTransition); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runsc", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.run(ctx, "pause", id); err != nil {
				b.Fatal(err)
			}
			if _, err := r.run(ctx, "resume", id); err != nil {
				b.Fatal(err)
			}
		}
	})
}
