package integration

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// waitDown waits until host d lists the host called name down.
func waitDown(t *testing.T, d *daemon, name string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); hostList(t, d)[name].State != api.HostDown; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("host %s is not down after 30 s: %+v", name, hostList(t, d)[name])
		}
	}
}

// A lost host is evacuated: host a holds a sandbox with a disk
// checkpoint off-site ×2 and a newer one only in its pool, one with a
// memory checkpoint off-site ×2 and a counter running, and one with no
// checkpoint. Both S3 servers stop while the newer checkpoint is taken
// (so it never leaves a), then a is killed with SIGKILL, its containers
// left running as after a partition. Through b, the first sandbox is
// restored on c alone (restore --latest --on c), the rest by evacuating
// a to c: each runs on c under its name and id with the files of its
// newest off-site checkpoint (the memory one with its counter resumed),
// the only-local checkpoint is listed as lost, the one with no
// checkpoint stays on a, host down. While a was up, both were refused
// (H03). When a starts again it runs none of its old copies, and its
// pool holds no root of them.
func TestHostsEvacuateALostHost(t *testing.T) {
	c := startCluster(t)
	a, b, cc := c.hosts[0], c.hosts[1], c.hosts[2]
	disk := a.create("disk", "--network", "none", "--on", "a")
	mem := a.create("mem", "--network", "none", "--on", "a")
	a.create("bare", "--network", "none", "--on", "a")

	a.sh("disk", "echo one > /root/f")
	v0 := a.checkpoint("disk")
	a.counter("mem")
	a.sh("mem", "echo kept > /root/m")
	before := a.count("mem")
	m0 := a.checkpoint("mem", "--memory")
	a.waitOffsite("disk", v0.ID, "uploaded ×2", 3*time.Minute)
	a.waitOffsite("mem", m0.ID, "uploaded ×2", 3*time.Minute)

	if code := b.errorCode("restore", "disk", "--latest", "--on", "c"); code != api.CodeHostUp {
		t.Errorf("restore --on another host while the sandbox's host is up: %s, want %s", code, api.CodeHostUp)
	}
	if code := b.errorCode("host", "evacuate", "a"); code != api.CodeHostUp {
		t.Errorf("evacuating a host that is up: %s, want %s", code, api.CodeHostUp)
	}
	if code := b.errorCode("host", "evacuate", "nowhere"); code != api.CodeNoHost {
		t.Errorf("evacuating no host: %s, want %s", code, api.CodeNoHost)
	}

	c.s3[0].Stop()
	c.s3[1].Stop()
	a.sh("disk", "echo two > /root/f")
	v1 := a.checkpoint("disk")
	a.kill(syscall.SIGKILL)
	c.s3[0].Restart(t)
	c.s3[1].Restart(t)
	waitDown(t, b, "a")
	if sb := sandboxOn(t, b, "disk"); sb.State != api.StateHostDown {
		t.Fatalf("disk after its host died: %q, want %q", sb.State, api.StateHostDown)
	}

	// One sandbox, by hand.
	var one api.Evacuated
	if err := json.Unmarshal([]byte(b.mustCLI("--json", "restore", "disk", "--latest", "--on", "c")), &one); err != nil {
		t.Fatal(err)
	}
	if one.Host != "c" || one.ID != disk.ID || one.Checkpoint != v0.ID || one.State != api.StateRunning || one.Error != nil {
		t.Errorf("restore --latest --on c: %+v, want disk (%s) running on c from %s", one, disk.ID, v0.ID)
	}
	if len(one.Lost) != 1 || one.Lost[0].ID != v1.ID || one.Lost[0].GlobalID != v1.GlobalID {
		t.Errorf("lost checkpoints of disk: %+v, want %s only", one.Lost, v1.ID)
	}
	if got := b.sh("disk", "cat /root/f"); got != "one\n" {
		t.Errorf("disk's file on c: %q, want the newest off-site checkpoint's (one)", got)
	}

	// The rest, by evacuating a to c.
	out, errOut, code := b.cli("", "--json", "host", "evacuate", "a", "--to", "c")
	var rep api.EvacuationReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("host evacuate: exit %d: %v\n%s\n%s", code, err, out, errOut)
	}
	if code != 1 || rep.Host != "a" || rep.Restored != 1 || rep.Failed != 1 || len(rep.Sandboxes) != 2 {
		t.Fatalf("host evacuate: exit %d (want 1: one was not restored), report %+v", code, rep)
	}
	got := map[string]api.Evacuated{}
	for _, ev := range rep.Sandboxes {
		got[ev.Name] = ev
	}
	if ev := got["mem"]; ev.Host != "c" || ev.ID != mem.ID || ev.Checkpoint != m0.ID || !ev.Memory || ev.State != api.StateRunning || ev.Error != nil {
		t.Errorf("mem in the report: %+v, want running on c from %s with its memory", ev, m0.ID)
	}
	if ev := got["bare"]; ev.Error == nil || ev.Error.Code != api.CodeNotOffsite || ev.Host != "a" {
		t.Errorf("bare (no checkpoint) in the report: %+v, want not restored (%s), still on a", ev, api.CodeNotOffsite)
	}
	if n := b.count("mem"); n < before {
		t.Errorf("mem's counter on c is %d, below the %d it had before its memory checkpoint: it did not resume", n, before)
	}
	if got := b.sh("mem", "cat /root/m"); got != "kept\n" {
		t.Errorf("mem's file on c: %q", got)
	}
	for _, name := range []string{"disk", "mem"} {
		sb := sandboxOn(t, cc, name)
		if sb.Host != "c" || sb.State != api.StateRunning {
			t.Errorf("%s as c lists it: host %q state %q, want c, running", name, sb.Host, sb.State)
		}
		if !exists(filepath.Join(cc.dataDir, "pool", "sandboxes", sb.ID)) {
			t.Errorf("%s's root is not in c's pool", name)
		}
	}
	if sb := sandboxOn(t, b, "bare"); sb.Host != "a" || sb.State != api.StateHostDown {
		t.Errorf("bare: host %q state %q, want a, %s", sb.Host, sb.State, api.StateHostDown)
	}

	// a comes back: its stale copies go, the evacuated sandboxes stay
	// on c, and its own sandbox runs on it again.
	a.start()
	if n := strings.Count(a.logText(), "recover: deleting orphan container"); n < 2 {
		t.Errorf("a swept %d stale containers at its start, want its 2 old copies (left running by the SIGKILL)", n)
	}
	for _, id := range []string{disk.ID, mem.ID} {
		if slices.ContainsFunc(a.containers(), func(name string) bool { return strings.Contains(name, id) }) {
			t.Errorf("a runs a stale copy of %s after it started again: %v", id, a.containers())
		}
		if exists(filepath.Join(a.dataDir, "pool", "sandboxes", id)) {
			t.Errorf("a's pool still holds the root of %s", id)
		}
	}
	if got := a.sh("disk", "cat /root/f"); got != "one\n" {
		t.Errorf("disk through a after a came back: %q, want c's copy (one)", got)
	}
	if got := a.sh("bare", "echo here"); got != "here\n" {
		t.Errorf("bare on a after a came back: %q", got)
	}
	if sb := sandboxOn(t, b, "disk"); sb.Host != "c" {
		t.Errorf("disk after a came back: on %q, want c", sb.Host)
	}
}

