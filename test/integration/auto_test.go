package integration

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// checkpoints lists every checkpoint of a sandbox, automatic ones included.
func (d *daemon) checkpoints(name string) []api.Checkpoint {
	d.t.Helper()
	var cks []api.Checkpoint
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", name, "--include-auto")), &cks); err != nil {
		d.t.Fatal(err)
	}
	return cks
}

func triggers(cks []api.Checkpoint) []string {
	var out []string
	for _, ck := range cks {
		out = append(out, ck.Trigger)
	}
	return out
}

var autoID = regexp.MustCompile(`^auto-\d{8}T\d{6}Z(-\d+)?$`)

func TestEachLifecycleTriggerMakesOneCheckpoint(t *testing.T) {
	d := startDaemon(t)
	d.create("life")
	d.sh("life", "echo 1 > /root/f")
	steps := []struct {
		args    []string
		trigger string
	}{
		{[]string{"stop", "life"}, api.TriggerStop},
		{[]string{"start", "life"}, ""}, // starting takes none
		{[]string{"restart", "life"}, api.TriggerRestart},
		{[]string{"fork", "life"}, api.TriggerFork},
		{[]string{"restore", "life", "auto", "--wait"}, api.TriggerRestore}, // "auto": filled in below
	}
	var want []string
	for _, st := range steps {
		if st.args[0] == "restore" {
			st.args[2] = d.checkpoints("life")[0].ID
		}
		d.mustCLI(st.args...)
		if st.trigger != "" {
			want = append(want, st.trigger)
		}
		cks := d.checkpoints("life")
		if got := triggers(cks); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("after %v: triggers %v, want %v", st.args, got, want)
		}
		for _, ck := range cks {
			if !autoID.MatchString(ck.ID) {
				t.Fatalf("automatic checkpoint has id %q, want auto-YYYYMMDDTHHMMSSZ", ck.ID)
			}
		}
	}
	// Hidden from the plain list, which shows manual ones only.
	var plain []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", "life")), &plain)
	if len(plain) != 0 {
		t.Fatalf("automatic checkpoints in the plain list: %+v", plain)
	}
	// Delete takes a final checkpoint that outlives the sandbox and
	// restores as a new one.
	d.sh("life", "echo last > /root/f")
	d.mustCLI("delete", "life")
	var snaps []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "snapshot", "list")), &snaps)
	var final *api.Checkpoint
	for i := range snaps {
		if snaps[i].Sandbox == "life" && snaps[i].Trigger == api.TriggerDelete {
			final = &snaps[i]
		}
	}
	if final == nil || !final.SandboxDeleted {
		t.Fatalf("no final checkpoint of the deleted sandbox in snapshot list: %+v", snaps)
	}
	d.mustCLI("snapshot", "restore", final.GlobalID, "life-again")
	if out := d.sh("life-again", "cat /root/f"); out != "last\n" {
		t.Fatalf("restored final checkpoint: %q", out)
	}
}

func TestNamedSnapshots(t *testing.T) {
	d := startDaemon(t)
	d.create("snap")
	d.sh("snap", "echo named > /root/f")
	var ck api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "snapshot", "create", "snap")), &ck)
	if !regexp.MustCompile(`^snap-\d{8}-\d{6}$`).MatchString(ck.Name) || ck.ID != "v0" {
		t.Fatalf("default snapshot name %q id %q", ck.Name, ck.ID)
	}
	d.mustCLI("snapshot", "create", "snap", "--name", "before-upgrade")
	unnamed := d.checkpoint("snap") // manual, unnamed: listed too
	var snaps []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "snapshot", "list")), &snaps)
	names := map[string]bool{}
	for _, s := range snaps {
		names[s.Name] = true
	}
	if len(snaps) != 3 || !names["before-upgrade"] || !names[ck.Name] || !names[""] {
		t.Fatalf("snapshot list: %+v", snaps)
	}
	if code := d.errorCode("snapshot", "create", "snap", "--name", "before-upgrade"); code != api.CodeSnapshotNameTaken {
		t.Fatalf("duplicate name: %s", code)
	}
	// Named snapshots survive their sandbox and are deleted only by hand.
	// A manual unnamed checkpoint is still listed, with its sandbox's
	// name, and can be deleted by its SANDBOX/ID.
	d.mustCLI("delete", "snap")
	snaps = nil
	json.Unmarshal([]byte(d.mustCLI("--json", "snapshot", "list")), &snaps)
	i := slices.IndexFunc(snaps, func(s api.Checkpoint) bool { return s.GlobalID == unnamed.GlobalID })
	if i < 0 || snaps[i].Sandbox != "snap" || !snaps[i].SandboxDeleted || snaps[i].ID != unnamed.ID {
		t.Fatalf("manual checkpoint %s of the deleted sandbox in snapshot list: %+v", unnamed.ID, snaps)
	}
	if out := d.mustCLI("snapshot", "list"); !strings.Contains(out, "snap (deleted)") {
		t.Fatalf("snapshot list does not show the deleted sandbox's name:\n%s", out)
	}
	d.mustCLI("snapshot", "delete", "snap/"+unnamed.ID)
	d.mustCLI("snapshot", "restore", "before-upgrade", "snap2")
	if out := d.sh("snap2", "cat /root/f"); out != "named\n" {
		t.Fatalf("restore of a named snapshot: %q", out)
	}
	// snap2's disk came from it: it is snap2's current checkpoint.
	if code := d.errorCode("snapshot", "delete", "before-upgrade"); code != api.CodeCheckpointCurrent {
		t.Fatalf("deleting the snapshot a sandbox was restored from: %s, want K03", code)
	}
	d.mustCLI("delete", "snap2")
	d.mustCLI("snapshot", "delete", "before-upgrade")
	if code := d.errorCode("snapshot", "restore", "before-upgrade", "snap3"); code != api.CodeNoCheckpoint {
		t.Fatalf("restore of a deleted snapshot: %s", code)
	}
}

