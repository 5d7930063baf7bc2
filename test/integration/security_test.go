package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// impostor builds testdata/impostor (a static binary) once per test.
func impostor(t *testing.T) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(t.TempDir(), "impostor")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/impostor")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the impostor: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// copyIn writes data to path inside sandbox name, executable.
func (d *daemon) copyIn(name, path string, data []byte) {
	d.t.Helper()
	if out, errOut, code := d.cli(string(data), "exec", "-i", name, "--", "sh", "-c", "cat > "+path+"; chmod +x "+path); code != 0 {
		d.t.Fatalf("copy %s into %s: exit %d %s %s", path, name, code, out, errOut)
	}
}

// takeoverReport is what testdata/impostor's takeover mode writes.
type takeoverReport struct {
	UID        int            `json:"uid"`
	DialErrors map[string]int `json:"dial_errors"`
	Connected  int            `json:"connected"`
	Challenges int            `json:"challenges"`
	Verdicts   map[string]int `json:"verdicts"`
	Streams    []string       `json:"streams"`
}

// agentKeyFile reads the host-side key file of sandbox sb.
func (d *daemon) agentKeyFile(sb api.Sandbox) (key string, raw map[string]any) {
	d.t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dataDir, "sandboxes", sb.ID, "agent.key"))
	if err != nil {
		d.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		d.t.Fatal(err)
	}
	key, _ = raw["key"].(string)
	if len(key) != 64 {
		d.t.Fatalf("key file of %s: %s", sb.Name, b)
	}
	return key, raw
}

// A process inside, as nobody or as root, cannot take cairn-init's place:
// nobody cannot even dial the agent socket; root can, but is refused, and
// never sees a request. Meanwhile execs, checkpoints and a memory
// checkpoint (whose broken connection is the moment an impostor would
// wait for) go to the real cairn-init. Nor can root read cairn-init's key
// through /proc or ptrace.
func TestProcessInsideCannotImpersonateTheAgent(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("sec")
	d.copyIn("sec", "/tmp/x", impostor(t))

	// The key is given through a pipe: it is in no file of the sandbox's
	// bundle or console log, and the socket is root's alone.
	key, _ := d.agentKeyFile(sb)
	dir := filepath.Join(d.dataDir, "sandboxes", sb.ID)
	for _, f := range []string{"bundle/config.json", "console.log", "dotcairn/llm.txt"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); strings.Contains(string(b), key) {
			t.Errorf("the agent key is in %s", f)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "dotcairn", "agent.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("agent socket: %v, %v; want mode 0600", fi, err)
	}
	if out := d.sh("sec", "ls -a /.cairn"); strings.Contains(out, "agent.key") {
		t.Errorf("/.cairn shows the key file: %q", out)
	}

	const window = 12 * time.Second
	for _, who := range []struct{ uid, out string }{{"65534", "/tmp/nobody.json"}, {"0", "/tmp/root.json"}} {
		d.mustCLI("exec", "-d", "sec", "--", "/tmp/x", "-uid", who.uid, "-out", who.out, "-for", window.String(), "takeover")
	}
	start := time.Now()
	time.Sleep(500 * time.Millisecond)

	if out, errOut, code := d.cli("TOPSECRET\n", "exec", "-i", "sec", "--", "sh", "-c", "cat > /root/secret"); code != 0 {
		t.Fatalf("exec with stdin: %d %s %s", code, out, errOut)
	}
	if got := d.sh("sec", "cat /root/secret"); got != "TOPSECRET\n" {
		t.Fatalf("/root/secret holds %q", got)
	}
	if ck := d.checkpoint("sec"); ck.Consistency != "frozen" {
		t.Errorf("checkpoint while the impostors try: consistency %q", ck.Consistency)
	}
	d.checkpoint("sec", "--memory")
	t0 := time.Now()
	if got := d.sh("sec", "echo after the memory checkpoint"); got != "after the memory checkpoint\n" {
		t.Errorf("exec after the memory checkpoint: %q", got)
	}
	t.Logf("first exec after the memory checkpoint took %s", time.Since(t0).Round(time.Millisecond))
	var info api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "sec")), &info)
	if !info.AgentConnected {
		t.Errorf("info: agent connected %v", info.AgentConnected)
	}

	time.Sleep(time.Until(start.Add(window + time.Second)))
	reports := map[string]takeoverReport{}
	for _, f := range []string{"/tmp/nobody.json", "/tmp/root.json"} {
		var r takeoverReport
		deadline := time.Now().Add(10 * time.Second)
		for {
			out := d.sh("sec", "cat "+f)
			if err := json.Unmarshal([]byte(out), &r); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no report in %s: %q", f, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		reports[f] = r
		t.Logf("%s: %+v", f, r)
		if len(r.Streams) != 0 {
			t.Errorf("uid %d impersonated the agent: cairnd sent it %q", r.UID, r.Streams)
		}
	}
	nobody, root := reports["/tmp/nobody.json"], reports["/tmp/root.json"]
	if nobody.UID != 65534 || nobody.Connected != 0 || nobody.DialErrors["permission denied"] == 0 {
		t.Errorf("nobody dialled the agent socket: %+v", nobody)
	}
	if root.UID != 0 || root.Connected == 0 || root.Challenges == 0 {
		t.Errorf("root's attempts did not reach cairnd: %+v", root)
	}
	for v := range root.Verdicts {
		// Closed without a verdict: at the cap of handshakes, or by the
		// memory checkpoint.
		if v != "refused bad proof" && !strings.HasPrefix(v, "no verdict") {
			t.Errorf("root's made-up proof got %q", v)
		}
	}

	// Root inside cannot read the key out of cairn-init.
	out := d.sh("sec", "/tmp/x steal")
	t.Logf("steal:\n%s", out)
	for _, attempt := range []string{"environ", "fd0-link", "fd0-open", "mem", "process_vm_readv", "ptrace"} {
		if !strings.Contains(out, attempt+" denied ") {
			t.Errorf("root inside: %s was not denied", attempt)
		}
	}
}

