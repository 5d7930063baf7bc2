package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/httpedge"
)

// sockProgram is a static program run inside a sandbox: "flood SECONDS"
// opens connections to /.cairn/api.sock as fast as it can for that long,
// keeping every one the server does not close at once, and prints what
// it got; "req METHOD PATH BODY" makes one request (Accept:
// application/json) and prints the status and the body.
const sockProgram = `package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

const sock = "/.cairn/api.sock"

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func main() {
	switch os.Args[1] {
	case "flood":
		secs, _ := strconv.Atoi(os.Args[2])
		end := time.Now().Add(time.Duration(secs) * time.Second)
		var held []net.Conn
		refused, first, dialErrs := 0, -1, 0
		// In batches: every connection of a batch is open before any is
		// looked at, so the first batch shows the cap exactly.
		for time.Now().Before(end) {
			var batch []net.Conn
			for i := 0; i < 64; i++ {
				c, err := net.Dial("unix", sock)
				if err != nil {
					dialErrs++
					continue
				}
				batch = append(batch, c)
			}
			deadline, n := time.Now().Add(300*time.Millisecond), 0
			for _, c := range batch {
				// A deadline already past would fail the read before it
				// sees an EOF that is there.
				c.SetReadDeadline(later(deadline, time.Now().Add(20*time.Millisecond)))
				_, err := c.Read(make([]byte, 1))
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					held = append(held, c)
					n++
					continue
				}
				c.Close()
				refused++
			}
			if first < 0 {
				first = n
			}
		}
		fmt.Printf("held=%d refused=%d first=%d dialerrs=%d\n", len(held), refused, first, dialErrs)
	case "req":
		c, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(1)
		}
		body := os.Args[4]
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: cairn\r\nAccept: application/json\r\nContent-Length: %d\r\n\r\n%s", os.Args[2], os.Args[3], len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			fmt.Println("response:", err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(b)))
	}
}
`

// installSockProgram builds sockProgram (static) and copies it into
// sandbox name as /tmp/sockprog.
func (d *daemon) installSockProgram(name string) {
	d.t.Helper()
	dir := d.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(sockProgram), 0o644); err != nil {
		d.t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module sockprog\n\ngo 1.22\n"), 0o644)
	build := exec.Command("go", "build", "-o", "sockprog", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		d.t.Fatalf("build the in-sandbox program: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "sockprog"))
	if err != nil {
		d.t.Fatal(err)
	}
	if out, errOut, code := d.cli(string(bin), "exec", "-i", name, "--", "sh", "-c", "cat > /tmp/sockprog && chmod +x /tmp/sockprog"); code != 0 {
		d.t.Fatalf("copy the program in: exit %d %s %s", code, out, errOut)
	}
}

// fds counts cairnd's open file descriptors.
func (d *daemon) fds() int {
	d.t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid))
	if err != nil {
		d.t.Fatal(err)
	}
	return len(ents)
}

// timed runs the CLI and returns how long it took, failing the test
// unless it succeeds.
func (d *daemon) timed(args ...string) time.Duration {
	d.t.Helper()
	start := time.Now()
	d.mustCLI(args...)
	return time.Since(start)
}

