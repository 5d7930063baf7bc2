package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/container"
)

func TestFilesSurviveStopAndStart(t *testing.T) {
	d := startDaemon(t)
	d.create("keep")
	d.sh("keep", "mkdir -p /data && echo 'hello cairn' > /data/note && chmod 600 /data/note")
	d.mustCLI("stop", "keep")
	var sb api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "keep")), &sb)
	if sb.State != api.StateStopped {
		t.Fatalf("after stop: state %q, want stopped", sb.State)
	}
	if code := d.errorCode("exec", "keep", "--", "true"); code != api.CodeNotRunning {
		t.Fatalf("exec in a stopped sandbox: code %s, want %s", code, api.CodeNotRunning)
	}
	d.mustCLI("start", "keep")
	if got := d.sh("keep", "cat /data/note; stat -c %a /data/note"); got != "hello cairn\n600\n" {
		t.Fatalf("after stop/start: %q", got)
	}
	d.mustCLI("restart", "keep")
	if got := d.sh("keep", "cat /data/note"); got != "hello cairn\n" {
		t.Fatalf("after restart: %q", got)
	}
}

func TestExecPassesStdioAndExitCodes(t *testing.T) {
	d := startDaemon(t)
	d.create("io")

	out, errOut, code := d.cli("", "exec", "io", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
	if out != "out\n" || errOut != "err\n" || code != 3 {
		t.Fatalf("exit 3: stdout %q stderr %q code %d", out, errOut, code)
	}
	// stdin with -i, binary-safe and larger than one frame.
	payload := strings.Repeat("0123456789abcdef", 200000) // 3.2 MB
	out, errOut, code = d.cli(payload, "exec", "-i", "io", "--", "/bin/sh", "-c", "cat > /tmp/in; wc -c < /tmp/in; md5sum < /tmp/in")
	if code != 0 {
		t.Fatalf("stdin: exit %d: %s", code, errOut)
	}
	if fields := strings.Fields(out); len(fields) < 2 || fields[0] != strconv.Itoa(len(payload)) {
		t.Fatalf("stdin: sandbox got %q, want %d bytes", out, len(payload))
	}
	// Without -i the command sees no stdin (EOF at once), not the CLI's.
	out, _, _ = d.cli("not for you", "exec", "io", "--", "cat")
	if out != "" {
		t.Fatalf("without -i, cat read %q", out)
	}
	// Killed by a signal: 128+N.
	_, _, code = d.cli("", "exec", "io", "--", "/bin/sh", "-c", "kill -9 $$")
	if code != 137 {
		t.Fatalf("killed by SIGKILL: exit %d, want 137", code)
	}
	// A command that does not exist.
	_, errOut, code = d.cli("", "exec", "io", "--", "/no/such/tool")
	if code != 127 || !strings.Contains(errOut, "S08") {
		t.Fatalf("missing command: exit %d, stderr %q; want 127 and S08", code, errOut)
	}
	// Environment and working directory.
	if got := d.sh("io", "cd /tmp && pwd"); got != "/tmp\n" {
		t.Fatalf("pwd: %q", got)
	}
	out = d.mustCLI("exec", "-e", "GREETING=hi there", "-w", "/etc", "io", "--", "/bin/sh", "-c", `echo "$GREETING" $(pwd)`)
	if out != "hi there /etc\n" {
		t.Fatalf("env/dir: %q", out)
	}
}

func TestExecWithTerminal(t *testing.T) {
	d := startDaemon(t)
	d.create("tty")
	var out bytes.Buffer
	st, err := d.client.Exec(context.Background(), "tty", api.ExecRequest{
		Command: []string{"/bin/sh", "-c", "tty; stty size"}, TTY: true, Rows: 33, Cols: 101,
	}, client.ExecIO{Stdout: &out})
	if err != nil || st.Code != 0 {
		t.Fatalf("tty exec: %v %+v", err, st)
	}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(out.String(), "\r", "")), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "/dev/pts/") || lines[1] != "33 101" {
		t.Fatalf("tty exec printed %q, want a /dev/pts/N and \"33 101\"", out.String())
	}
}

