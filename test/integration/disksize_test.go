package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// TestDiskSizeBoundsOneSandbox: a sandbox that fills its disk gets "Disk
// quota exceeded" on its own disk; another sandbox writes on, the full
// one's checkpoints still work, a fork has the same size, and deleting the
// file makes room again.
func TestDiskSizeBoundsOneSandbox(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("full", "--disk", "200M", "--restart", "no")
	if sb.DiskBytes != 200<<20 {
		t.Fatalf("disk_bytes of a sandbox created with --disk 200M: %d", sb.DiskBytes)
	}
	other := d.create("other")
	if other.DiskBytes != 8<<30 {
		t.Fatalf("disk_bytes of a sandbox created without --disk: %d, want cairnd's default 10G cut to the pool's 8G", other.DiskBytes)
	}
	out, errOut, code := d.cli("", "exec", "full", "--", "/bin/sh", "-c", "dd if=/dev/zero of=/root/fill bs=1M count=300 && sync")
	if code == 0 || !strings.Contains(out+errOut, "quota exceeded") {
		t.Fatalf("writing 300M into a 200M disk: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	d.sh("other", "dd if=/dev/zero of=/root/f bs=1M count=250 2>/dev/null && sync && echo ok")

	var info api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "full")), &info)
	if info.Disk == nil || info.Disk.Used < 150<<20 || info.Disk.Used > 200<<20 {
		t.Fatalf("info of the full sandbox: disk %+v, want nearly 200M used", info.Disk)
	}
	if text := d.mustCLI("info", "full"); !strings.Contains(text, "200MiB (") {
		t.Fatalf("cairn info does not show the disk size:\n%s", text)
	}
	// Its checkpoints work, disk and memory.
	ck := d.checkpoint("full")
	d.mustCLI("checkpoint", "create", "full", "--memory")
	// A fork has the size of the original, and is as full.
	d.mustCLI("fork", "full", "--from-checkpoint", ck.ID, "--name-prefix", "full-copy")
	var copyInfo api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "full-copy-1")), &copyInfo)
	if copyInfo.DiskBytes != 200<<20 || copyInfo.Restart != api.RestartNo {
		t.Fatalf("fork of a 200M sandbox with --restart no has disk_bytes %d, restart %q: its settings are not kept", copyInfo.DiskBytes, copyInfo.Restart)
	}
	if _, _, code := d.cli("", "exec", "full-copy-1", "--", "/bin/sh", "-c", "dd if=/dev/zero of=/root/more bs=1M count=100 && sync"); code == 0 {
		t.Fatal("the fork of a full sandbox wrote 100M more: its disk size is not kept")
	}
	// Room again once the file is gone.
	d.sh("full", "rm /root/fill && sync && dd if=/dev/zero of=/root/small bs=1M count=50 2>/dev/null && sync")
	if code := d.errorCode("create", "big", "--disk", "100T"); code != api.CodeInvalidArgument {
		t.Fatalf("--disk larger than the pool: %s, want V02", code)
	}
}

