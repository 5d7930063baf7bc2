package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// background starts a background process with the CLI and returns its pid.
func (d *daemon) background(name string, cmd ...string) int {
	d.t.Helper()
	out := d.mustCLI(append([]string{"--json", "exec", "--background", name, "--"}, cmd...)...)
	var st api.ExecStarted
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.PID <= 0 {
		d.t.Fatalf("exec --background: %q, %v", out, err)
	}
	return st.PID
}

// processes is cairn ps --json.
func (d *daemon) processes(name string) map[int]api.Process {
	d.t.Helper()
	var list []api.Process
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "ps", name)), &list); err != nil {
		d.t.Fatal(err)
	}
	m := map[int]api.Process{}
	for _, p := range list {
		m[p.PID] = p
	}
	return m
}

// A background process in a real sandbox: listed, attached to from a
// second client from offset 0 (its lines 0, 1, 2… in order), left by that
// client and still running, followed by cairn attach, signalled with TERM
// (cairn attach and cairn wait exit 143), kept after its exit until read;
// a cat's stdin written through the API and read back; the codes of the
// calls that cannot be served; and a restart leaves the list empty.
func TestBackgroundProcesses(t *testing.T) {
	d := startDaemon(t)
	d.create("procs", "--network", "none")
	ctx := t.Context()

	pid := d.background("procs", "sh", "-c", "i=0; while :; do echo $i; i=$((i+1)); sleep 0.2; done")
	p, ok := d.processes("procs")[pid]
	if !ok || !p.Background || p.State != api.ProcessRunning || p.Command[0] != "sh" {
		t.Fatalf("cairn ps: %+v (listed %v), want the running background sh", p, ok)
	}
	if out := d.mustCLI("ps", "procs"); !strings.Contains(out, strconv.Itoa(pid)) || !strings.Contains(out, "background") || !strings.Contains(out, "while") {
		t.Errorf("cairn ps table:\n%s", out)
	}

	// A second client (the Go client) attaches from 0 and reads 0, 1, 2…,
	// then goes away: the process runs on.
	readLines := func(from int64, n int) []string {
		t.Helper()
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		r, w := io.Pipe()
		go func() {
			_, err := d.client.AttachProcess(actx, "procs", pid, from, client.ExecIO{Stdout: w})
			w.CloseWithError(err)
		}()
		sc := bufio.NewScanner(r)
		var lines []string
		for len(lines) < n && sc.Scan() {
			lines = append(lines, sc.Text())
		}
		cancel()
		r.Close()
		return lines
	}
	lines := readLines(0, 5)
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("attach from 0: lines %q, want 0, 1, 2, 3, 4", lines)
		}
	}
	if len(lines) != 5 {
		t.Fatalf("attach from 0: lines %q", lines)
	}
	// From an offset: "0\n1\n2\n" is 6 bytes.
	if lines := readLines(6, 2); len(lines) != 2 || lines[0] != "3" || lines[1] != "4" {
		t.Errorf("attach from offset 6: %q, want 3, 4", lines)
	}
	time.Sleep(500 * time.Millisecond)
	if p := d.processes("procs")[pid]; p.State != api.ProcessRunning || p.OutputBytes < 10 {
		t.Fatalf("after its clients left: %+v, want it running on", p)
	}

	// cairn attach follows until the exit that cairn kill causes.
	type result struct {
		out, errOut string
		code        int
	}
	attached := make(chan result, 1)
	go func() {
		o, e, c := d.cli("", "attach", "procs", strconv.Itoa(pid))
		attached <- result{o, e, c}
	}()
	time.Sleep(time.Second)
	d.mustCLI("kill", "procs", strconv.Itoa(pid))
	select {
	case r := <-attached:
		if r.code != 128+15 || !strings.HasPrefix(r.out, "0\n1\n2\n3\n") {
			t.Errorf("cairn attach after cairn kill: exit %d, stdout %.40q…, stderr %q; want 143 and the lines from 0", r.code, r.out, r.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cairn attach did not end after cairn kill")
	}
	if _, errOut, code := d.cli("", "wait", "procs", strconv.Itoa(pid)); code != 143 {
		t.Errorf("cairn wait: exit %d (%s), want 143", code, errOut)
	}
	p = d.processes("procs")[pid]
	if p.State != api.ProcessExited || p.Exit == nil || p.Exit.Signal != "SIGTERM" {
		t.Errorf("cairn ps after the kill: %+v, want exited by SIGTERM", p)
	}
	if out := d.mustCLI("ps", "procs"); !strings.Contains(out, "exited (143 SIGTERM)") {
		t.Errorf("cairn ps table after the kill:\n%s", out)
	}
	if code := d.errorCode("kill", "procs", strconv.Itoa(pid)); code != api.CodeProcessExited {
		t.Errorf("kill of an exited process: %s, want S13", code)
	}

	// stdin: what a client writes to cat comes back on its output.
	cat := d.background("procs", "cat")
	if err := d.client.WriteStdin(ctx, "procs", cat, []byte("hello\n"), false); err != nil {
		t.Fatal(err)
	}
	if err := d.client.WriteStdin(ctx, "procs", cat, []byte("bye\n"), true); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res, err := d.client.AttachProcess(ctx, "procs", cat, 0, client.ExecIO{Stdout: &out})
	if err != nil || res.Exit.Code != 0 || out.String() != "hello\nbye\n" {
		t.Errorf("cat after two writes and a close: %q, %+v, %v", out.String(), res, err)
	}

	// cairn wait blocks while the process runs.
	slow := d.background("procs", "sh", "-c", "sleep 2; exit 5")
	t0 := time.Now()
	if _, errOut, code := d.cli("", "wait", "procs", strconv.Itoa(slow)); code != 5 || time.Since(t0) < time.Second {
		t.Errorf("cairn wait for sleep 2; exit 5: exit %d after %v (%s), want 5 after about 2 s", code, time.Since(t0), errOut)
	}

	// Output kept after the exit until read, exit status with it.
	done := d.background("procs", "sh", "-c", "echo kept; echo on-stderr >&2; exit 7")
	deadline := time.Now().Add(20 * time.Second)
	for d.processes("procs")[done].State != api.ProcessExited {
		if time.Now().After(deadline) {
			t.Fatal("the short background process did not exit")
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	o, e, code := d.cli("", "attach", "procs", strconv.Itoa(done))
	if code != 7 || o != "kept\n" || e != "on-stderr\n" {
		t.Errorf("attach after the exit: exit %d, stdout %q, stderr %q; want 7, kept, on-stderr", code, o, e)
	}

	// The codes of what cannot be done.
	if code := d.errorCode("kill", "procs", "999999"); code != api.CodeNoProcess {
		t.Errorf("kill of no process: %s, want S12", code)
	}
	if code := d.errorCode("wait", "procs", "999999"); code != api.CodeNoProcess {
		t.Errorf("wait for no process: %s, want S12", code)
	}
	if code := d.errorCode("kill", "procs", strconv.Itoa(cat), "--signal", "NOPE"); code != api.CodeInvalidArgument {
		t.Errorf("kill --signal NOPE: %s, want V02", code)
	}

	// An attached exec is listed while it runs, and can be signalled.
	execDone := make(chan int, 1)
	go func() {
		_, _, c := d.cli("", "exec", "procs", "--", "sleep", "300")
		execDone <- c
	}()
	var sleeper int
	deadline = time.Now().Add(20 * time.Second)
	for sleeper == 0 {
		for _, p := range d.processes("procs") {
			if !p.Background && len(p.Command) == 2 && p.Command[1] == "300" {
				sleeper = p.PID
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the attached exec is not listed")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := d.errorCode("wait", "procs", strconv.Itoa(sleeper)); code != api.CodeNotBackground {
		t.Errorf("wait for an attached exec: %s, want S14", code)
	}
	d.mustCLI("kill", "procs", strconv.Itoa(sleeper), "--signal", "KILL")
	select {
	case c := <-execDone:
		if c != 137 {
			t.Errorf("the attached exec killed with KILL: exit %d, want 137", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the attached exec did not end after cairn kill --signal KILL")
	}

	// A restart ends them: the list is empty.
	d.background("procs", "sleep", "1000")
	d.mustCLI("restart", "procs")
	if left := d.processes("procs"); len(left) != 0 {
		t.Errorf("after a restart: %+v, want no processes", left)
	}
}

// A background process that runs keeps a sandbox with --idle awake; once
// it has exited the sandbox falls asleep, and cairn ps wakes it.
func TestBackgroundProcessKeepsSandboxAwake(t *testing.T) {
	d := startDaemon(t)
	d.create("busy", "--network", "none", "--idle", "3s")
	pid := d.background("busy", "sleep", "1000")
	time.Sleep(10 * time.Second)
	if st := d.info("busy").State; st != api.StateRunning {
		t.Fatalf("with a background process running, 10 s after its 3 s idle: %s, want running", st)
	}
	d.mustCLI("kill", "busy", strconv.Itoa(pid), "--signal", "KILL")
	d.waitState("busy", api.StateSleeping, 40*time.Second)
	p, ok := d.processes("busy")[pid]
	if !ok || p.State != api.ProcessExited || p.Exit == nil || p.Exit.Code != 137 {
		t.Errorf("cairn ps of the sleeping sandbox: %+v (listed %v), want the killed sleep", p, ok)
	}
	if st := d.info("busy").State; st != api.StateRunning {
		t.Errorf("after cairn ps: %s, want running (woken)", st)
	}
}
