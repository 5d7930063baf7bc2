package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

// execDaemon answers attached execs the way cairnd does: 101, then the
// frames. It echoes the request's command on stdout and exits with code.
func execDaemon(t *testing.T, code int, got *api.ExecRequest) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/exec", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(got)
		if got.Detach {
			writeJSON(w, 200, api.ExecStarted{PID: 42})
			return
		}
		if r.Header.Get("Upgrade") != "cairn-exec" {
			writeAPIError(w, 400, api.CodeInvalidRequest, "no upgrade")
			return
		}
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: cairn-exec\r\nConnection: Upgrade\r\n\r\n")
		api.WriteFrame(buf, api.FrameStdout, []byte(strings.Join(got.Command, " ")+"\n"))
		api.WriteFrame(buf, api.FrameStderr, []byte("warning\n"))
		st, _ := json.Marshal(api.ExitStatus{Code: code})
		api.WriteFrame(buf, api.FrameExit, st)
		buf.Flush()
	})
	mux.HandleFunc("POST /v1/sandboxes/stopped/exec", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, 409, api.CodeNotRunning, "sandbox stopped is not running")
	})
	mux.HandleFunc("POST /v1/sandboxes/missing-cmd/exec", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, 400, api.CodeExecFailed, `exec "nope": executable file not found in $PATH`)
	})
	return fakeDaemon(t, mux)
}

func TestExecPassesStdioAndExitCode(t *testing.T) {
	var req api.ExecRequest
	sock := execDaemon(t, 3, &req)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "exec", "web", "-e", "A=1", "-w", "/srv", "--", "ls", "-l")
	if code != 3 || stdout != "ls -l\n" || stderr != "warning\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 3, %q, %q", code, stdout, stderr, "ls -l\n", "warning\n")
	}
	want := api.ExecRequest{Command: []string{"ls", "-l"}, Env: []string{"A=1"}, Dir: "/srv"}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("request %+v, want %+v", req, want)
	}

	// --cwd is --workdir under the name other APIs give it.
	req = api.ExecRequest{}
	runCLI(t, context.Background(), "--socket", sock, "exec", "web", "--cwd", "/tmp", "--user", "app", "--timeout", "30s", "--", "pwd")
	if req.Dir != "/tmp" || req.User != "app" || req.TimeoutSeconds != 30 {
		t.Errorf("--cwd /tmp --user app --timeout 30s: request %+v", req)
	}

	// --json changes only cairn's own messages.
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "exec", "web", "--", "true")
	if code != 3 || stdout != "true\n" {
		t.Errorf("--json: exit %d, stdout %q; want 3 and the command's output", code, stdout)
	}
}

func TestExecOwnFailures(t *testing.T) {
	var req api.ExecRequest
	sock := execDaemon(t, 0, &req)
	for _, tc := range []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"--socket", sock, "exec", "missing-cmd", "--", "nope"}, 127, "error S08: exec \"nope\": executable file not found in $PATH\n"},
		{[]string{"--socket", sock, "exec", "stopped", "--", "ls"}, 125, "error S04: sandbox stopped is not running\n"},
		{[]string{"--socket", filepath.Join(t.TempDir(), "none.sock"), "exec", "web", "--", "ls"}, 125, "error: cannot reach cairnd"},
		{[]string{"--socket", sock, "exec", "web", "--", "true"}, 0, ""},
	} {
		code, _, stderr := runCLI(t, context.Background(), tc.args...)
		if code != tc.wantCode || !strings.HasPrefix(stderr, tc.wantStderr) || (tc.wantStderr == "" && stderr != "warning\n") {
			t.Errorf("cairn %q: exit %d, stderr %q; want %d, %q", tc.args, code, stderr, tc.wantCode, tc.wantStderr)
		}
	}
}

func TestExecDetached(t *testing.T) {
	var req api.ExecRequest
	sock := execDaemon(t, 0, &req)
	code, stdout, _ := runCLI(t, context.Background(), "--socket", sock, "exec", "-d", "web", "--", "sleep", "100")
	if code != 0 || stdout != "42\n" || !req.Detach {
		t.Errorf("exit %d, stdout %q, detach %v; want 0, 42, true", code, stdout, req.Detach)
	}
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "exec", "-d", "web", "--", "sleep", "100")
	var started api.ExecStarted
	if err := json.Unmarshal([]byte(stdout), &started); code != 0 || err != nil || started.PID != 42 {
		t.Errorf("--json: exit %d, stdout %q (%v); want {\"pid\":42}", code, stdout, err)
	}
}

func TestConsoleRunsALoginShellOnATTY(t *testing.T) {
	var req api.ExecRequest
	sock := execDaemon(t, 0, &req)
	code, _, stderr := runCLI(t, context.Background(), "--socket", sock, "console", "web")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !req.TTY || !req.Stdin || len(req.Command) != 3 || req.Command[0] != "/bin/sh" || !strings.Contains(req.Command[2], "/bin/bash -l") {
		t.Errorf("request %+v, want a tty login shell with stdin", req)
	}
}
