package runsc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// TestRestoreOutlivesItsImage deletes a memory image (a btrfs subvolume, as
// cairn keeps them) as soon as the restore from it returns: the restored
// process must carry on from where it was, with its memory intact. Twice:
// with Restore as cairn calls it, after which the sandbox no longer holds
// the image, and with `runsc restore --background`, where the sandbox is
// still reading the image when it is deleted (see "Memory images" in the
// package comment).
//
// The memory checked is 512 MiB of random data in /tmp, gVisor's tmpfs,
// whose pages live in the sentry's memory file like any process memory
// and so travel in pages.img; the shell that wrote it keeps counting.
func TestRestoreOutlivesItsImage(t *testing.T) {
	bin := requireRunsc(t)
	testenv.Require(t, "mkfs.btrfs", "btrfs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pool, err := volume.OpenLoop(ctx, dir, 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("umount", pool.Root()).Run() })
	r := New(bin, newStateRoot(t, filepath.Join(dir, "state")))

	const id = "mem"
	spec := busyboxSpec(t, dir, id, `dd if=/dev/urandom of=/tmp/fill bs=1M count=512 2>/dev/null && md5sum /tmp/fill > /tmp/sum &&
		i=0; while :; do i=$((i+1)); echo $i > /out/count; usleep 5000; done`)
	counter := startCounter(ctx, t, r, spec, 20)

	// A checkpoint that stops the sandbox, as a saved session does, and a
	// second image of it for the second restore: a snapshot, whose files
	// are not in the page cache, so that loading it takes a while.
	image := pool.MemoryPath("a")
	if err := pool.Create(ctx, image); err != nil {
		t.Fatal(err)
	}
	if err := r.Checkpoint(ctx, id, image, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"checkpoint.img", "pages_meta.img", "pages.img"} {
		if _, err := os.Stat(filepath.Join(image, f)); err != nil {
			t.Fatalf("memory image: %v", err)
		}
	}
	if err := r.WaitStopped(ctx, id); err != nil {
		t.Fatal(err)
	}
	saved := readCount(counter)
	if err := r.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	cold := pool.MemoryPath("b")
	if err := pool.Snapshot(ctx, image, cold, false); err != nil {
		t.Fatal(err)
	}
	dropCache(t, pool.Root(), filepath.Join(dir, "pool.img"))

	// resumed checks the restored sandbox: it counts on from where it
	// was, and its memory holds what it wrote before the checkpoint.
	resumed := func(t *testing.T) {
		t.Helper()
		waitAdvances(t, counter)
		if n := readCounter(t, counter); n < saved {
			t.Fatalf("counter at %d after the restore, below the %d it had reached: booted afresh?", n, saved)
		}
		if out, err := r.run(ctx, "exec", id, "/bin/sh", "-c", "md5sum -c /tmp/sum"); err != nil {
			t.Fatalf("memory changed by the restore: %v: %s", err, out)
		}
	}

	t.Run("restore", func(t *testing.T) {
		pid, err := r.Restore(ctx, spec, image)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Delete(context.WithoutCancel(ctx), id)
		// The sandbox closes the image's files as its restore ends, which
		// a loaded machine lets runsc report a moment before: allow that
		// moment, not a file held for good (the image's space would stay
		// taken after its delete).
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			f := openImageFiles(pid)
			if len(f) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the sandbox still holds %v 5 s after runsc restore returned", f)
			}
		}
		if err := pool.Delete(ctx, image); err != nil {
			t.Fatal(err)
		}
		resumed(t)
	})

	t.Run("background", func(t *testing.T) {
		pid, err := r.launch(ctx, spec, "restore", "--image-path="+cold, "--background")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Delete(context.WithoutCancel(ctx), id)
		held := openImageFiles(pid)
		if err := pool.Delete(ctx, cold); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		if len(held) == 0 {
			t.Fatalf("the sandbox had loaded the whole image before it was deleted: nothing tested (make the fill larger)")
		}
		if _, err := r.run(ctx, "wait", "--restore", id); err != nil {
			t.Fatalf("loading the deleted image: %v", err)
		}
		t.Logf("the load went on for %s after the image was deleted", time.Since(deleted).Round(time.Millisecond))
		if f := openImageFiles(pid); len(f) > 0 {
			t.Errorf("the sandbox still holds %v after loading it: the deleted subvolume's space never comes back", f)
		}
		resumed(t)
	})
}

