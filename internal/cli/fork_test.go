package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

func TestForkPrintsChildren(t *testing.T) {
	var req api.ForkRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/fork", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-k", Kind: "sandbox.fork"})
	})
	mux.HandleFunc("GET /v1/operations/op-k/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w,
			api.Event{Type: api.EventProgress, Data: "Starting trial-1"},
			api.Event{Type: api.EventComplete, Data: []api.Sandbox{
				{ID: "sb-11", Name: "trial-1", Parent: "web", SourceCheckpoint: "web/v2"},
				{ID: "sb-12", Name: "trial-2", Parent: "web", SourceCheckpoint: "web/v2"},
			}},
		)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock,
		"fork", "web", "--count", "2", "--name-prefix", "trial", "--from-checkpoint", "v2")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if want := (api.ForkRequest{FromCheckpoint: "v2", Count: 2, NamePrefix: "trial"}); req != want {
		t.Errorf("request %+v, want %+v", req, want)
	}
	if want := "Forked web → trial-1 (id sb-11)\nForked web → trial-2 (id sb-12)\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	if stderr != "Starting trial-1\n" {
		t.Errorf("stderr %q, want the progress", stderr)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "fork", "web")
	var got []api.Sandbox
	if err := json.Unmarshal([]byte(stdout), &got); code != exitOK || err != nil || len(got) != 2 {
		t.Errorf("json: exit %d, stdout %q (%v); want both children", code, stdout, err)
	}
	if req.Count != 1 {
		t.Errorf("default count %d, want 1", req.Count)
	}
}

func TestForkCountZeroIsUsageError(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock") // never reached
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "fork", "web", "--count", "0")
	if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, `error V02: invalid --count "0": a whole number from 1 to 64`) {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and a message about --count", code, stdout, stderr)
	}
}

func TestForkMemoryFlags(t *testing.T) {
	var body map[string]any
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/fork", func(w http.ResponseWriter, r *http.Request) {
		body = jsonBody(r)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-fm", Kind: "sandbox.fork"})
	})
	mux.HandleFunc("GET /v1/operations/op-fm/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventComplete, Data: []api.Sandbox{{ID: "sb-21", Name: "web-fork-1", Parent: "web"}}})
	})
	sock := fakeDaemon(t, mux)
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"fork", "web", "--memory"}, map[string]any{"count": 1.0, "memory": true}},
		{[]string{"fork", "web", "--memory", "--count", "3"}, map[string]any{"count": 3.0, "memory": true}},
		{[]string{"fork", "web", "--from-checkpoint", "v3", "--disk-only"}, map[string]any{"count": 1.0, "from_checkpoint": "v3", "disk_only": true}},
		{[]string{"fork", "web", "--from-checkpoint", "v3"}, map[string]any{"count": 1.0, "from_checkpoint": "v3"}},
		{[]string{"fork", "web"}, map[string]any{"count": 1.0}},
	} {
		body = nil
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, tc.args...)...)
		if code != exitOK || stdout != "Forked web → web-fork-1 (id sb-21)\n" {
			t.Errorf("cairn %q: exit %d, stdout %q, stderr %q", tc.args, code, stdout, stderr)
		}
		if !reflect.DeepEqual(body, tc.want) {
			t.Errorf("cairn %q: request body %v, want %v", tc.args, body, tc.want)
		}
	}
}

// cairnd dies while cairn follows a fork: cairn says it lost cairnd, names
// the operation and how to learn its outcome; `cairn operation ID` then
// shows the failure that the restarted cairnd answers.
func TestForkLostDaemonNamesOperation(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/fork", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-7", Kind: "sandbox.fork"})
	})
	mux.HandleFunc("GET /v1/operations/op-7/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventProgress, Data: "Starting sandbox web-fork-1"})
		w.(http.Flusher).Flush()
		// cairnd is killed: the stream ends in the middle of a line.
		hj, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			hj.Close()
		}
	})
	mux.HandleFunc("GET /v1/operations/op-7", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.Operation{ID: "op-7", Kind: "sandbox.fork", Resource: "sandbox/web", Status: api.OpFailure,
			Error: &api.ErrorInfo{Code: api.CodeInterrupted, Message: "interrupted by a cairnd restart; undone"}})
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "fork", "web", "--count", "3")
	if code != exitFailure || stdout != "" {
		t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, exitFailure)
	}
	if !strings.Contains(stderr, "lost cairnd") || !strings.Contains(stderr, "cairn operation op-7") {
		t.Errorf("stderr %q, want that cairnd was lost and `cairn operation op-7`", stderr)
	}
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "fork", "web", "--count", "3")
	if code != exitFailure || !strings.Contains(stdout, `"operation": "op-7"`) {
		t.Errorf("--json: exit %d, stdout %q; want the operation id in the error", code, stdout)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "operation", "op-7")
	if code != exitOK || !strings.Contains(stdout, "failure") || !strings.Contains(stdout, "O02: interrupted") {
		t.Errorf("cairn operation: exit %d, stdout %q; want the failure with O02", code, stdout)
	}
}
