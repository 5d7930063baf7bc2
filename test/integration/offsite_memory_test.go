package integration

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// treeBytes sums the sizes of the regular files under dir.
func treeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A memory checkpoint goes off-site with its memory image: once both
// locations hold it, its local copy (disk and image) can go, and a
// restore from off-site, as a new sandbox or in place, resumes its
// processes where they were. A second image of the same sandbox stores
// only a small share of its bytes anew.
func TestMemoryCheckpointRestoresFromOffsite(t *testing.T) {
	srv, locs := s3Locations(t)
	d := startDaemon(t, "--config", offsiteConfig(t, locs, ""))
	d.create("mem")
	pid := d.counter("mem")
	d.sh("mem", "echo before > /root/marker")
	// 32 MiB that live in memory only (/tmp is a memory file system in
	// gVisor): the image is mostly these, and they do not change.
	d.sh("mem", "head -c 33554432 /dev/urandom > /tmp/big")
	sum := d.sh("mem", "md5sum /tmp/big")
	stored := treeBytes(t, srv[0].Dir())
	v0 := d.checkpoint("mem", "--memory")
	at := d.count("mem") // a little after the checkpoint instant
	d.waitOffsite("mem", v0.ID, "uploaded ×2", 2*time.Minute)
	first := treeBytes(t, srv[0].Dir()) - stored
	image := treeBytes(t, filepath.Join(d.dataDir, "pool", "memory", v0.GlobalID))
	if first < image/4 {
		t.Fatalf("the first upload stored %d bytes in a location; the memory image alone is %d (compressed, but not that much)", first, image)
	}

	d.sh("mem", "echo after > /root/marker")
	time.Sleep(time.Second)
	later := d.count("mem")
	stored = treeBytes(t, srv[0].Dir())
	v1 := d.checkpoint("mem", "--memory")
	d.waitOffsite("mem", v1.ID, "uploaded ×2", 2*time.Minute)
	second := treeBytes(t, srv[0].Dir()) - stored
	image1 := treeBytes(t, filepath.Join(d.dataDir, "pool", "memory", v1.GlobalID))
	t.Logf("memory images of %d and %d bytes; the first upload stored %d bytes in a location, the second %d (%.1f%% of its image)",
		image, image1, first, second, 100*float64(second)/float64(image1))
	if second > image1/4 {
		t.Errorf("the second memory checkpoint stored %d bytes for an image of %d: successive images should share most chunks", second, image1)
	}

	var ck api.Checkpoint
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "evict", "mem", v0.ID)), &ck); err != nil {
		t.Fatal(err)
	}
	if ck.Stored != api.StoredOffsiteOnly || !ck.HasMemory {
		t.Fatalf("evicted memory checkpoint: stored %q, memory %v", ck.Stored, ck.HasMemory)
	}
	for _, dir := range []string{"checkpoints", "memory"} {
		p := filepath.Join(d.dataDir, "pool", dir, v0.GlobalID)
		deadline := time.Now().Add(10 * time.Second)
		for _, err := os.Stat(p); !os.IsNotExist(err); _, err = os.Stat(p) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is still there after the evict: %v", p, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	out := d.mustCLI("checkpoint", "restore", "mem", v0.ID, "--as", "copy")
	d.waitState("copy", api.StateRunning, 2*time.Minute)
	resumed := d.count("copy")
	if resumed >= later || resumed+40 < at {
		t.Fatalf("restored from off-site, the counter is at %d; at the checkpoint it was about %d, later %d (output %q)", resumed, at, later, out)
	}
	if state, ppid := processState(t, d, "copy", pid); state == "" || ppid != 1 {
		t.Fatalf("the counting process (pid %d) is not back in the copy: state %q ppid %d", pid, state, ppid)
	}
	time.Sleep(500 * time.Millisecond)
	if again := d.count("copy"); again <= resumed {
		t.Fatalf("the resumed counter does not count: %d then %d", resumed, again)
	}
	if got := d.sh("copy", "cat /root/marker"); got != "before\n" {
		t.Fatalf("the copy's disk: %q", got)
	}
	if got := d.sh("copy", "md5sum /tmp/big"); got != sum {
		t.Fatalf("the copy's /tmp/big (in memory): %q, want %q", got, sum)
	}
	entries, _ := os.ReadDir(filepath.Join(d.dataDir, "pool", "tmp"))
	for _, e := range entries {
		t.Errorf("left in the pool's work area after the restore: %s", e.Name())
	}

	// A saved session whose local copy was lost (wiped by hand) resumes
	// all the same, from its memory image fetched from off-site.
	d.mustCLI("stop", "copy", "--snapshot")
	var sb api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "copy")), &sb)
	saved := d.waitOffsite("copy", sb.SavedSession, "uploaded ×2", 2*time.Minute)
	for _, dir := range []string{"checkpoints", "memory"} {
		p := filepath.Join(d.dataDir, "pool", dir, saved.GlobalID)
		if out, err := exec.Command("btrfs", "subvolume", "delete", p).CombinedOutput(); err != nil {
			t.Fatalf("wipe %s: %v: %s", p, err, out)
		}
	}
	d.mustCLI("start", "copy")
	if n := d.count("copy"); n < resumed || n > resumed+200 {
		t.Fatalf("the saved session resumed from off-site counts from %d; it was past %d when saved", n, resumed)
	}
	if state, ppid := processState(t, d, "copy", pid); state == "" || ppid != 1 {
		t.Fatalf("the counting process (pid %d) did not resume from the saved session: state %q ppid %d", pid, state, ppid)
	}

	// In place, the same: the sandbox goes back to v0's processes.
	d.mustCLI("restore", "mem", v0.ID, "--wait", "--no-safety-checkpoint")
	if n := d.count("mem"); n >= later || n+40 < at {
		t.Fatalf("restored in place from off-site, the counter is at %d; at the checkpoint it was about %d, later %d", n, at, later)
	}
	if got := d.sh("mem", "cat /root/marker"); got != "before\n" {
		t.Fatalf("the disk after the restore in place: %q", got)
	}

	// Verify covers the memory images: everything both locations hold
	// reads back intact.
	var rep api.VerifyReport
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "verify", "--offsite", "--no-repair")), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Locations) != 2 {
		t.Errorf("verify --offsite: %+v", rep)
	}
}
