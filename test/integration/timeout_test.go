package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// --timeout: at its end a sandbox is deleted (with its final checkpoint),
// stopped, or its session saved, as --on-timeout says; a start counts it
// again, and cairn config --timeout extends it from now.
func TestSandboxTimeout(t *testing.T) {
	d := startDaemon(t)
	d.create("gone", "--network", "none", "--timeout", "3s", "--on-timeout", "delete")
	d.create("rest", "--network", "none", "--timeout", "2s")
	d.create("saved", "--network", "none", "--timeout", "3s", "--on-timeout", "save")
	info := d.info("rest")
	if info.TimeoutSeconds != 2 || info.OnTimeout != "stop" || info.EndsAt == nil || time.Until(*info.EndsAt) > 3*time.Second {
		t.Fatalf("info of a sandbox with a timeout: %+v", info)
	}

	d.waitState("rest", api.StateStopped, 20*time.Second)
	d.waitState("saved", api.StateStopped, 20*time.Second)
	if s := d.info("saved"); s.SavedSession == "" {
		t.Errorf("on-timeout save: no saved session: %+v", s)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var list []api.Sandbox
		json.Unmarshal([]byte(d.mustCLI("--json", "list")), &list)
		if !strings.Contains(d.mustCLI("list"), "gone") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("on-timeout delete: still listed 20 s after its 3 s: %+v", list)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var snaps []api.Checkpoint
	json.Unmarshal([]byte(d.mustCLI("--json", "snapshot", "list")), &snaps)
	final := false
	for _, ck := range snaps {
		final = final || ck.Sandbox == "gone" && ck.Trigger == api.TriggerDelete
	}
	if !final {
		t.Errorf("the sandbox deleted at its timeout has no final checkpoint: %+v", snaps)
	}

	// A start counts the timeout again; config extends it from now.
	d.mustCLI("start", "rest")
	if s := d.info("rest"); s.EndsAt == nil || time.Until(*s.EndsAt) < 0 {
		t.Fatalf("after start: %+v", s)
	}
	d.mustCLI("config", "rest", "--timeout", "1h")
	time.Sleep(3 * time.Second)
	s := d.info("rest")
	if s.State != api.StateRunning || s.EndsAt == nil || time.Until(*s.EndsAt) < 59*time.Minute {
		t.Fatalf("after config --timeout 1h: %+v", s)
	}
	if out := d.mustCLI("list"); !strings.Contains(out, "in 59m") {
		t.Errorf("list shows no time left:\n%s", out)
	}
	// An exec's own --timeout: killed at about 2 s, exit 124, S11.
	t0 := time.Now()
	_, errOut, code := d.cli("", "exec", "rest", "--timeout", "2s", "--", "sleep", "100")
	if took := time.Since(t0); code != api.ExitTimedOut || !strings.Contains(errOut, "S11") || took > 10*time.Second || took < 2*time.Second {
		t.Errorf("exec --timeout 2s of sleep 100: exit %d after %v, stderr %q; want 124 at about 2 s with S11", code, took, errOut)
	}
	if code := d.errorCode("create", "bad", "--timeout", "forever"); code != api.CodeInvalidArgument {
		t.Errorf("a bad --timeout: %s, want V02", code)
	}
}