// startCounter starts the container of spec, whose init counts into
// /out/count, deletes it when the test ends, and waits until the count has
// reached n. It returns the host path of the counter.
func startCounter(ctx context.Context, t *testing.T, r *Runsc, spec Spec, n int) string {
	t.Helper()
	counter := filepath.Join(spec.Mounts[0].Source, "count")
	if _, err := r.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Delete(context.Background(), spec.ID) })
	for deadline := time.Now().Add(time.Minute); readCount(counter) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox did not count to %d within a minute", n)
		}
	}
	return counter
}

// pauseAtCount pauses container id at a moment its counter file holds a
// number, and returns it: the value the paused process has in memory. (A
// pause between the counter's truncate and its write leaves the file
// empty: resume and pause again.)
func pauseAtCount(ctx context.Context, t *testing.T, r *Runsc, id, counter string) int {
	t.Helper()
	for range 20 {
		if err := r.Pause(ctx, id); err != nil {
			t.Fatal(err)
		}
		if n := readCount(counter); n > 0 {
			return n
		}
		if err := r.Resume(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitAdvances(t, counter)
	}
	t.Fatal("paused 20 times, never with a number in the counter file")
	return 0
}

// readCount returns the counter at path, 0 if there is none (yet).
func readCount(path string) int {
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// openImageFiles lists the memory image files process pid has open.
func openImageFiles(pid int) []string {
	fds, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "fd", "*"))
	var out []string
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasSuffix(target, ".img") {
			out = append(out, target)
		}
	}
	return out
}

// dropCache writes what the pool at root holds back to its loop file and
// evicts the file from the host's page cache: what is read through the
// pool next comes from the disk.
func dropCache(t *testing.T, root, file string) {
	t.Helper()
	d, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointWithoutRunsc: Checkpoint saves a running sandbox through
// its control socket, runsc never being run for it; the sandbox carries on
// as it was (a paused one stays paused), and the image restores into the
// processes of the checkpoint instant.
func TestCheckpointWithoutRunsc(t *testing.T) {
	bin := requireRunsc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	r := New(bin, newStateRoot(t, filepath.Join(dir, "state")))
	const id = "ck"
	spec := busyboxSpec(t, dir, id, "i=0; while :; do i=$((i+1)); echo $i > /out/count; usleep 5000; done")
	counter := startCounter(ctx, t, r, spec, 100)

	// From here on runsc runs through a wrapper that notes each call.
	calls := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "runsc-wrapper")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\nexec " + bin + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r.binary = wrapper

	// Running: it goes on counting.
	if err := r.Checkpoint(ctx, id, filepath.Join(dir, "running"), true); err != nil {
		t.Fatal(err)
	}
	waitAdvances(t, counter)
	requireStatus(t, r, id, "running")

	// Paused, as cairn checkpoints: it stays paused until resumed.
	saved := pauseAtCount(ctx, t, r, id, counter)
	image := filepath.Join(dir, "paused")
	if err := r.Checkpoint(ctx, id, image, true); err != nil {
		t.Fatal(err)
	}
	requireFrozen(t, counter)
	requireStatus(t, r, id, "paused")
	if err := r.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitAdvances(t, counter)
	if log, _ := os.ReadFile(calls); strings.Contains(string(log), "checkpoint") {
		t.Fatalf("runsc was run for a checkpoint:\n%s", log)
	}
	for _, f := range imageFiles {
		if fi, err := os.Stat(filepath.Join(image, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("memory image file %s: %v (empty?)", f, err)
		}
	}

	// The image holds the processes as they were: the counter resumes
	// from the value it had, below where it has got to since.
	time.Sleep(500 * time.Millisecond)
	if err := r.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	requireFrozen(t, counter) // the old sandbox is gone
	// (0 if it was killed between the counter's truncate and its write)
	since := readCount(counter)
	if since != 0 && since < saved+20 {
		t.Fatalf("the counter went from %d only to %d in half a second", saved, since)
	}
	if _, err := r.Restore(ctx, spec, image); err != nil {
		t.Fatal(err)
	}
	// The first value the restored process writes (it counts ~100 a
	// second, so poll closely; a read between its truncate and its write
	// sees nothing).
	n := since
	for deadline := time.Now().Add(10 * time.Second); n == since || n == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the restored sandbox did not count within 10 s")
		}
		n = readCount(counter)
	}
	if n < saved || n > saved+10 {
		t.Fatalf("counter at %d after the restore, want it to go on from %d (it had reached %d since)", n, saved, since)
	}
	waitAdvances(t, counter)
}
