package integration

import (
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// A host is lost: a new cairnd with an empty data dir, the same key file
// and the two locations lists the old host's checkpoints with their names
// and comments, imports them, and restores a disk checkpoint and a named
// snapshot from off-site with their files, and a memory checkpoint with
// its processes; a second import finds nothing new.
func TestOffsiteImportOnANewHost(t *testing.T) {
	_, locs := s3Locations(t)
	config := offsiteConfig(t, locs, filepath.Join(t.TempDir(), "account.key"))

	old := startDaemon(t, "--config", config)
	old.create("web")
	old.sh("web", "echo one > /root/f")
	v0 := old.checkpoint("web", "--comment", "first state")
	old.sh("web", "echo two > /root/f")
	old.mustCLI("snapshot", "create", "web", "--name", "golden")
	pid := old.counter("web")
	mem := old.checkpoint("web", "--memory")
	at := old.count("web") // a little after the checkpoint instant
	old.waitOffsite("web", v0.ID, "uploaded ×2", 2*time.Minute)
	old.waitOffsite("web", "v1", "uploaded ×2", 2*time.Minute)
	old.waitOffsite("web", mem.ID, "uploaded ×2", 2*time.Minute)
	time.Sleep(time.Second)
	later := old.count("web")
	old.kill(syscall.SIGKILL)

	fresh := startDaemon(t, "--config", config)
	var remote []api.RemoteCheckpoint
	if err := json.Unmarshal([]byte(fresh.mustCLI("--json", "offsite", "list")), &remote); err != nil {
		t.Fatal(err)
	}
	if len(remote) != 3 {
		t.Fatalf("offsite list on the new host: %+v, want the old host's three checkpoints", remote)
	}
	first, snap, memory := remote[0], remote[1], remote[2]
	if first.Sandbox != "web" || first.ID != "v0" || first.Comment != "first state" || first.GlobalID != v0.GlobalID || first.Known ||
		len(first.Locations) != 2 || first.HasMemory || snap.Name != "golden" || snap.ID != "v1" || snap.Known ||
		memory.GlobalID != mem.GlobalID || !memory.HasMemory || memory.Known {
		t.Fatalf("offsite list: %+v", remote)
	}

	var res api.ImportResult
	if err := json.Unmarshal([]byte(fresh.mustCLI("--json", "offsite", "import", "--all")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Imported) != 3 || len(res.Skipped) != 0 {
		t.Fatalf("import: %+v", res)
	}
	var snaps []api.Checkpoint
	json.Unmarshal([]byte(fresh.mustCLI("--json", "snapshot", "list")), &snaps)
	if len(snaps) != 3 {
		t.Fatalf("snapshot list after the import: %+v", snaps)
	}
	for _, s := range snaps {
		if !s.SandboxDeleted || s.Stored != api.StoredOffsiteOnly || s.Sandbox != "web" || s.HasMemory != (s.GlobalID == mem.GlobalID) {
			t.Errorf("imported %s: deleted %v, stored %q, sandbox %q, memory %v", s.ID, s.SandboxDeleted, s.Stored, s.Sandbox, s.HasMemory)
		}
	}

	fresh.mustCLI("snapshot", "restore", "golden", "from-snap")
	fresh.mustCLI("snapshot", "restore", v0.GlobalID, "from-v0")
	fresh.mustCLI("snapshot", "restore", mem.GlobalID, "from-mem")
	for name, want := range map[string]string{"from-snap": "two\n", "from-v0": "one\n", "from-mem": "two\n"} {
		fresh.waitState(name, api.StateRunning, 2*time.Minute)
		if got := fresh.sh(name, "cat /root/f"); got != want {
			t.Errorf("%s restored from the old host's off-site copy: %q, want %q", name, got, want)
		}
	}
	// The memory checkpoint's processes resume on the new host.
	if n := fresh.count("from-mem"); n >= later || n+40 < at {
		t.Fatalf("the memory checkpoint restored on the new host counts from %d; at the checkpoint it was about %d, later %d", n, at, later)
	}
	if state, ppid := processState(t, fresh, "from-mem", pid); state == "" || ppid != 1 {
		t.Fatalf("the counting process (pid %d) is not back on the new host: state %q ppid %d", pid, state, ppid)
	}

	res = api.ImportResult{}
	json.Unmarshal([]byte(fresh.mustCLI("--json", "offsite", "import", "--all")), &res)
	if len(res.Imported) != 0 {
		t.Fatalf("a second import made %+v", res.Imported)
	}
	json.Unmarshal([]byte(fresh.mustCLI("--json", "offsite", "list")), &remote)
	for _, rc := range remote {
		if !rc.Known {
			t.Errorf("after the import, %s/%s is not known", rc.Sandbox, rc.ID)
		}
	}
	if code := fresh.errorCode("offsite", "import", "0000000000000000000000000000000000000000000000000000000000000000"); code != api.CodeNotOffsite {
		t.Errorf("import of a manifest the repository does not hold: %s, want R02", code)
	}
}