func TestSandboxesAreIsolated(t *testing.T) {
	d := startDaemon(t)
	d.create("alpha")
	d.create("beta")
	d.sh("alpha", "echo secret > /root/alpha-only")
	if out := d.sh("beta", "ls /root; test -e /root/alpha-only && echo visible || echo absent"); !strings.Contains(out, "absent") {
		t.Fatalf("beta sees alpha's file: %q", out)
	}
	if got := d.sh("alpha", "hostname"); got != "alpha\n" {
		t.Fatalf("hostname %q, want alpha", got)
	}
	// Commands never hold CAP_SYS_ADMIN (cairn-init keeps it to itself).
	capBnd := strings.Fields(d.sh("alpha", "grep CapBnd /proc/self/status"))
	if bnd, err := strconv.ParseUint(capBnd[len(capBnd)-1], 16, 64); err != nil || bnd&(1<<21) != 0 {
		t.Fatalf("exec'd command's bounding set %v includes CAP_SYS_ADMIN", capBnd)
	}
	// Loopback only.
	if out := d.sh("beta", "ip -o link 2>/dev/null | wc -l; cat /proc/net/dev | grep -c : "); strings.Contains(out, "eth0") {
		t.Fatalf("sandbox has a network interface: %q", out)
	}
}

// processState returns the state letter and parent pid of pid inside the
// sandbox, from /proc/PID/stat.
func processState(t *testing.T, d *daemon, name string, pid int) (state string, ppid int) {
	t.Helper()
	out, _, code := d.cli("", "exec", name, "--", "cat", "/proc/"+strconv.Itoa(pid)+"/stat")
	if code != 0 {
		return "", 0
	}
	// pid (comm) state ppid …
	rest := out[strings.LastIndex(out, ")")+2:]
	f := strings.Fields(rest)
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid
}

func TestDetachedProcessOutlivesCLIAndDaemon(t *testing.T) {
	d := startDaemon(t)
	d.create("bg")
	out := d.mustCLI("--json", "exec", "-d", "bg", "--", "/bin/sh", "-c", "while true; do date +%s%N >> /tmp/ticks; sleep 0.1; done")
	var started api.ExecStarted
	if err := json.Unmarshal([]byte(out), &started); err != nil || started.PID <= 1 {
		t.Fatalf("exec -d: %q", out)
	}
	time.Sleep(300 * time.Millisecond)
	state, ppid := processState(t, d, "bg", started.PID)
	if state == "" || state == "Z" || ppid != 1 {
		t.Fatalf("detached loop: state %q ppid %d, want running child of PID 1", state, ppid)
	}
	if init := d.sh("bg", "cat /proc/1/cmdline | tr '\\0' ' '"); !strings.Contains(init, "cairn-init") {
		t.Fatalf("PID 1 is %q, want cairn-init", init)
	}

	// Orphans are re-parented to cairn-init and reaped when they exit.
	d.sh("bg", "for i in 1 2 3 4 5; do (sleep 0.2 &) ; done")
	time.Sleep(time.Second)
	zombies := d.sh("bg", "grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l")
	if strings.TrimSpace(zombies) != "0" {
		t.Fatalf("%s zombie processes left", strings.TrimSpace(zombies))
	}

	// cairnd stops (cleanly) and starts again: the loop never stopped and
	// exec works again once cairn-init has dialled back.
	ticks := func() int { n, _ := strconv.Atoi(strings.TrimSpace(d.sh("bg", "wc -l < /tmp/ticks"))); return n }
	before := ticks()
	d.kill(syscall.SIGTERM)
	time.Sleep(500 * time.Millisecond)
	d.start()
	if state, _ := processState(t, d, "bg", started.PID); state == "" || state == "Z" {
		t.Fatalf("after cairnd restart the loop is gone (state %q)", state)
	}
	if after := ticks(); after <= before+2 {
		t.Fatalf("loop did not run while cairnd was down: %d ticks before, %d after", before, after)
	}
}

func TestDaemonKilledWhileSandboxRuns(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("crash")
	d.sh("crash", "echo precious > /root/data && sync")
	d.kill(syscall.SIGKILL)
	d.start()
	var got api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "crash")), &got)
	if got.State != api.StateRunning || got.ID != sb.ID {
		t.Fatalf("after kill -9: %+v, want the same sandbox running", got)
	}
	if out := d.sh("crash", "cat /root/data"); out != "precious\n" {
		t.Fatalf("after kill -9: file holds %q", out)
	}
	list := d.mustCLI("list")
	if !strings.Contains(list, "crash") || !strings.Contains(list, "running") {
		t.Fatalf("list after kill -9:\n%s", list)
	}
}