// One sandbox that opens connections to its socket as fast as it can gets
// SandboxMaxConns of them; the rest are closed at once. Meanwhile cairnd
// keeps few descriptors and answers everyone else as usual.
func TestSandboxSocketFloodIsBounded(t *testing.T) {
	d := startDaemon(t)
	d.create("flood")
	d.create("other")
	d.installSockProgram("flood")

	// The usual times, before.
	before := map[string]time.Duration{
		"list":       d.timed("list"),
		"exec":       d.timed("exec", "other", "--", "true"),
		"checkpoint": d.timed("checkpoint", "create", "other"),
	}
	fdsBefore := d.fds()

	const floodFor = 20
	d.mustCLI("exec", "-d", "flood", "--", "sh", "-c", fmt.Sprintf("/tmp/sockprog flood %d > /root/flood.out 2>&1", floodFor))
	time.Sleep(2 * time.Second) // under way
	maxFDs := 0
	during := map[string]time.Duration{}
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); {
		maxFDs = max(maxFDs, d.fds())
		during["list"] = max(during["list"], d.timed("list"))
		maxFDs = max(maxFDs, d.fds())
		during["exec"] = max(during["exec"], d.timed("exec", "other", "--", "true"))
		maxFDs = max(maxFDs, d.fds())
		during["checkpoint"] = max(during["checkpoint"], d.timed("checkpoint", "create", "other"))
	}
	t.Logf("cairnd fds: %d before, at most %d during the flood", fdsBefore, maxFDs)
	for what, took := range during {
		t.Logf("%s: %v before, at most %v during the flood", what, before[what], took)
		// Generous: the machine is shared; without the cap these time out.
		if took > before[what]+10*time.Second {
			t.Errorf("%s took %v during the flood (%v before)", what, took, before[what])
		}
	}
	// The flood's connections, a few for the CLI's own, and what the
	// checkpoints and execs open for a moment.
	if maxFDs > fdsBefore+httpedge.SandboxMaxConns+40 {
		t.Errorf("cairnd had %d descriptors open during the flood, %d before: the cap of %d connections did not hold",
			maxFDs, fdsBefore, httpedge.SandboxMaxConns)
	}

	var out string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out = d.sh("flood", "cat /root/flood.out 2>/dev/null || true")
		if strings.HasPrefix(out, "held=") || time.Now().After(deadline) {
			break
		}
	}
	var held, refused, first, dialErrs int
	if _, err := fmt.Sscanf(out, "held=%d refused=%d first=%d dialerrs=%d", &held, &refused, &first, &dialErrs); err != nil {
		t.Fatalf("flood output %q: %v", out, err)
	}
	t.Logf("flood: %s", strings.TrimSpace(out))
	if first != httpedge.SandboxMaxConns || refused < 1000 {
		t.Errorf("flood: the first batch kept %d connections, want %d; %d refused", first, httpedge.SandboxMaxConns, refused)
	}
	// Refusals are logged, a line at most every 10 s.
	logb, _ := os.ReadFile(filepath.Join(d.dataDir, "cairnd.log"))
	if n := strings.Count(string(logb), "connections refused: too many open"); n < 1 || n > floodFor/10+2 {
		t.Errorf("%d log lines about refused connections in %d s, want 1 to %d", n, floodFor, floodFor/10+2)
	}
	// And the socket serves again.
	if out := d.sh("flood", "cairn-env checkpoints list"); strings.Contains(out, "error") {
		t.Errorf("after the flood: %q", out)
	}
}

// sockClient is an HTTP client of a sandbox's management socket, from the
// host side: the server cannot tell it from a process inside.
func (d *daemon) sockClient(id string) func(method, path, body string) (int, []byte) {
	sock := filepath.Join(d.dataDir, "sandboxes", id, "dotcairn", "api.sock")
	return d.httpClient(sock)
}

