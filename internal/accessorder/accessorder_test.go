package accessorder

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// fsRoot mounts a tmpfs of its own (a device of its own, as a sandbox's
// subvolume is) and fills it with files a..j and a subdirectory.
func fsRoot(t *testing.T) string {
	t.Helper()
	testenv.Require(t, "cat")
	root := t.TempDir()
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	if err := os.MkdirAll(filepath.Join(root, "srv", "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "srv/app/config", "srv/app/data"} {
		if err := os.WriteFile(filepath.Join(root, n), []byte("content of "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// readByChild reads files the way a sandbox does: from another process
// (the recorder leaves out the reads of its own).
func readByChild(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		if out, err := exec.Command("cat", filepath.Join(root, f)).CombinedOutput(); err != nil {
			t.Fatalf("cat %s: %v: %s", f, err, out)
		}
	}
}

// waitFor polls until the recording holds n files (events arrive
// asynchronously) or a few seconds have passed.
func waitFor(r *Recording, n int) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		got := len(r.order)
		r.mu.Unlock()
		if got >= n {
			return
		}
	}
}

func TestRecordsFirstReadsInOrder(t *testing.T) {
	root := fsRoot(t)
	other := fsRoot(t)
	w := NewWatcher(root)
	defer w.Close()
	r, err := w.Record(root, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Read twice, and files of another device in between: each file once,
	// in the order of its first read, and nothing of the other device.
	readByChild(t, root, "srv/app/config", "c")
	readByChild(t, other, "a")
	readByChild(t, root, "srv/app/config", "a", "c")
	// Our own reads are not the sandbox's.
	if _, err := os.ReadFile(filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	waitFor(r, 3)
	got, err := r.Stop()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"srv/app/config", "c", "a"}
	if !slices.Equal(got.Files, want) || got.Partial {
		t.Fatalf("recorded %v (partial %v), want %v", got.Files, got.Partial, want)
	}
	// Stopped, it takes nothing more.
	readByChild(t, root, "b")
	time.Sleep(100 * time.Millisecond)
	if again, _ := r.Stop(); !slices.Equal(again.Files, want) {
		t.Fatalf("after Stop: %v", again.Files)
	}
}

func TestRecordingEndsAtItsBoundAndWindow(t *testing.T) {
	root := fsRoot(t)
	w := NewWatcher(root)
	defer w.Close()
	r, err := w.Record(root, time.Minute, 2)
	if err != nil {
		t.Fatal(err)
	}
	readByChild(t, root, "a", "b")
	waitFor(r, 2)
	readByChild(t, root, "c")
	time.Sleep(100 * time.Millisecond)
	if !r.Done() {
		t.Fatal("a recording at its bound of 2 files has not ended")
	}
	if got, _ := r.Stop(); !slices.Equal(got.Files, []string{"a", "b"}) {
		t.Fatalf("bounded at 2: %v", got.Files)
	}

	r, err = w.Record(root, 200*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	readByChild(t, root, "b")
	waitFor(r, 1)
	time.Sleep(400 * time.Millisecond)
	readByChild(t, root, "a")
	time.Sleep(100 * time.Millisecond)
	if got, _ := r.Stop(); !slices.Equal(got.Files, []string{"b"}) {
		t.Fatalf("a window of 200ms: %v, want [b]", got.Files)
	}
	// No recording: the file system is not watched.
	w.mu.Lock()
	marked := w.marked
	w.mu.Unlock()
	if marked {
		t.Fatal("the file system is still watched with no recording")
	}
}

func TestRemovedFilesAreLeftOutAndRenamedOnesNamedAsTheyAre(t *testing.T) {
	root := fsRoot(t)
	w := NewWatcher(root)
	defer w.Close()
	r, err := w.Record(root, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	readByChild(t, root, "a", "b", "c")
	waitFor(r, 3)
	os.Remove(filepath.Join(root, "b"))
	os.Rename(filepath.Join(root, "c"), filepath.Join(root, "srv", "c2"))
	got, err := r.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "srv/c2"}; !slices.Equal(got.Files, want) {
		t.Fatalf("recorded %v, want %v", got.Files, want)
	}
}

func TestManyFilesAndANewRecordingOfTheSameRoot(t *testing.T) {
	root := fsRoot(t)
	var names []string
	for i := range 200 {
		n := fmt.Sprintf("f%03d", i)
		os.WriteFile(filepath.Join(root, n), []byte(n), 0o644)
		names = append(names, n)
	}
	w := NewWatcher(root)
	defer w.Close()
	first, err := w.Record(root, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := w.Record(root, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Done() {
		t.Fatal("a second recording of the same root did not end the first")
	}
	args := append([]string(nil), names...)
	for i := range args {
		args[i] = filepath.Join(root, args[i])
	}
	if out, err := exec.Command("cat", args...).CombinedOutput(); err != nil {
		t.Fatalf("cat: %v %s", err, out[:min(len(out), 200)])
	}
	waitFor(second, len(names))
	got, err := second.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Files, names) {
		t.Fatalf("recorded %d files (%v…), want the 200 in order", len(got.Files), got.Files[:min(5, len(got.Files))])
	}
}
