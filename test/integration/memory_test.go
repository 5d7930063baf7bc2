package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// counter starts a process that counts in memory and shows its count in
// /tmp/count (a memory file system in gVisor: not on the disk), and
// returns its pid.
func (d *daemon) counter(name string) int {
	d.t.Helper()
	var started api.ExecStarted
	out := d.mustCLI("--json", "exec", "-d", name, "--", "/bin/sh", "-c",
		"i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done")
	if err := json.Unmarshal([]byte(out), &started); err != nil {
		d.t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	return started.PID
}

// count reads the counter of sandbox name. The counter truncates the file
// before it writes, so a read can catch it empty: read again then.
func (d *daemon) count(name string) int {
	d.t.Helper()
	var err error
	for range 20 {
		var n int
		n, err = strconv.Atoi(strings.TrimSpace(d.sh(name, "cat /tmp/count")))
		if err == nil {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	d.t.Fatalf("read the counter of %s: %v", name, err)
	return 0
}

func TestRollbackWithMemoryResumesTheProcess(t *testing.T) {
	d := startDaemon(t)
	d.create("mem")
	pid := d.counter("mem")
	d.sh("mem", "echo before > /root/marker")
	ck := d.checkpoint("mem", "--memory", "--label", "counting")
	info, _ := d.client.Checkpoint(context.Background(), "mem", ck.ID)
	if !ck.HasMemory || info.SizeExclusive < 1<<20 {
		t.Fatalf("memory checkpoint: %+v (info %+v): its memory image should count in its size", ck, info)
	}
	atCheckpoint := d.count("mem") // a little after the checkpoint instant
	d.sh("mem", "echo after > /root/marker")
	time.Sleep(time.Second)
	later := d.count("mem")
	if later <= atCheckpoint {
		t.Fatalf("the counter did not go on after the checkpoint: %d then %d", atCheckpoint, later)
	}
	d.mustCLI("rollback", "mem", ck.ID)
	// exec works at once: cairn-init dialled its socket again.
	resumed := d.count("mem")
	if resumed >= later || resumed+20 < atCheckpoint-20 {
		t.Fatalf("after rollback the counter is %d; at the checkpoint it was about %d, before the rollback %d", resumed, atCheckpoint, later)
	}
	if state, ppid := processState(t, d, "mem", pid); state == "" || ppid != 1 {
		t.Fatalf("the counting process (pid %d) is not back: state %q ppid %d", pid, state, ppid)
	}
	time.Sleep(500 * time.Millisecond)
	if again := d.count("mem"); again <= resumed {
		t.Fatalf("the resumed counter does not count: %d then %d", resumed, again)
	}
	// Disk and memory are of the same instant.
	if got := d.sh("mem", "cat /root/marker"); got != "before\n" {
		t.Fatalf("disk after rollback: %q", got)
	}
	var cks []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", "mem", "--include-auto")), &cks)
	safety := cks[len(cks)-1]
	if safety.Trigger != api.TriggerRestore || !safety.HasMemory {
		t.Fatalf("the safety checkpoint of a running sandbox should hold memory: %+v", safety)
	}
}

func TestForkOfAMemoryCheckpoint(t *testing.T) {
	d := startDaemon(t)
	d.create("src")
	pid := d.counter("src")
	ck := d.checkpoint("src", "--memory")
	at := d.count("src")
	var kids []api.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "fork", "src", "--from-checkpoint", ck.ID, "--count", "3")), &kids); err != nil || len(kids) != 3 {
		t.Fatalf("fork: %v %+v", err, kids)
	}
	counts := map[string]int{}
	for _, k := range kids {
		counts[k.Name] = d.count(k.Name)
		if counts[k.Name] > at+40 {
			t.Fatalf("%s counts %d: it did not start from the checkpoint (~%d)", k.Name, counts[k.Name], at)
		}
		if h := d.sh(k.Name, "hostname"); h != k.Name+"\n" {
			t.Errorf("%s has hostname %q", k.Name, h)
		}
	}
	// They count on independently: stop one, the others go on.
	d.sh(kids[0].Name, fmt.Sprintf("kill %d", pid))
	time.Sleep(time.Second)
	for _, k := range kids[1:] {
		if n := d.count(k.Name); n <= counts[k.Name] {
			t.Fatalf("%s stopped counting: %d then %d", k.Name, counts[k.Name], n)
		}
	}
	if n := d.count("src"); n < at {
		t.Fatalf("the parent went back: %d < %d", n, at)
	}
	// Fork of the live memory.
	var live []api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "fork", "src", "--memory", "--name-prefix", "live")), &live)
	if len(live) != 1 || d.count("live-1") == 0 {
		t.Fatalf("fork --memory: %+v", live)
	}
}