// Each copy of a memory fork answers exec and ends up with a key of its
// own (re-keyed when it connected); after cairnd is killed and started
// again, every sandbox's agent proves itself again and exec works.
func TestMemoryForkCopiesHaveTheirOwnKeys(t *testing.T) {
	d := startDaemon(t)
	parent := d.create("kp")
	var kids []api.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "fork", "kp", "--memory", "--count", "2")), &kids); err != nil || len(kids) != 2 {
		t.Fatalf("fork: %v %+v", err, kids)
	}
	all := append([]api.Sandbox{parent}, kids...)
	keys := map[string]string{}
	for _, sb := range all {
		if got := d.sh(sb.Name, "echo $((6*7))"); got != "42\n" {
			t.Errorf("%s: exec %q", sb.Name, got)
		}
		key, raw := d.agentKeyFile(sb)
		if raw["next"] != nil || raw["inherited"] != nil {
			t.Errorf("%s: key file %v; want one key of its own", sb.Name, raw)
		}
		if other, ok := keys[key]; ok {
			t.Errorf("%s and %s share a key", sb.Name, other)
		}
		keys[key] = sb.Name
	}

	d.kill(syscall.SIGKILL)
	d.start()
	for _, sb := range all {
		if got := d.sh(sb.Name, "echo back"); got != "back\n" {
			t.Errorf("%s after cairnd's restart: %q", sb.Name, got)
		}
		if key, _ := d.agentKeyFile(sb); keys[key] != sb.Name {
			t.Errorf("%s: its key changed across cairnd's restart", sb.Name)
		}
	}
	if strings.Contains(d.logText(), "did not dial back") {
		t.Errorf("recovery restarted a sandbox whose agent should have proved itself:\n%s", d.logText())
	}
}

// What an earlier cairn left cannot prove itself: a memory image without
// a key resumes with its disk alone (a fresh boot), and a running
// sandbox whose cairn-init holds no key cairnd knows is started again
// from its disk by recovery.
func TestAgentsWithoutKeysBootFromDisk(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("old")
	d.sh("old", "echo kept > /root/file")
	d.counter("old") // in /tmp/count, memory alone
	ck := d.checkpoint("old", "--memory")
	image := filepath.Join(d.dataDir, "pool", "memory", ck.GlobalID)
	if err := os.Remove(filepath.Join(image, "agent.key")); err != nil {
		t.Fatalf("the memory image has no key file: %v", err)
	}
	d.mustCLI("fork", "old", "--from-checkpoint", ck.ID, "--name-prefix", "copy")
	if got := d.sh("copy-1", "cat /root/file; ls /tmp/count 2>&1 || true"); !strings.HasPrefix(got, "kept\n") || strings.Contains(got, "/tmp/count\n") {
		t.Errorf("the copy of a memory image without a key: %q; want its disk alone, without the counter", got)
	}
	if !strings.Contains(d.logText(), "memory image from an earlier cairn") {
		t.Error("no warning about the image")
	}

	// A running sandbox whose key cairnd lost, as one started before
	// agents proved themselves.
	if err := os.Remove(filepath.Join(d.dataDir, "sandboxes", sb.ID, "agent.key")); err != nil {
		t.Fatal(err)
	}
	d.kill(syscall.SIGKILL)
	d.start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, code := d.cli("", "exec", "old", "--", "sh", "-c", "cat /root/file; if test -e /tmp/count; then echo counter-alive; fi")
		if code == 0 {
			if out != "kept\n" {
				t.Errorf("after recovery: %q; want a fresh boot of its disk", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old sandbox never came back: exit %d %q %q", code, out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(d.logText(), "did not dial back") {
		t.Error("recovery did not restart the sandbox")
	}
}