func TestDiskLimit(t *testing.T) {
	d := startDaemon(t, "--disk-limit", "120M")
	d.create("full")
	d.sh("full", "head -c 30000000 /dev/urandom > /root/a; sync")
	v0 := d.checkpoint("full")
	d.sh("full", "head -c 30000000 /dev/urandom > /root/b; sync")
	v1 := d.checkpoint("full")
	d.sh("full", "head -c 100000000 /dev/urandom > /root/c; sync")
	if code := d.errorCode("checkpoint", "create", "full"); code != api.CodeDiskLimit {
		t.Fatalf("checkpoint past the limit: %s, want L04", code)
	}
	for _, args := range [][]string{{"create", "another"}, {"snapshot", "create", "full"}, {"fork", "full", "--from-checkpoint", "v0"}} {
		if code := d.errorCode(args...); code != api.CodeDiskLimit {
			t.Errorf("cairn %v past the limit: %s, want L04", args, code)
		}
	}
	// An automatic checkpoint that would cross it is skipped, the stop
	// still happens, and status says why.
	d.mustCLI("stop", "full")
	var sb api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "full")), &sb)
	if sb.State != api.StateStopped || !strings.Contains(sb.AutoCheckpointNote, "L04") {
		t.Fatalf("after stop past the limit: state %s note %q", sb.State, sb.AutoCheckpointNote)
	}
	// Everything stored before is intact and restores.
	d.mustCLI("start", "full")
	for _, ck := range []api.Checkpoint{v0, v1} {
		d.mustCLI("restore", "full", ck.ID, "--wait", "--no-safety-checkpoint")
		want := map[string]string{"v0": "a\n", "v1": "a\nb\n"}[ck.ID]
		if out := d.sh("full", "ls /root"); out != want {
			t.Fatalf("restore of %s past the limit: %q, want %q", ck.ID, out, want)
		}
	}
	var acct api.AccountInfo
	json.Unmarshal([]byte(d.mustCLI("--json", "account")), &acct)
	if acct.DiskLimit != 120<<20 || acct.DiskUsed <= 0 {
		t.Fatalf("account: %+v", acct)
	}
}

// Real time, real btrfs: interval checkpoints happen only when the disk
// changed, and a killed cairnd neither misses nor doubles one. Slow (the
// shortest interval is a minute), so it runs beside the other tests.
func TestIntervalCheckpointsOnlyWhenTheDiskChanged(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	d.create("tick", "--auto-checkpoint", "60s")
	intervals := func() int {
		n := 0
		for _, ck := range d.checkpoints("tick") {
			if ck.Trigger == api.TriggerInterval {
				n++
			}
		}
		return n
	}
	d.sh("tick", "echo 1 > /root/f")
	deadline := time.Now().Add(100 * time.Second)
	for intervals() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no interval checkpoint within 100 s of a write with a 60 s interval")
		}
		time.Sleep(2 * time.Second)
	}
	// Idle, across a crash of cairnd: no second one.
	d.kill(syscall.SIGKILL)
	d.start()
	time.Sleep(75 * time.Second)
	if n := intervals(); n != 1 {
		t.Fatalf("%d interval checkpoints while idle, want 1", n)
	}
	// A write is picked up at the next tick: the interval has long passed.
	d.sh("tick", "echo 2 > /root/f")
	deadline = time.Now().Add(30 * time.Second)
	for intervals() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d interval checkpoints after a write, want 2", intervals())
		}
		time.Sleep(time.Second)
	}
	var sb api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "tick")), &sb)
	if sb.AutoCheckpointSeconds != 60 || sb.LastCheckpointAt == nil {
		t.Fatalf("info: %+v", sb)
	}
	if code := d.errorCode("config", "tick", "--auto-checkpoint", "10s"); code != api.CodeInvalidArgument {
		t.Fatalf("interval below 60 s: %s", code)
	}
	d.mustCLI("config", "tick", "--auto-checkpoint", "2h")
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "tick")), &sb)
	if sb.AutoCheckpointSeconds != 7200 {
		t.Fatalf("after config: %d", sb.AutoCheckpointSeconds)
	}
}
