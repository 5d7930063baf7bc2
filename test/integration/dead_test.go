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

// info returns the sandbox called name as `cairn info --json` shows it.
func (d *daemon) info(name string) api.Sandbox {
	d.t.Helper()
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "info", name)), &sb); err != nil {
		d.t.Fatalf("info %s: %v", name, err)
	}
	return sb
}

// waitState waits up to within for sandbox name to be in state, and
// returns it as it is then.
func (d *daemon) waitState(name, state string, within time.Duration) api.Sandbox {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		sb := d.info(name)
		if sb.State == state {
			return sb
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("sandbox %s is %s after %v, want %s: %+v", name, sb.State, within, state, sb)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killSandboxProcess sends SIGKILL to the runsc sandbox process of sandbox
// sb, whose host pid runsc reported (info's pid), after checking that the
// pid is that process.
func killSandboxProcess(t *testing.T, sb api.Sandbox) {
	t.Helper()
	if sb.Pid <= 0 {
		t.Fatalf("sandbox %s has no pid: %+v", sb.Name, sb)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(sb.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if args[0] != "runsc-sandbox" || args[len(args)-1] != sb.Container {
		t.Fatalf("pid %d is not the runsc-sandbox of %s: %q", sb.Pid, sb.Container, args)
	}
	if err := syscall.Kill(sb.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// A process that takes more than the sandbox's memory is killed inside it,
// as Linux's OOM killer would, and the sandbox lives on; the guest kernel
// knows the limit, and /dev/shm and /tmp (each a tmpfs) cannot hold more
// than half of it.
func TestMemoryLimitKillsTheProcessNotTheSandbox(t *testing.T) {
	d := startDaemon(t)
	d.create("small", "--memory", "256M")
	if out := d.sh("small", "grep MemTotal /proc/meminfo"); !strings.Contains(out, strconv.Itoa(256*1024)+" kB") {
		t.Fatalf("MemTotal inside: %q, want 256 MiB", out)
	}
	for _, dir := range []string{"/dev/shm", "/tmp"} {
		if f := strings.Fields(d.sh("small", "df -k "+dir+" | tail -1")); len(f) < 2 || f[1] != strconv.Itoa(128*1024) {
			t.Fatalf("%s size: %q, want 128 MiB", dir, f)
		}
	}
	// Filling /tmp fails with ENOSPC at half the limit, and the sandbox
	// (this very shell) goes on; gVisor's own /tmp was sized after the
	// host's memory, and once full every process was killed in turn.
	if out := d.sh("small", "dd if=/dev/zero of=/tmp/big bs=1M count=400 2>&1; echo alive; rm /tmp/big"); !strings.Contains(out, "No space left") || !strings.HasSuffix(out, "alive\n") {
		t.Fatalf("filling /tmp: %q, want ENOSPC and the shell alive", out)
	}
	before := d.info("small")

	// awk doubles a string until it holds 400 MiB (and its copy).
	_, errOut, code := d.cli("", "exec", "small", "--", "awk", `BEGIN{s="xxxxxxxxxxxxxxxx"; while(length(s)<400000000) s=s s; print length(s)}`)
	if code != 137 {
		t.Fatalf("exec of a 400 MiB allocation exited %d, want 137 (SIGKILL)\nstderr: %s", code, errOut)
	}
	if out := d.sh("small", "echo alive"); out != "alive\n" {
		t.Fatalf("after the OOM kill: %q", out)
	}
	after := d.info("small")
	if after.State != api.StateRunning || after.Pid != before.Pid || after.LastCrash != nil {
		t.Fatalf("the sandbox did not live on: before %+v, after %+v", before, after)
	}
	if after.LastOOMKill == nil || !strings.Contains(after.LastOOMKill.What, "(awk)") || time.Since(after.LastOOMKill.At) > time.Minute {
		t.Fatalf("info's last OOM kill: %+v, want awk just now", after.LastOOMKill)
	}
	if out := d.mustCLI("info", "small"); !strings.Contains(out, "last OOM kill") || !strings.Contains(out, "(awk)") {
		t.Fatalf("cairn info does not show the OOM kill:\n%s", out)
	}
	if log := d.logText(); !strings.Contains(log, "out of memory") {
		t.Fatalf("cairnd's log does not mention the OOM kill:\n%s", log)
	}
	// Memory taken inside one system call outruns cairn-init's look every
	// 10 ms and the host's headroom: the host cgroup waits instead of
	// killing, cairnd raises it for the burst and sets it back after, and
	// the sandbox lives on.
	limitFile := filepath.Join("/sys/fs/cgroup/memory", after.Container, "memory.limit_in_bytes")
	usual, err := os.ReadFile(limitFile)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code = d.cli("", "exec", "small", "--", "dd", "if=/dev/zero", "of=/dev/null", "bs=400M", "count=1")
	if code != 0 && code != 137 {
		t.Fatalf("dd of 400 MiB in one read: exit %d: %s", code, errOut)
	}
	if out := d.sh("small", "echo alive"); out != "alive\n" {
		t.Fatalf("after the burst: %q", out)
	}
	if burst := d.info("small"); burst.State != api.StateRunning || burst.Pid != before.Pid || burst.LastCrash != nil {
		t.Fatalf("the sandbox did not live through the burst: %+v", burst)
	}
	if !strings.Contains(d.logText(), "a burst past its limit within one system call") {
		t.Fatalf("cairnd did not see the burst:\n%s", d.logText())
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if now, _ := os.ReadFile(limitFile); string(now) == string(usual) {
			break
		}
		if time.Now().After(deadline) {
			now, _ := os.ReadFile(limitFile)
			t.Fatalf("host limit %s 10 s after the burst, want it back at %s", now, usual)
		}
	}

	// A burst past the guard's cap (twice the host limit) is the host's
	// to end: the sandbox is crashed, with the reason, and its policy
	// brings it back.
	d.cli("", "exec", "small", "--", "dd", "if=/dev/zero", "of=/dev/null", "bs=1G", "count=1")
	crashed := d.waitState("small", api.StateCrashed, 10*time.Second)
	if crashed.LastCrash == nil || !strings.Contains(crashed.LastCrash.What, "out-of-memory") {
		t.Fatalf("crashed by a burst past the cap without the reason: %+v", crashed.LastCrash)
	}
	d.waitState("small", api.StateRunning, 30*time.Second)

	// And its event stream: the OOM kill of awk, then the crash of the
	// burst past the cap and the restart.
	var seen []string
	for _, ev := range d.events("small") {
		if ev.Type == api.ActivityOOMKill {
			seen = append(seen, ev.What)
		} else {
			seen = append(seen, ev.Type+":"+ev.State)
		}
	}
	got := strings.Join(seen, " | ")
	if !strings.Contains(got, "(awk)") || !strings.Contains(got, "crashed: | state:crashed | state:running") || strings.Index(got, "(awk)") > strings.Index(got, "crashed:") {
		t.Fatalf("events %s: want the OOM kill of awk, then the crash and the restart", got)
	}
	if out := d.mustCLI("events", "small"); !strings.Contains(out, "oom_kill") || !strings.Contains(out, "(awk)") {
		t.Fatalf("cairn events does not show the OOM kill:\n%s", out)
	}
}

// events returns the sandbox's event stream as `cairn events --json` prints it.
func (d *daemon) events(name string) []api.SandboxActivity {
	d.t.Helper()
	var evs []api.SandboxActivity
	for _, line := range strings.Split(strings.TrimSpace(d.mustCLI("--json", "events", name)), "\n") {
		var ev api.SandboxActivity
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			d.t.Fatalf("events of %s: %q: %v", name, line, err)
		}
		evs = append(evs, ev)
	}
	if len(evs) == 0 {
		d.t.Fatalf("no events of %s", name)
	}
	return evs
}

// A sandbox whose runsc-sandbox process is killed is crashed at once,
// with the reason, and with the default policy (on-failure) runs again
// from its disk.
func TestKilledSandboxRestartsFromItsDisk(t *testing.T) {
	d := startDaemon(t)
	d.create("phoenix")
	d.sh("phoenix", "echo precious > /root/data && sync")
	before := d.info("phoenix")
	if before.Restart != api.RestartOnFailure {
		t.Fatalf("default restart policy %q, want on-failure", before.Restart)
	}
	// Someone follows its events from before the kill.
	follow := exec.Command(filepath.Join(binDir, "cairn"), "--socket", d.socket, "--json", "events", "phoenix", "--follow")
	stdout, _ := follow.StdoutPipe()
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { follow.Process.Kill(); follow.Wait() }()
	followed := make(chan api.SandboxActivity, 100)
	go func() {
		dec := json.NewDecoder(stdout)
		for {
			var ev api.SandboxActivity
			if dec.Decode(&ev) != nil {
				close(followed)
				return
			}
			followed <- ev
		}
	}()
	killSandboxProcess(t, before)
	crashed := d.waitState("phoenix", api.StateCrashed, 2*time.Second)
	if crashed.LastCrash == nil || !strings.Contains(crashed.LastCrash.What, "runsc-sandbox") {
		t.Fatalf("crashed without a reason: %+v", crashed.LastCrash)
	}
	back := d.waitState("phoenix", api.StateRunning, 30*time.Second)
	if back.Pid == before.Pid || back.ID != before.ID {
		t.Fatalf("running again, but as %+v (before %+v)", back, before)
	}
	if out := d.sh("phoenix", "cat /root/data"); out != "precious\n" {
		t.Fatalf("after the restart the file holds %q", out)
	}
	if back.LastCrash == nil {
		t.Fatalf("the last crash is gone after the restart: %+v", back)
	}
	// The follower saw the crash, with its reason, then the sandbox run
	// again, as they happened.
	var seen []string
	deadline := time.After(10 * time.Second)
	for !strings.Contains(strings.Join(seen, " "), "crashed state:crashed state:running") {
		select {
		case ev, ok := <-followed:
			if !ok {
				t.Fatalf("the follow ended; saw %v", seen)
			}
			if ev.Type == api.ActivityCrashed && !strings.Contains(ev.What, "runsc-sandbox") {
				t.Errorf("crash event without its reason: %+v", ev)
			}
			seen = append(seen, ev.Type+map[bool]string{true: ":" + ev.State}[ev.State != ""])
		case <-deadline:
			t.Fatalf("followed events %v, want the crash, then running", seen)
		}
	}
}

// With --restart no a killed sandbox stays crashed: exec fails at once
// with S10, the interval scheduler skips it quietly, stop makes it
// stopped and start runs it again, and delete takes the final checkpoint
// from its disk and leaves nothing else.
func TestKilledSandboxWithRestartNoStaysCrashed(t *testing.T) {
	d := startDaemon(t)
	created := time.Now()
	d.create("dead", "--restart", "no", "--auto-checkpoint", "60s")
	d.sh("dead", "echo precious > /root/data && sync")
	killSandboxProcess(t, d.info("dead"))
	d.waitState("dead", api.StateCrashed, 2*time.Second)

	t0 := time.Now()
	if code := d.errorCode("exec", "dead", "--", "true"); code != api.CodeSandboxDown {
		t.Fatalf("exec in a crashed sandbox: %s, want %s", code, api.CodeSandboxDown)
	}
	if took := time.Since(t0); took > 5*time.Second {
		t.Fatalf("exec in a crashed sandbox took %v to fail", took)
	}
	_, errOut, _ := d.cli("", "exec", "dead", "--", "true")
	if !strings.Contains(errOut, "crashed") || !strings.Contains(errOut, "cairn start dead") {
		t.Fatalf("exec's error does not say why: %q", errOut)
	}

	// The disk changed and the interval passes: the scheduler skips the
	// crashed sandbox, and says so in status, not in the log.
	for time.Since(created) < 75*time.Second {
		time.Sleep(time.Second)
	}
	if sb := d.info("dead"); sb.State != api.StateCrashed || !strings.Contains(sb.AutoCheckpointNote, "crashed") {
		t.Fatalf("after the interval: %+v, want crashed with a note that the interval checkpoint was skipped", sb)
	}
	if strings.Contains(d.logText(), `msg="interval checkpoint"`) {
		t.Fatalf("the scheduler logged errors for the crashed sandbox:\n%s", d.logText())
	}

	d.mustCLI("stop", "dead")
	if sb := d.info("dead"); sb.State != api.StateStopped {
		t.Fatalf("stop of a crashed sandbox: %s", sb.State)
	}
	d.mustCLI("start", "dead")
	if out := d.sh("dead", "cat /root/data"); out != "precious\n" {
		t.Fatalf("after start: %q", out)
	}

	killSandboxProcess(t, d.info("dead"))
	d.waitState("dead", api.StateCrashed, 2*time.Second)
	d.mustCLI("delete", "dead")
	if out, _, code := d.cli("", "info", "dead"); code == 0 {
		t.Fatalf("info after delete: %s", out)
	}
	var snaps []api.Checkpoint
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "snapshot", "list")), &snaps); err != nil {
		t.Fatal(err)
	}
	final := false
	for _, ck := range snaps {
		if ck.Sandbox == "dead" && ck.Trigger == api.TriggerDelete {
			final = true
		}
	}
	if !final {
		t.Fatalf("no final checkpoint (trigger delete) of the crashed sandbox: %+v", snaps)
	}
	if got := d.containers(); len(got) != 0 {
		t.Fatalf("containers left: %v", got)
	}
	if got := d.poolEntries(); len(got) != 0 {
		t.Fatalf("sandbox roots left: %v", got)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "sandboxes")); err == nil {
		if e, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes")); len(e) != 0 {
			t.Fatalf("sandbox directories left: %v", e)
		}
	}
}

// Sandboxes that died while cairnd was down: at its start one with
// --restart no is crashed, one with the default policy runs again.
func TestDaemonStartFindsDeadSandboxes(t *testing.T) {
	d := startDaemon(t)
	d.create("again")
	d.create("stays", "--restart", "no")
	d.sh("again", "echo precious > /root/data && sync")
	again, stays := d.info("again"), d.info("stays")
	d.kill(syscall.SIGKILL)
	killSandboxProcess(t, again)
	killSandboxProcess(t, stays)
	time.Sleep(300 * time.Millisecond)
	d.start()
	sb := d.waitState("stays", api.StateCrashed, 5*time.Second)
	if sb.LastCrash == nil || sb.LastCrash.What == "" {
		t.Fatalf("crashed with reason %+v", sb.LastCrash)
	}
	d.waitState("again", api.StateRunning, 30*time.Second)
	if out := d.sh("again", "cat /root/data"); out != "precious\n" {
		t.Fatalf("after its restart: %q", out)
	}
}
