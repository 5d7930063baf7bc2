package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// fakeDaemon serves h on a unix socket in a temporary directory and
// returns the socket's path.
func fakeDaemon(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.ErrorBody{Error: api.ErrorInfo{Code: code, Message: msg}})
}

// writeEvents answers an operation's event stream with evs as NDJSON.
func writeEvents(w http.ResponseWriter, evs ...api.Event) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, ev := range evs {
		enc.Encode(ev)
	}
}

var testSandboxes = []api.Sandbox{
	{ID: "sb-1", Name: "web", Image: "debian", State: api.StateRunning, CPUs: 2, MemoryBytes: 512 << 20,
		CreatedAt: time.Date(2026, 3, 1, 11, 57, 0, 0, time.UTC), AgentConnected: true, Pid: 4242},
	{ID: "sb-2", Name: "web-fork", Image: "debian", State: api.StateStopped, Parent: "web",
		CreatedAt: time.Date(2026, 2, 27, 12, 0, 0, 0, time.UTC)},
}

func TestListJSONRoundTrip(t *testing.T) {
	var gotParent string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		gotParent = r.URL.Query().Get("parent")
		writeJSON(w, 200, testSandboxes)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "--json", "list", "--parent", "web")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if gotParent != "web" {
		t.Errorf("parent query %q, want web", gotParent)
	}
	var got []api.Sandbox
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if !reflect.DeepEqual(got, testSandboxes) {
		t.Errorf("got %+v, want %+v", got, testSandboxes)
	}
}

func TestListTable(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, testSandboxes)
	})
	var out bytes.Buffer
	g := newGlobalOptions(nil, &out, &out)
	g.Socket = fakeDaemon(t, mux)
	g.now = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	if err := runList(context.Background(), listOptions{}, g); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME       STATE     IMAGE    CPUS   MEMORY   PARENT   CREATED\n" +
		"web        running   debian   2      512MiB   -        3 min ago\n" +
		"web-fork   stopped   debian   -      -        web      2 days ago\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestListEmptyJSONIsArray(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("null"))
	})
	code, stdout, _ := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "--json", "list")
	if code != exitOK || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("exit %d, stdout %q; want 0 and []", code, stdout)
	}
}

func TestInfoErrorRoundTrip(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, api.CodeNoSandbox, `no sandbox named "`+r.PathValue("name")+`"`)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "info", "nope")
	if code != exitFailure || stdout != "" || stderr != "error S01: no sandbox named \"nope\"\n" {
		t.Errorf("human: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	code, stdout, stderr = runCLI(t, context.Background(), "--socket", sock, "--json", "info", "nope")
	var body api.ErrorBody
	if err := json.Unmarshal([]byte(stdout), &body); err != nil {
		t.Fatalf("json: stdout %q: %v", stdout, err)
	}
	want := api.ErrorInfo{Code: api.CodeNoSandbox, Message: `no sandbox named "nope"`}
	if code != exitFailure || body.Error != want || stderr != "" {
		t.Errorf("json: exit %d, error %+v, stderr %q; want 1, %+v, nothing", code, body.Error, stderr, want)
	}
}

func TestInfoHuman(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		sb := testSandboxes[0]
		sb.CurrentCheckpoint = "v2"
		sb.Disk = &api.DiskUsage{Sandbox: 1288 << 20, Checkpoints: 300 << 20, CheckpointCount: 4}
		writeJSON(w, 200, sb)
	})
	var out bytes.Buffer
	g := newGlobalOptions(nil, &out, &out)
	g.Socket = fakeDaemon(t, mux)
	g.now = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	if err := runInfo(context.Background(), infoOptions{Name: "web"}, g); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"name                 web\n",
		"memory               512MiB\n",
		"created              2026-03-01 11:57:00 UTC (3 min ago)\n",
		"agent connected      yes\n",
		"pid                  4242\n",
		"current checkpoint   v2\n",
		"source checkpoint    -\n",
		"disk                 1.3GiB in the sandbox, 300MiB in 4 checkpoints\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("info output lacks %q:\n%s", line, out.String())
		}
	}
}

