package integration

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// pgrep lists the pids inside a sandbox whose command line contains s.
func (d *daemon) pgrep(name, s string) []string {
	d.t.Helper()
	// The pattern is written split by an empty quote ('d''ate…'), so that
	// the scanning shell's own command line does not match it.
	pat := "'" + s[:1] + "''" + s[1:] + "'"
	out := d.sh(name, `for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in *`+pat+`*) echo ${p#/proc/};; esac; done`)
	return strings.Fields(out)
}

func TestCheckpointAndRestoreFromInside(t *testing.T) {
	d := startDaemon(t)
	d.create("agent")
	// A service, defined on disk: it starts at every boot.
	d.sh("agent", `mkdir -p /etc/cairn/services && cat > /etc/cairn/services/ticker.json <<'EOF'
{"name":"ticker","cmd":["/bin/sh","-c","while true; do date >> /root/ticks; sleep 1; done"],"restart":"always"}
EOF`)
	d.mustCLI("restart", "agent")
	if pids := d.pgrep("agent", "date >> /root/ticks"); len(pids) != 1 {
		t.Fatalf("service not running after restart: %v", pids)
	}
	var svcs []api.ServiceStatus
	json.Unmarshal([]byte(d.mustCLI("--json", "services", "agent")), &svcs)
	if len(svcs) != 1 || svcs[0].Name != "ticker" || svcs[0].State != api.ServiceRunning {
		t.Fatalf("cairn services: %+v", svcs)
	}
	time.Sleep(1500 * time.Millisecond)
	if logs := d.mustCLI("logs", "agent", "ticker"); !strings.Contains(logs, "started pid") {
		t.Fatalf("cairn logs: %q", logs)
	}

	d.sh("agent", "echo precious > /root/data")
	out := d.sh("agent", "cairn-env checkpoints create --comment 'from inside'")
	if !strings.HasPrefix(out, "Checkpoint created: v") {
		t.Fatalf("cairn-env create: %q", out)
	}
	id := strings.TrimSpace(strings.TrimPrefix(out, "Checkpoint created: "))
	if list := d.sh("agent", "cairn-env checkpoints list"); !strings.Contains(list, id) || !strings.Contains(list, "from inside") {
		t.Fatalf("cairn-env list: %q", list)
	}
	d.sh("agent", "echo broken > /root/data")
	d.mustCLI("exec", "-d", "agent", "--", "sleep", "1000") // by hand: must not come back
	// The restore ends the caller too; it still completes.
	out, _, _ = d.cli("", "exec", "agent", "--", "cairn-env", "checkpoints", "restore", id)
	if !strings.Contains(out, "Restore to "+id+" started") {
		t.Fatalf("cairn-env restore: %q", out)
	}
	// exec waits for the restore, then runs on the restored disk.
	if got := d.sh("agent", "cat /root/data"); got != "precious\n" {
		t.Fatalf("after restore from inside: %q", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(d.pgrep("agent", "date >> /root/ticks")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("service not running again after the restore")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if pids := d.pgrep("agent", "sleep 1000"); len(pids) != 0 {
		t.Fatalf("a process started by hand came back after a disk restore: %v", pids)
	}
	if code := d.errorCode("logs", "agent", "nosuch"); code != api.CodeNoService {
		t.Fatalf("logs of an unknown service: %s", code)
	}
}

func TestSandboxSocketIsScopedToItsSandbox(t *testing.T) {
	d := startDaemon(t)
	d.create("a")
	d.create("b")
	bck := d.checkpoint("b", "--name", "b-secret")
	d.checkpoint("b")
	for _, ref := range []string{bck.GlobalID, "b-secret", "b/v0", "v1"} {
		_, errOut, code := d.cli("", "exec", "a", "--", "cairn-env", "checkpoints", "info", ref)
		if code == 0 || !strings.Contains(errOut, "K08") {
			t.Errorf("sandbox a could read b's checkpoint %q: exit %d %q", ref, code, errOut)
		}
		_, errOut, code = d.cli("", "exec", "a", "--", "cairn-env", "checkpoints", "restore", ref)
		if code == 0 || !strings.Contains(errOut, "K08") {
			t.Errorf("sandbox a could restore b's checkpoint %q: exit %d %q", ref, code, errOut)
		}
	}
	if out := d.sh("a", "cairn-env checkpoints list --include-auto --json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("sandbox a lists checkpoints that are not its own: %s", out)
	}
	// Creating from a makes a checkpoint of a, never of b.
	d.sh("a", "cairn-env checkpoints create")
	if n := len(d.checkpoints("b")); n != 2 {
		t.Fatalf("b has %d checkpoints after a checkpointed itself, want 2", n)
	}
	if n := len(d.checkpoints("a")); n != 1 {
		t.Fatalf("a has %d checkpoints, want 1", n)
	}
}

func TestBrowsableCheckpoints(t *testing.T) {
	d := startDaemon(t)
	d.create("br")
	var ids []string
	for i := 0; i < 7; i++ {
		d.sh("br", "echo "+string(rune('a'+i))+" > /root/state")
		ids = append(ids, d.checkpoint("br").ID)
	}
	want := append([]string(nil), ids[2:]...)
	sort.Strings(want)
	// The directory is refreshed right after each checkpoint, off its path.
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		got = strings.Fields(d.sh("br", "ls /.cairn/checkpoints"))
		if strings.Join(got, " ") == strings.Join(want, " ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/.cairn/checkpoints holds %v, want the five newest %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, id := range ids[2:] {
		if out := d.sh("br", "cat /.cairn/checkpoints/"+id+"/root/state"); out != string(rune('a'+i+2))+"\n" {
			t.Fatalf("/.cairn/checkpoints/%s/root/state = %q", id, out)
		}
	}
	_, errOut, code := d.cli("", "exec", "br", "--", "/bin/sh", "-c", "echo x > /.cairn/checkpoints/"+ids[6]+"/root/state")
	if code == 0 || !strings.Contains(errOut, "Read-only file system") {
		t.Fatalf("write into a browsable checkpoint: exit %d %q, want EROFS", code, errOut)
	}
	// Deleting one makes room for the next newest.
	d.mustCLI("checkpoint", "delete", "br", ids[6])
	got = strings.Fields(d.sh("br", "ls /.cairn/checkpoints"))
	if len(got) != 5 || got[0] != ids[1] {
		t.Fatalf("after a delete: %v, want %v..%v", got, ids[1], ids[5])
	}
	if out := d.sh("br", "head -n 3 /.cairn/llm.txt"); !strings.Contains(out, "cairn") {
		t.Fatalf("llm.txt: %q", out)
	}
	if out, _, code := d.cli("", "exec", "br", "--", "/bin/sh", "-c", "echo x >> /.cairn/llm.txt"); code == 0 {
		t.Fatalf("llm.txt is writable: %q", out)
	}
}

// The management socket answers bad requests with the one error shape and
// keeps serving (here reached from the host side of the same socket).
func TestSandboxSocketBadInput(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("bad")
	d.checkpoint("bad")
	sock := filepath.Join(d.dataDir, "sandboxes", sb.ID, "dotcairn", "api.sock")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	call := func(method, path, body string) (int, api.ErrorInfo) {
		req, _ := http.NewRequest(method, "http://cairn"+path, strings.NewReader(body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var eb api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		return resp.StatusCode, eb.Error
	}
	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"DELETE", "/v1/checkpoints", "", 405, api.CodeInvalidRequest},
		{"POST", "/v1/checkpoint", "{nope", 400, api.CodeInvalidRequest},
		{"GET", "/v1/checkpoints/v42", "", 404, api.CodeNoCheckpoint},
		{"POST", "/v1/checkpoints/v42/restore", "", 404, api.CodeNoCheckpoint},
		{"GET", "/v1/sandboxes", "", 404, api.CodeInvalidRequest},
		{"POST", "/v1/checkpoints/v0/restore", `{"as":"escape"}`, 400, api.CodeInvalidRequest},
		{"POST", "/v1/checkpoint", `{"memory":true}`, 400, api.CodeInvalidArgument},
		{"POST", "/v1/checkpoint", `{"name":"golden"}`, 400, api.CodeInvalidArgument},
	}
	for _, c := range cases {
		if status, e := call(c.method, c.path, c.body); status != c.status || e.Code != c.code {
			t.Errorf("%s %s: %d %+v, want %d %s", c.method, c.path, status, e, c.status, c.code)
		}
	}
	// A restore while another runs is refused.
	if status, _ := call("POST", "/v1/checkpoints/v0/restore", ""); status != http.StatusAccepted {
		t.Fatalf("restore: %d", status)
	}
	if status, e := call("POST", "/v1/checkpoints/v0/restore", ""); status != http.StatusConflict || e.Code != api.CodeSandboxBusy {
		t.Errorf("second restore: %d %+v, want 409 S05", status, e)
	}
	if out := d.sh("bad", "echo alive"); out != "alive\n" {
		t.Fatalf("after bad requests: %q", out)
	}
}
