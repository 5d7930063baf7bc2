package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// A kill of cairnd between a pause or resume sent to a sandbox and its
// record in runsc's state file leaves the file wrong: a paused sandbox
// recorded running (nobody would ever resume it: its execs hang, then
// cairnd starts it again from its disk, losing its processes) or a
// running one recorded paused (resuming it by the file panics its sentry).
// After the restart both must answer at once with their processes intact,
// and pause and resume must work on them again.
func TestPauseOrResumeCutShortByACrash(t *testing.T) {
	d := startDaemon(t)
	uptime := map[string]float64{}
	containers := map[string]string{}
	for _, name := range []string{"paused", "resumed"} {
		d.create(name)
		var info api.Sandbox
		json.Unmarshal([]byte(d.mustCLI("--json", "info", name)), &info)
		containers[name] = info.Container
	}
	time.Sleep(time.Second) // uptimes well above what a fresh boot shows
	for name := range containers {
		uptime[name] = sandboxUptime(t, d, name)
	}
	d.kill(syscall.SIGKILL)

	root := filepath.Join(d.dataDir, "runsc")
	// "paused": paused, but the state file says running, as when cairnd
	// died after the control call and before its write.
	c := containers["paused"]
	if out, err := exec.Command("runsc", "--root", root, "pause", c).CombinedOutput(); err != nil {
		t.Fatalf("runsc pause: %v: %s", err, out)
	}
	setRunscStatus(t, root, c, "running", "paused")
	// "resumed": running, but the state file says paused.
	setRunscStatus(t, root, containers["resumed"], "paused", "running")

	d.start()
	for name := range containers {
		start := time.Now()
		out, err := d.execOut(5*time.Second, name, "cat", "/proc/uptime")
		if err != nil {
			t.Fatalf("%s: no answer within 5 s of the restart: %v", name, err)
		}
		up, _ := strconv.ParseFloat(strings.Fields(out)[0], 64)
		if up < uptime[name] {
			t.Errorf("%s: uptime %.1f s after the restart, %.1f before: it was started again, its processes lost", name, up, uptime[name])
		}
		t.Logf("%s answered %v after the restart", name, time.Since(start).Round(time.Millisecond))
	}
	for name, c := range containers {
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, _ := exec.Command("runsc", "--root", root, "state", c).Output()
			var st struct{ Status string }
			json.Unmarshal(out, &st)
			_, err := os.Stat(filepath.Join(root, c+"_sandbox:"+c+".cairn-transition"))
			if st.Status == "running" && os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: runsc says %q, marker: %v; want running and settled", name, st.Status, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Pause and resume work again: a checkpoint takes both.
		d.checkpoint(name)
		if got := d.sh(name, "echo alive"); got != "alive\n" {
			t.Fatalf("%s after a checkpoint: %q", name, got)
		}
	}
	if n := strings.Count(d.logText(), "was cut short by the crash"); n != 2 {
		t.Errorf("cairnd logged %d cut-short changes, want 2", n)
	}
}

func sandboxUptime(t *testing.T, d *daemon, name string) float64 {
	t.Helper()
	up, err := strconv.ParseFloat(strings.Fields(d.sh(name, "cat /proc/uptime"))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

// setRunscStatus writes status into container c's runsc state file and
// the marker cairnd writes before a change to making: what a kill of
// cairnd between the control call and the state file's write leaves.
func setRunscStatus(t *testing.T, root, c, status, making string) {
	t.Helper()
	base := filepath.Join(root, c+"_sandbox:"+c)
	raw, err := os.ReadFile(base + ".state")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["status"], _ = json.Marshal(status)
	out, _ := json.Marshal(doc)
	if err := os.WriteFile(base+".state", out, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".cairn-transition", []byte(making+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