func TestSavedSession(t *testing.T) {
	d := startDaemon(t)
	d.create("sess")
	d.sh("sess", "echo in-memory-value > /tmp/kept")
	// Restore as new of a memory checkpoint resumes its processes (and its
	// memory file system) in the new sandbox.
	d.checkpoint("sess", "--memory", "--name", "sess-mem")
	d.mustCLI("snapshot", "restore", "sess-mem", "sess-copy")
	if got := d.sh("sess-copy", "cat /tmp/kept; hostname"); got != "in-memory-value\nsess-copy\n" {
		t.Fatalf("restore as new of a memory checkpoint: %q", got)
	}
	d.mustCLI("stop", "sess", "--snapshot")
	var sb api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "sess")), &sb)
	if sb.State != api.StateStopped || sb.SavedSession == "" {
		t.Fatalf("after stop --snapshot: %+v", sb)
	}
	d.mustCLI("start", "sess")
	if got := d.sh("sess", "cat /tmp/kept"); got != "in-memory-value\n" {
		t.Fatalf("after resuming the saved session /tmp/kept = %q", got)
	}
	// A plain stop still cold-stops: /tmp is gone after the next start.
	d.mustCLI("stop", "sess")
	d.mustCLI("start", "sess")
	if out, _, code := d.cli("", "exec", "sess", "--", "cat", "/tmp/kept"); code == 0 {
		t.Fatalf("after a cold stop and start /tmp/kept is still there: %q", out)
	}
}

func TestMissingMemoryImage(t *testing.T) {
	d := startDaemon(t)
	d.create("hurt")
	d.sh("hurt", "echo disk > /root/f")
	ck := d.checkpoint("hurt", "--memory")
	os.Remove(filepath.Join(d.dataDir, "pool", "memory", ck.GlobalID, "pages.img"))
	if code := d.errorCode("restore", "hurt", ck.ID); code != api.CodeMemoryImageBad {
		t.Fatalf("restore with a missing memory image: %s, want K04", code)
	}
	d.sh("hurt", "echo changed > /root/f")
	d.mustCLI("restore", "hurt", ck.ID, "--disk-only", "--wait")
	if got := d.sh("hurt", "cat /root/f"); got != "disk\n" {
		t.Fatalf("--disk-only restore: %q", got)
	}
}

func TestAttachedExecSurvivesAMemoryCheckpoint(t *testing.T) {
	d := startDaemon(t)
	d.create("stream")
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		st, err := d.client.Exec(context.Background(), "stream", api.ExecRequest{
			Command: []string{"/bin/sh", "-c", "i=0; while [ $i -lt 80 ]; do i=$((i+1)); echo $i; sleep 0.05; done"},
		}, client.ExecIO{Stdout: &out})
		if err == nil && st.Code != 0 {
			err = fmt.Errorf("exit %d", st.Code)
		}
		done <- err
	}()
	time.Sleep(time.Second)
	d.checkpoint("stream", "--memory")
	if err := <-done; err != nil {
		t.Fatalf("exec across a memory checkpoint: %v (got %q)", err, out.String())
	}
	var want strings.Builder
	for i := 1; i <= 80; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if out.String() != want.String() {
		t.Fatalf("lines lost or repeated across the memory checkpoint:\n%s", out.String())
	}
}

// A restore in place replaces a running container by one under a fresh
// name and removes the old one in the background; a cairnd killed right
// after takes over the new one (same pid, still counting) and sweeps the
// old; a delete leaves no container of the sandbox.
func TestRestoreInPlaceReplacesTheContainer(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("rc")
	d.counter("rc")
	ck := d.checkpoint("rc", "--memory")
	info := func() api.Sandbox {
		t.Helper()
		var got api.Sandbox
		if err := json.Unmarshal([]byte(d.mustCLI("--json", "info", "rc")), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	ours := func() []string {
		var out []string
		for _, c := range d.containers() {
			if c == sb.ID || strings.HasPrefix(c, sb.ID+".") {
				out = append(out, c)
			}
		}
		return out
	}
	before := info()
	if !strings.HasPrefix(before.Container, sb.ID+".") {
		t.Fatalf("container of a started sandbox: %q, want its id %s, a dot and a generation", before.Container, sb.ID)
	}
	d.mustCLI("rollback", "rc", ck.ID, "--no-safety-checkpoint")
	after := info()
	if !strings.HasPrefix(after.Container, sb.ID+".") || after.Pid == before.Pid || after.State != api.StateRunning {
		t.Fatalf("after a restore in place: container %q pid %d (%s); before %q pid %d", after.Container, after.Pid, after.State, before.Container, before.Pid)
	}
	d.kill(syscall.SIGKILL) // the old container may still be on its way out
	d.start()
	adopted := info()
	if adopted.Container != after.Container || adopted.Pid != after.Pid || adopted.State != api.StateRunning {
		t.Fatalf("after kill -9: container %q pid %d (%s), want %q pid %d adopted", adopted.Container, adopted.Pid, adopted.State, after.Container, after.Pid)
	}
	if got := ours(); !slices.Equal(got, []string{after.Container}) {
		t.Fatalf("runsc containers of the sandbox after the restart: %v, want only %s", got, after.Container)
	}
	n := d.count("rc")
	time.Sleep(300 * time.Millisecond)
	if m := d.count("rc"); m <= n {
		t.Fatalf("the adopted sandbox's counter does not count: %d then %d", n, m)
	}
	// Without a restart in between, the replaced container goes in the
	// background.
	d.mustCLI("rollback", "rc", ck.ID, "--no-safety-checkpoint")
	again := info()
	for deadline := time.Now().Add(15 * time.Second); !slices.Equal(ours(), []string{again.Container}); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("runsc containers of the sandbox 15 s after a second restore: %v, want only %s", ours(), again.Container)
		}
	}
	d.mustCLI("delete", "rc")
	if got := ours(); len(got) != 0 {
		t.Fatalf("containers left after delete: %v", got)
	}
}