// A host that was cut off (its cairnd frozen with SIGSTOP: no heartbeat,
// its sandboxes running on) is evacuated; when it comes back without a
// restart it stops its stale copy within a few seconds, and the copy on
// the host that took it over goes on.
func TestHostsCutOffHostStopsItsStaleCopy(t *testing.T) {
	c := startCluster(t)
	a, b, cc := c.hosts[0], c.hosts[1], c.hosts[2]
	web := a.create("web", "--network", "none", "--on", "a")
	a.sh("web", "echo kept > /root/f")
	v0 := a.checkpoint("web")
	a.waitOffsite("web", v0.ID, "uploaded ×2", 3*time.Minute)

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	waitDown(t, b, "a")
	var rep api.EvacuationReport
	if err := json.Unmarshal([]byte(b.mustCLI("--json", "host", "evacuate", "a")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Restored != 1 || rep.Sandboxes[0].Host == "a" || rep.Sandboxes[0].Host == "" {
		t.Fatalf("evacuating a (spread): %+v, want web restored on b or c", rep)
	}
	on := map[string]*daemon{"b": b, "c": cc}[rep.Sandboxes[0].Host]
	if !slices.ContainsFunc(a.containers(), func(name string) bool { return strings.Contains(name, web.ID) }) {
		t.Fatalf("a's copy of web is not running while a is frozen: %v", a.containers())
	}

	a.cmd.Process.Signal(syscall.SIGCONT)
	resumed = true
	deadline := time.Now().Add(20 * time.Second)
	for slices.ContainsFunc(a.containers(), func(name string) bool { return strings.Contains(name, web.ID) }) {
		if time.Now().After(deadline) {
			t.Fatalf("a still runs its stale copy of web 20 s after it came back: %v", a.containers())
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !strings.Contains(a.logText(), "stopping the stale copy here") {
		t.Errorf("a's log does not say it stopped its stale copy")
	}
	if exists(filepath.Join(a.dataDir, "pool", "sandboxes", web.ID)) {
		t.Errorf("a's pool still holds web's root")
	}
	if got := on.sh("web", "cat /root/f"); got != "kept\n" {
		t.Errorf("web on %s after a came back: %q", rep.Sandboxes[0].Host, got)
	}
	if sb := sandboxOn(t, a, "web"); sb.Host != rep.Sandboxes[0].Host || sb.State != api.StateRunning {
		t.Errorf("web as a lists it: host %q state %q", sb.Host, sb.State)
	}
}