// A crash can leave a sandbox paused (cairnd killed inside a checkpoint's
// pause window) and its sandbox process can die meanwhile: cairnd must
// still start, and the sandbox come back from its disk.
func TestDaemonStartsWhenAPausedSandboxDied(t *testing.T) {
	d := startDaemon(t)
	d.create("ok")
	d.create("gone")
	d.sh("gone", "echo precious > /root/data && sync")
	var info api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "gone")), &info)
	d.kill(syscall.SIGKILL)
	runscRoot := filepath.Join(d.dataDir, "runsc")
	if out, err := exec.Command("runsc", "--root", runscRoot, "pause", info.Container).CombinedOutput(); err != nil {
		t.Fatalf("runsc pause: %v: %s", err, out)
	}
	if info.Pid <= 0 {
		t.Fatalf("no sandbox pid: %+v", info)
	}
	syscall.Kill(info.Pid, syscall.SIGKILL)
	time.Sleep(200 * time.Millisecond)
	d.start()
	deadline := time.Now().Add(time.Minute)
	for {
		var got api.Sandbox
		json.Unmarshal([]byte(d.mustCLI("--json", "info", "gone")), &got)
		if got.State == api.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox whose process died while paused: %+v", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := d.sh("gone", "cat /root/data"); out != "precious\n" {
		t.Fatalf("after its restart: %q", out)
	}
	if out := d.sh("ok", "echo fine"); out != "fine\n" {
		t.Fatalf("the other sandbox: %q", out)
	}
}

func TestResourceLimits(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("small", "--cpus", "0.5", "--memory", "256M")
	if sb.CPUs != 0.5 || sb.MemoryBytes != 256<<20 {
		t.Fatalf("limits recorded as cpus %g memory %d", sb.CPUs, sb.MemoryBytes)
	}
	// gVisor sizes the sandbox's memory to the limit.
	memTotal := d.sh("small", "grep MemTotal /proc/meminfo")
	f := strings.Fields(memTotal)
	kb, _ := strconv.Atoi(f[1])
	if kb <= 0 || kb > 256*1024 {
		t.Fatalf("MemTotal inside %q, want at most 256 MiB", memTotal)
	}
	// And the host cgroup enforces both, memory with the sentry's headroom
	// above the guest's limit (docs/reliability.md).
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", sb.Container, "memory.limit_in_bytes")); err == nil {
		if strings.TrimSpace(string(b)) != strconv.FormatInt(container.HostMemoryLimit(256<<20), 10) {
			t.Fatalf("host memory cgroup limit %s, want %d", b, container.HostMemoryLimit(256<<20))
		}
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", sb.Container, "cpu.cfs_quota_us")); err == nil {
		if strings.TrimSpace(string(b)) != "50000" {
			t.Fatalf("host cpu quota %s, want 50000", b)
		}
	}
}

func TestBadInputLeavesNothingBehind(t *testing.T) {
	d := startDaemon(t)
	d.create("taken")
	d.mustCLI("stop", "taken")
	pool, containers := d.poolEntries(), d.containers()
	sandboxes := func() string {
		var list []api.Sandbox
		json.Unmarshal([]byte(d.mustCLI("--json", "list")), &list)
		var out []string
		for _, sb := range list {
			out = append(out, sb.ID+" "+sb.Name+" "+sb.State)
		}
		return strings.Join(out, "\n")
	}
	list := sandboxes()

	cases := []struct {
		args []string
		code string
	}{
		{[]string{"create", "Bad_Name"}, api.CodeInvalidName},
		{[]string{"create", "--", "-leading-dash"}, api.CodeInvalidName},
		{[]string{"create", strings.Repeat("a", 64)}, api.CodeInvalidName},
		{[]string{"create", "../../etc"}, api.CodeInvalidName},
		{[]string{"create", "taken"}, api.CodeNameTaken},
		{[]string{"create", "fresh", "--image", "nosuch"}, api.CodeNoImage},
		{[]string{"create", "fresh", "--memory", "lots"}, api.CodeInvalidArgument},
		{[]string{"create", "fresh", "--memory", "1M"}, api.CodeInvalidArgument},
		{[]string{"create", "fresh", "--cpus", "1000"}, api.CodeInvalidArgument},
		{[]string{"info", "ghost"}, api.CodeNoSandbox},
		{[]string{"start", "ghost"}, api.CodeNoSandbox},
		{[]string{"exec", "ghost", "--", "true"}, api.CodeNoSandbox},
		{[]string{"delete", "ghost"}, api.CodeNoSandbox},
		{[]string{"stop", "taken"}, api.CodeNotRunning},
	}
	for _, c := range cases {
		if got := d.errorCode(c.args...); got != c.code {
			t.Errorf("cairn %v: code %s, want %s", c.args, got, c.code)
		}
	}
	d.mustCLI("start", "taken")
	if got := d.errorCode("start", "taken"); got != api.CodeAlreadyRunning {
		t.Errorf("second start: code %s, want %s", got, api.CodeAlreadyRunning)
	}
	d.mustCLI("stop", "taken")

	// The human form names the code too.
	_, errOut, code := d.cli("", "info", "ghost")
	if code == 0 || !strings.HasPrefix(errOut, "error S01: ") {
		t.Errorf("human error: exit %d, stderr %q", code, errOut)
	}
	if got := d.poolEntries(); !reflect.DeepEqual(got, pool) {
		t.Errorf("pool changed by failed requests: %v, was %v", got, pool)
	}
	if got := d.containers(); !reflect.DeepEqual(got, containers) {
		t.Errorf("runsc containers changed by failed requests: %v, was %v", got, containers)
	}
	if got := sandboxes(); got != list {
		t.Errorf("sandbox list changed by failed requests:\n%s\nwas\n%s", got, list)
	}
	// The API itself refuses malformed requests with the same shape.
	ctx := context.Background()
	if _, err := d.client.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "x", Image: strings.Repeat("y", 10)}); client.CodeOf(err) != api.CodeNoImage {
		t.Errorf("API create with unknown image: %v", err)
	}
}