func TestFollowEndsInError(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/start", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-1", Kind: "sandbox.start", Status: api.OpRunning})
	})
	mux.HandleFunc("GET /v1/operations/op-1/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w,
			api.Event{Type: api.EventProgress, Data: "Starting sandbox web"},
			api.Event{Type: api.EventError, Data: api.ErrorInfo{Code: api.CodeRuntimeFailed, Message: "runsc: exit status 1"}},
		)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "start", "web")
	if code != exitFailure || stdout != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
	}
	if want := "Starting sandbox web\nerror S06: runsc: exit status 1\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

func TestCreateFollowsToTheEnd(t *testing.T) {
	var req api.CreateSandboxRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-2", Kind: "sandbox.create"})
	})
	mux.HandleFunc("GET /v1/operations/op-2/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w,
			api.Event{Type: api.EventProgress, Data: "Building image debian: I: Retrieving Packages"},
			api.Event{Type: api.EventInfo, Data: "Starting sandbox web"},
			api.Event{Type: api.EventComplete, Data: testSandboxes[0]},
		)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "create", "web", "--image", "debian", "--cpus", "2", "--memory", "512M")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if want := (api.CreateSandboxRequest{Name: "web", Image: "debian", CPUs: 2, Memory: "512M"}); req != want {
		t.Errorf("request %+v, want %+v", req, want)
	}
	if want := "Building image debian: I: Retrieving Packages\nStarting sandbox web\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if want := "Sandbox web created and running (id sb-1)\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
}

func TestFollowInterruptedNamesOperation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-3", Kind: "sandbox.delete"})
	})
	mux.HandleFunc("GET /v1/operations/op-3/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventProgress, Data: "Stopping sandbox web"})
		w.(http.Flusher).Flush()
		cancel() // the user presses Ctrl-C while the operation goes on
		<-r.Context().Done()
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, ctx, "--socket", sock, "delete", "web")
	if code != exitInterrupted || stdout != "" {
		t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, exitInterrupted)
	}
	if !strings.Contains(stderr, "operation op-3") || !strings.Contains(stderr, "continues in cairnd") {
		t.Errorf("stderr %q, want the operation id and that it continues", stderr)
	}
}

func statusDaemon(t *testing.T, cks []api.Checkpoint) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		sb := testSandboxes[0]
		sb.Disk = &api.DiskUsage{Sandbox: 40 << 20, CheckpointCount: len(cks)}
		for _, ck := range cks {
			sb.Disk.Checkpoints += ck.SizeExclusive
		}
		writeJSON(w, 200, sb)
	})
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("include_auto") != "true" {
			writeAPIError(w, 400, api.CodeInvalidArgument, "want include_auto")
			return
		}
		writeJSON(w, 200, cks)
	})
	return fakeDaemon(t, mux)
}

func TestStatusHuman(t *testing.T) {
	for _, tc := range []struct {
		cks  []api.Checkpoint
		want string
	}{
		{testCheckpoints, "" +
			"web  running  (image debian)\n" +
			"checkpoints   3 · last v1 (0B) 3 min ago\n" +
			"disk          40MiB in the sandbox, 12.5MiB in 3 checkpoints\n"},
		{nil, "" +
			"web  running  (image debian)\n" +
			"checkpoints   none yet\n" +
			"disk          40MiB in the sandbox, 0B in 0 checkpoints\n"},
	} {
		var out bytes.Buffer
		g := newGlobalOptions(nil, &out, &out)
		g.Socket = statusDaemon(t, tc.cks)
		g.now = func() time.Time { return testNow }
		if err := runStatus(context.Background(), statusOptions{Name: "web"}, g); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("status:\n%s\nwant:\n%s", out.String(), tc.want)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", statusDaemon(t, nil), "--json", "status", "web")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got struct {
		Sandbox     *api.Sandbox      `json:"sandbox"`
		Checkpoints *[]api.Checkpoint `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if got.Sandbox == nil || got.Sandbox.Name != "web" || got.Sandbox.Disk == nil {
		t.Errorf("sandbox %+v, want web with its disk usage", got.Sandbox)
	}
	if got.Checkpoints == nil || len(*got.Checkpoints) != 0 {
		t.Errorf("checkpoints %v, want an empty array (not null)", got.Checkpoints)
	}
}
