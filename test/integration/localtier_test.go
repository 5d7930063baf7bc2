package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// The local tier: once both locations hold a checkpoint, its local copy
// goes by the account's policy (here: only the newest stays), it is
// listed "off-site only" and restores from off-site; by hand, evict drops
// one (a memory checkpoint's disk and memory image alike), and refuses a
// current checkpoint and the one a saved session resumes from.
func TestLocalTier(t *testing.T) {
	config, _ := json.Marshal(map[string]any{"accounts": map[string]any{"default": map[string]any{
		"local": map[string]any{"keep_newest": 1, "keep_for": "-1s"}}}})
	configFile := filepath.Join(t.TempDir(), "cairnd.json")
	if err := os.WriteFile(configFile, config, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "--config", configFile)
	d.create("s")
	d.sh("s", "echo a > /root/a")
	v0 := d.checkpoint("s")
	d.sh("s", "echo b > /root/b")
	d.checkpoint("s")
	d.waitOffsite("s", "v0", "uploaded ×2", time.Minute)
	d.waitOffsite("s", "v1", "uploaded ×2", time.Minute)

	deadline := time.Now().Add(45 * time.Second)
	for d.ckInfo("s", "v0").Stored != api.StoredOffsiteOnly {
		if time.Now().After(deadline) {
			t.Fatalf("v0 still %q 45 s after both locations held it; policy keeps the newest only", d.ckInfo("s", "v0").Stored)
		}
		time.Sleep(time.Second)
	}
	if got := d.ckInfo("s", "v1").Stored; got != api.StoredLocalAndOffsite {
		t.Fatalf("the newest checkpoint: stored %q, want local + off-site", got)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "checkpoints", v0.GlobalID)); !os.IsNotExist(err) {
		t.Fatalf("v0's local disk is still there: %v", err)
	}
	d.mustCLI("checkpoint", "restore", "s", "v0", "--as", "r")
	d.waitState("r", api.StateRunning, time.Minute)
	if out := d.sh("r", "ls /root"); out != "a\n" {
		t.Fatalf("restored from off-site: /root holds %q, want a", out)
	}

	// v1 becomes s's current checkpoint: it stays.
	d.mustCLI("restore", "s", "v1", "--wait", "--no-safety-checkpoint")
	if code := d.errorCode("checkpoint", "evict", "s", "v1"); code != api.CodeCheckpointCurrent {
		t.Fatalf("evict of the current checkpoint: %s, want K03", code)
	}
	v2 := d.checkpoint("s", "--memory")
	d.waitOffsite("s", "v2", "uploaded ×2", time.Minute)
	var mem api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "evict", "s", "v2")), &mem)
	if mem.Stored != api.StoredOffsiteOnly || !mem.HasMemory {
		t.Fatalf("evict of a memory checkpoint: stored %q, memory %v", mem.Stored, mem.HasMemory)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "memory", v2.GlobalID)); !os.IsNotExist(err) {
		// Freed at once: nothing holds it.
		t.Fatalf("v2's memory image is still there: %v", err)
	}
	d.sh("s", "echo c > /root/c")
	d.checkpoint("s")
	d.waitOffsite("s", "v3", "uploaded ×2", time.Minute)
	var ck api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "evict", "s", "v3")), &ck)
	if ck.Stored != api.StoredOffsiteOnly {
		t.Fatalf("evict by hand: stored %q", ck.Stored)
	}
	d.mustCLI("restore", "s", "v3", "--wait", "--no-safety-checkpoint")
	if out := d.sh("s", "ls /root"); out != "a\nb\nc\n" {
		t.Fatalf("restored in place from off-site: %q", out)
	}
	if got := d.ckInfo("s", "v1").Stored; got != api.StoredLocalAndOffsite {
		t.Fatalf("the checkpoint s was restored from before: stored %q", got)
	}

	// A saved session's checkpoint stays, off-site or not: the next start
	// resumes from it at once.
	d.mustCLI("stop", "s", "--snapshot")
	var sb api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "s")), &sb)
	saved := d.ckInfo("s", sb.SavedSession)
	d.waitOffsite("s", saved.ID, "uploaded ×2", time.Minute)
	if code := d.errorCode("checkpoint", "evict", "s", saved.ID); code != api.CodeCheckpointCurrent {
		t.Fatalf("evict of the saved session's checkpoint: %s, want K03", code)
	}
	d.mustCLI("start", "s")
	if out := d.sh("s", "ls /root"); out != "a\nb\nc\n" {
		t.Fatalf("after resuming the saved session: %q", out)
	}
}