func TestDeleteRemovesEverything(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("gone")
	d.sh("gone", "echo x > /root/x")
	d.mustCLI("delete", "gone")
	if slices.Contains(d.poolEntries(), sb.ID) {
		t.Fatalf("root subvolume %s left in the pool", sb.ID)
	}
	for _, c := range d.containers() {
		if strings.HasPrefix(c, sb.ID) {
			t.Fatalf("container %s of the sandbox left in runsc", c)
		}
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "sandboxes", sb.ID)); !os.IsNotExist(err) {
		t.Fatalf("host directory of %s left: %v", sb.ID, err)
	}
	if code := d.errorCode("info", "gone"); code != api.CodeNoSandbox {
		t.Fatalf("info after delete: %s", code)
	}
	// The name is free again.
	d.create("gone")
	if out := d.sh("gone", "test -e /root/x && echo old || echo new"); out != "new\n" {
		t.Fatalf("a new sandbox with a deleted one's name sees its files: %q", out)
	}
}

func TestDebianImageBuiltOnceAndRunsApt(t *testing.T) {
	d := startDaemon(t)
	d.create("deb1", "--image", "debian")
	out := d.sh("deb1", "dpkg -l | head -n 8; apt-get --version | head -n 1")
	if !strings.Contains(out, "ii ") || !strings.Contains(out, "apt ") {
		t.Fatalf("dpkg/apt inside debian: %q", out)
	}
	// The management socket with curl, as an agent inside would use it:
	// NDJSON progress ending in a complete event with the checkpoint.
	out = d.sh("deb1", `curl -sS --unix-socket /.cairn/api.sock -X POST -d '{"comment":"by curl"}' http://cairn/v1/checkpoint`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last struct {
		Type string         `json:"type"`
		Data api.Checkpoint `json:"data"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || len(lines) < 2 || last.Type != api.EventComplete || last.Data.Comment != "by curl" {
		t.Fatalf("curl checkpoint from inside: %q", out)
	}
	img := filepath.Join(d.dataDir, "pool", "images", "debian")
	st1, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	// A second sandbox reuses the built image: no build, same subvolume.
	_, errOut, code := d.cli("", "create", "deb2", "--image", "debian")
	if code != 0 {
		t.Fatalf("second debian sandbox: %s", errOut)
	}
	if strings.Contains(errOut, "Building image") {
		t.Fatalf("second create rebuilt the image:\n%s", errOut)
	}
	st2, _ := os.Stat(img)
	if !st2.ModTime().Equal(st1.ModTime()) {
		t.Fatal("image subvolume changed by the second create")
	}
	var imgs []api.Image
	json.Unmarshal([]byte(d.mustCLI("--json", "image", "list")), &imgs)
	for _, i := range imgs {
		if i.Name == "debian" && !i.Ready {
			t.Fatalf("image list says debian is not ready: %+v", imgs)
		}
	}
	// The image itself is read-only: a sandbox's writes never reach it.
	d.sh("deb2", "echo changed > /etc/motd")
	if b, _ := os.ReadFile(filepath.Join(img, "etc/motd")); strings.Contains(string(b), "changed") {
		t.Fatal("a sandbox write reached the image")
	}
}