func (d *daemon) httpClient(sock string) func(method, path, body string) (int, []byte) {
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	return func(method, path, body string) (int, []byte) {
		d.t.Helper()
		req, _ := http.NewRequest(method, "http://cairn"+path, strings.NewReader(body))
		req.Header.Set("Accept", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			d.t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
}

func codeOf(b []byte) string {
	var eb api.ErrorBody
	json.Unmarshal(b, &eb)
	return eb.Error.Code
}

// opID makes a request with c that starts an operation and returns its id.
func opID(t *testing.T, c func(method, path, body string) (int, []byte), method, path, body string) string {
	t.Helper()
	status, b := c(method, path, body)
	var op api.Operation
	if err := json.Unmarshal(b, &op); status != http.StatusAccepted || err != nil || op.ID == "" {
		t.Fatalf("want 202 and an operation, got %d %s", status, b)
	}
	return op.ID
}

// Sandbox a's socket knows nothing of sandbox b: neither its operations,
// nor its checkpoints by id, global id or snapshot name, nor the
// operations started from the host.
func TestSandboxSocketScopesOperations(t *testing.T) {
	d := startDaemon(t)
	a, b := d.create("a"), d.create("b")
	sockA, sockB, host := d.sockClient(a.ID), d.sockClient(b.ID), d.httpClient(d.socket)
	bOp := opID(t, sockB, "POST", "/v1/checkpoint", `{"comment":"b's"}`)
	aOp := opID(t, sockA, "POST", "/v1/checkpoint", "")
	hostOp := opID(t, host, "POST", "/v1/sandboxes/b/checkpoint", "")
	verifyOp := opID(t, host, "POST", "/v1/verify", "")
	bSnap := d.checkpoint("b", "--name", "b-golden")
	for _, id := range []string{bOp, hostOp, verifyOp, "0123456789abcdef"} {
		for _, path := range []string{"/v1/operations/" + id, "/v1/operations/" + id + "/events"} {
			if status, body := sockA("GET", path, ""); status != http.StatusNotFound || codeOf(body) != api.CodeNoOperation ||
				strings.Contains(string(body), "b's") {
				t.Errorf("a's socket: GET %s: %d %s, want 404 O01", path, status, body)
			}
		}
	}
	for _, path := range []string{"/v1/operations/" + aOp, "/v1/operations/" + aOp + "/events"} {
		if status, body := sockA("GET", path, ""); status != http.StatusOK {
			t.Errorf("a's socket: its own operation: GET %s: %d %s", path, status, body)
		}
	}
	if status, _ := sockB("GET", "/v1/operations/"+bOp, ""); status != http.StatusOK {
		t.Errorf("b's socket: its own operation: %d", status)
	}
	for _, ref := range []string{bSnap.GlobalID, "b-golden", "b/" + bSnap.ID, bSnap.ID} {
		if status, body := sockA("GET", "/v1/checkpoints/"+url.PathEscape(ref), ""); status != http.StatusNotFound || codeOf(body) != api.CodeNoCheckpoint {
			t.Errorf("a's socket: b's checkpoint %q: %d %s, want 404 K08", ref, status, body)
		}
		if status, body := sockA("POST", "/v1/checkpoints/"+url.PathEscape(ref)+"/restore", ""); status != http.StatusNotFound || codeOf(body) != api.CodeNoCheckpoint {
			t.Errorf("a's socket: restore b's checkpoint %q: %d %s, want 404 K08", ref, status, body)
		}
	}
}

// What processes inside may create is the operator's to say: a loop of
// checkpoints stops at the rate with L06 and only the newest ones made
// from inside are kept; names and memory are refused until the operator
// allows them, and then work.
func TestInsideSettings(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("q", "--inside-rate", "3", "--inside-keep", "2")
	if sb.Inside != (api.InsideSettings{CheckpointsPerMinute: 3, CheckpointsKept: 2}) {
		t.Fatalf("created with %+v", sb.Inside)
	}
	if info := d.mustCLI("info", "q"); !strings.Contains(info, "checkpoints, 3 a minute, newest 2 kept; disk only; no names") {
		t.Errorf("cairn info: %s", info)
	}
	outside := d.checkpoint("q", "--comment", "by the operator")

	// A loop from inside: three in the minute, then L06.
	var made []string
	for i := range 5 {
		out, errOut, code := d.cli("", "exec", "q", "--", "cairn-env", "checkpoints", "create", "--comment", fmt.Sprint("loop ", i))
		if i < 3 {
			if code != 0 {
				t.Fatalf("checkpoint %d from inside: exit %d %s %s", i, code, out, errOut)
			}
			made = append(made, strings.TrimSpace(strings.TrimPrefix(out, "Checkpoint created: ")))
			continue
		}
		if code == 0 || !strings.Contains(errOut, api.CodeInsideQuota) {
			t.Errorf("checkpoint %d from inside: exit %d %q, want L06", i, code, errOut)
		}
	}
	var kept []string
	for _, ck := range d.checkpoints("q") {
		if ck.FromInside {
			kept = append(kept, ck.ID)
		} else if ck.ID != outside.ID && ck.Trigger == api.TriggerManual {
			t.Errorf("checkpoint %s is not marked as made from inside", ck.ID)
		}
	}
	if strings.Join(kept, " ") != strings.Join(made[1:], " ") {
		t.Errorf("checkpoints made from inside kept: %v, want the newest two of %v", kept, made)
	}
	if ck := d.checkpoints("q"); len(ck) == 0 || ck[0].ID != outside.ID {
		t.Errorf("the operator's checkpoint was pruned: %v", ck)
	}

	// Names and memory: refused, then allowed.
	d.mustCLI("config", "q", "--inside-rate", "20")
	d.installSockProgram("q")
	for _, body := range []string{`{"name":"golden"}`, `{"memory":true}`} {
		out := d.sh("q", "/tmp/sockprog req POST /v1/checkpoint '"+body+"'")
		if !strings.HasPrefix(out, "400 ") || !strings.Contains(out, `"code":"V02"`) || !strings.Contains(out, "not allowed") {
			t.Errorf("%s from inside, not allowed: %s", body, out)
		}
	}
	if out := d.sh("q", `/tmp/sockprog req POST /v1/checkpoint '{"comment":"x","disk_only":true}'`); !strings.Contains(out, `"code":"V03"`) {
		t.Errorf("an undocumented field from inside: %s", out)
	}
	d.mustCLI("config", "q", "--inside-names", "--inside-memory")
	var cfg api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "q")), &cfg)
	if cfg.Inside != (api.InsideSettings{Memory: true, Names: true, CheckpointsPerMinute: 20, CheckpointsKept: 2}) {
		t.Errorf("after config: %+v", cfg.Inside)
	}
	sock := d.sockClient(sb.ID)
	for _, body := range []string{`{"name":"golden"}`, `{"memory":true,"comment":"mem"}`} {
		id := opID(t, sock, "POST", "/v1/checkpoint", body)
		op, err := d.client.Operation(context.Background(), id)
		for err == nil && op.Status == "running" {
			time.Sleep(200 * time.Millisecond)
			op, err = d.client.Operation(context.Background(), id)
		}
		if err != nil || op.Status != "success" {
			t.Fatalf("%s from inside, allowed: %+v %v", body, op, err)
		}
	}
	var golden, mem bool
	for _, ck := range d.checkpoints("q") {
		golden = golden || (ck.Name == "golden" && ck.FromInside)
		mem = mem || (ck.Comment == "mem" && ck.HasMemory && ck.FromInside)
	}
	if !golden || !mem {
		t.Errorf("allowed from inside: named %v, memory %v; want both", golden, mem)
	}
	if snaps := d.mustCLI("snapshot", "list"); !strings.Contains(snaps, "golden") {
		t.Errorf("snapshot list: %s", snaps)
	}
	// The named one is never pruned.
	for range 3 {
		d.sh("q", "cairn-env checkpoints create")
	}
	named := 0
	for _, ck := range d.checkpoints("q") {
		if ck.Name == "golden" {
			named++
		}
	}
	if named != 1 {
		t.Errorf("the named snapshot made from inside was pruned")
	}
	d.mustCLI("config", "q", "--inside-memory=false")
	if out := d.sh("q", `/tmp/sockprog req POST /v1/checkpoint '{"memory":true}'`); !strings.Contains(out, `"code":"V02"`) {
		t.Errorf("memory after the operator forbade it again: %s", out)
	}
}