// TestPoolReserveKeepsCheckpointsWorking: with the sandboxes' share of the
// pool full, writes fail inside, cairn account says the pool runs low,
// checkpoints and deletes still work, and all is well again once space is
// freed.
func TestPoolReserveKeepsCheckpointsWorking(t *testing.T) {
	_, locs := s3Locations(t)
	d := startDaemon(t, "--config", offsiteConfig(t, locs, ""), "--pool-size", "1G", "--pool-reserve", "500M", "--default-disk", "2G")
	d.create("hog")
	d.sh("hog", "echo v0 > /root/mark && sync")
	ck0 := d.checkpoint("hog")
	d.waitOffsite("hog", ck0.ID, "uploaded ×2", time.Minute)
	var acct api.AccountInfo
	json.Unmarshal([]byte(d.mustCLI("--json", "account")), &acct)
	if acct.Pool == nil || acct.Pool.Limit <= 0 || acct.Pool.Low {
		t.Fatalf("account pool before: %+v, want a limit and not low", acct.Pool)
	}
	out, errOut, code := d.cli("", "exec", "hog", "--", "/bin/sh", "-c", "dd if=/dev/zero of=/root/fill bs=1M count=900 && sync")
	if code == 0 || !strings.Contains(out+errOut, "quota exceeded") {
		t.Fatalf("filling the pool: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	acct = api.AccountInfo{}
	json.Unmarshal([]byte(d.mustCLI("--json", "account")), &acct)
	if acct.Pool == nil || !acct.Pool.Low || acct.Pool.Note == "" {
		t.Fatalf("account pool when full: %+v, want low with a note", acct.Pool)
	}
	if text := d.mustCLI("account"); !strings.Contains(text, "LOW") {
		t.Fatalf("cairn account does not say the pool runs low:\n%s", text)
	}
	// A memory checkpoint needs room for its image: it fails cleanly, and
	// the sandbox runs on, not paused.
	before := len(d.checkpoints("hog"))
	if code := d.errorCode("checkpoint", "create", "hog", "--memory"); code != api.CodeCheckpointFailed && code != api.CodePoolFull {
		t.Fatalf("a memory checkpoint of a full pool: %q, want K01 or L07", code)
	}
	if after := len(d.checkpoints("hog")); after != before {
		t.Fatalf("a failed memory checkpoint left a checkpoint: %d before, %d after", before, after)
	}
	if out := d.sh("hog", "echo alive"); out != "alive\n" {
		t.Fatalf("after a failed memory checkpoint: %q", out)
	}
	// A restore in place takes a safety checkpoint with memory first, which
	// finds no room: it fails before it changes anything, and the sandbox
	// runs on as it was.
	if code := d.errorCode("restore", "hog", ck0.ID, "--wait"); code != api.CodeCheckpointFailed && code != api.CodePoolFull {
		t.Fatalf("a restore in place on a full pool: %q, want K01 or L07 (its safety checkpoint)", code)
	}
	if after := len(d.checkpoints("hog")); after != before {
		t.Fatalf("a failed restore left a checkpoint: %d before, %d after", before, after)
	}
	if out := d.sh("hog", "cat /root/mark; ls /root/fill"); out != "v0\n/root/fill\n" {
		t.Fatalf("after a failed restore: %q, want the disk as it was", out)
	}
	// A restore as a new sandbox shares its checkpoint's data: it works.
	d.mustCLI("checkpoint", "restore", "hog", ck0.ID, "--as", "hog-old")
	if out := d.sh("hog-old", "cat /root/mark; ls /root"); out != "v0\nmark\n" {
		t.Fatalf("the restore as new on a full pool reads %q", out)
	}
	d.mustCLI("delete", "hog-old")

	// The reserve is still there: a checkpoint, a fork and deletes work,
	// and the checkpoint goes off-site (an upload reads the pool, writes
	// nothing there).
	ck := d.checkpoint("hog")
	d.waitOffsite("hog", ck.ID, "uploaded ×2", 2*time.Minute)
	// With the safety checkpoint skipped, a restore in place needs no
	// room either: the checkpoint's disk is swapped in.
	d.mustCLI("restore", "hog", ck0.ID, "--wait", "--no-safety-checkpoint")
	if out := d.sh("hog", "ls /root"); out != "mark\n" {
		t.Fatalf("after a restore in place on a full pool: %q", out)
	}
	d.mustCLI("fork", "hog", "--from-checkpoint", ck.ID, "--name-prefix", "hog-copy")
	d.mustCLI("delete", "hog-copy-1")
	d.mustCLI("checkpoint", "delete", "hog", ck.ID)
	d.sh("hog", "rm -f /root/fill && sync")
	// The copy's final checkpoint holds the data too: free it.
	var snaps []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "snapshot", "list")), &snaps)
	for _, s := range snaps {
		if s.Sandbox == "hog-copy-1" || s.Sandbox == "hog-old" {
			d.mustCLI("snapshot", "delete", s.GlobalID)
		}
	}
	d.sh("hog", "dd if=/dev/zero of=/root/small bs=1M count=20 2>/dev/null && sync")
	acct = api.AccountInfo{}
	json.Unmarshal([]byte(d.mustCLI("--json", "account")), &acct)
	if acct.Pool == nil || acct.Pool.Low {
		t.Fatalf("account pool after freeing space: %+v, want not low", acct.Pool)
	}
}
