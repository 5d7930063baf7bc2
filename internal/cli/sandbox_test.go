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

// jsonBody decodes the JSON body of a request as cairnd receives it, so
// that tests check the wire names of the fields sent and that the others
// are left out.
func jsonBody(r *http.Request) map[string]any {
	var m map[string]any
	json.NewDecoder(r.Body).Decode(&m)
	return m
}

// writeEvents answers an operation's event stream with evs as NDJSON.
func writeEvents(w http.ResponseWriter, evs ...api.Event) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, ev := range evs {
		enc.Encode(ev)
	}
}

var testEndsAt = time.Date(2026, 3, 1, 13, 30, 0, 0, time.UTC)

var testSandboxes = []api.Sandbox{
	{ID: "sb-1", Name: "web", Image: "debian", State: api.StateRunning, CPUs: 2, MemoryBytes: 512 << 20,
		CreatedAt: time.Date(2026, 3, 1, 11, 57, 0, 0, time.UTC), AgentConnected: true, Pid: 4242,
		AutoCheckpointSeconds: 300, TimeoutSeconds: 7200, OnTimeout: "stop", EndsAt: &testEndsAt},
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
		"NAME       STATE     IMAGE    CPUS   MEMORY   PARENT   CREATED      ENDS\n" +
		"web        running   debian   2      512MiB   -        3 min ago    in 1h 30m\n" +
		"web-fork   stopped   debian   -      -        web      2 days ago   -\n"
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
		"auto-checkpoint      every 5 min when the disk changed\n",
		"disk                 1.3GiB in the sandbox, 300MiB in 4 checkpoints\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("info output lacks %q:\n%s", line, out.String())
		}
	}
}

func TestFollowEndsInError(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, testSandboxes[1])
	})
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

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "create", "web", "--image", "debian", "--cpus", "2", "--memory", "512M",
		"--env", "A=1", "--env", "B=x=y", "--user", "app", "--workdir", "/srv", "--label", "team=ml", "--label", "gpu")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if want := (api.CreateSandboxRequest{Name: "web", Image: "debian", CPUs: 2, Memory: "512M", Env: []string{"A=1", "B=x=y"}, User: "app", Workdir: "/srv",
		Labels: map[string]string{"team": "ml", "gpu": ""}}); !reflect.DeepEqual(req, want) {
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

// statusDaemon answers for sandbox sb (named web) and its checkpoints cks.
func statusDaemon(t *testing.T, sb api.Sandbox, cks []api.Checkpoint) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
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
	ago := func(d time.Duration) *time.Time { at := testNow.Add(-d); return &at }
	for _, tc := range []struct {
		name  string
		every time.Duration
		last  *time.Time
		note  string
		cks   []api.Checkpoint
		want  string
	}{
		{"5 min", 5 * time.Minute, ago(3*time.Minute + 10*time.Second), "", testCheckpoints, "" +
			"web  running  (image debian)\n" +
			"checkpoints   Saved 3 min ago · off-site — · every 5 min when the disk changed\n" +
			"disk          40MiB in the sandbox, 12.5MiB in 3 checkpoints\n"},
		{"90 s", 90 * time.Second, ago(42 * time.Second), "", testCheckpoints, "" +
			"web  running  (image debian)\n" +
			"checkpoints   Saved 42 sec ago · off-site — · every 90 s when the disk changed\n" +
			"disk          40MiB in the sandbox, 12.5MiB in 3 checkpoints\n"},
		{"1 h", time.Hour, ago(2 * time.Hour), "", testCheckpoints, "" +
			"web  running  (image debian)\n" +
			"checkpoints   Saved 2 hours ago · off-site — · every 1 h when the disk changed\n" +
			"disk          40MiB in the sandbox, 12.5MiB in 3 checkpoints\n"},
		{"90 min", time.Hour + 30*time.Minute, ago(0), "", testCheckpoints, "" +
			"web  running  (image debian)\n" +
			"checkpoints   Saved just now · off-site — · every 90 min when the disk changed\n" +
			"disk          40MiB in the sandbox, 12.5MiB in 3 checkpoints\n"},
		{"never saved", 5 * time.Minute, nil, "", nil, "" +
			"web  running  (image debian)\n" +
			"checkpoints   Never saved · off-site — · every 5 min when the disk changed\n" +
			"disk          40MiB in the sandbox, 0B in 0 checkpoints\n"},
		{"note", 15 * time.Minute, ago(20 * time.Minute), "skipped at 11:55: the account's disk limit is reached", testCheckpoints, "" +
			"web  running  (image debian)\n" +
			"checkpoints   Saved 20 min ago · off-site — · every 15 min when the disk changed\n" +
			"note          skipped at 11:55: the account's disk limit is reached\n" +
			"disk          40MiB in the sandbox, 12.5MiB in 3 checkpoints\n"},
		{"interval unknown", 0, nil, "", nil, "" +
			"web  running  (image debian)\n" +
			"checkpoints   Never saved · off-site —\n" +
			"disk          40MiB in the sandbox, 0B in 0 checkpoints\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := testSandboxes[0]
			sb.AutoCheckpointSeconds = int64(tc.every / time.Second)
			sb.LastCheckpointAt = tc.last
			sb.AutoCheckpointNote = tc.note
			var out bytes.Buffer
			g := newGlobalOptions(nil, &out, &out)
			g.Socket = statusDaemon(t, sb, tc.cks)
			g.now = func() time.Time { return testNow }
			if err := runStatus(context.Background(), statusOptions{Name: "web"}, g); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("status:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}

func TestStatusJSON(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", statusDaemon(t, testSandboxes[0], nil), "--json", "status", "web")
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

func TestCreatePassesAutoCheckpoint(t *testing.T) {
	var req api.CreateSandboxRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-a"})
	})
	mux.HandleFunc("GET /v1/operations/op-a/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventComplete, Data: testSandboxes[0]})
	})
	code, _, stderr := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "create", "web", "--auto-checkpoint", "15m")
	if code != exitOK || req.AutoCheckpoint != "15m" {
		t.Errorf("exit %d (stderr %q), request %+v; want 0 and auto_checkpoint 15m", code, stderr, req)
	}
}

func TestConfig(t *testing.T) {
	var req api.ConfigureSandboxRequest
	mux := http.NewServeMux()
	mux.HandleFunc("PATCH /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		req = api.ConfigureSandboxRequest{}
		json.NewDecoder(r.Body).Decode(&req)
		if req.AutoCheckpoint == "10s" {
			writeAPIError(w, http.StatusBadRequest, api.CodeInvalidArgument, `invalid --auto-checkpoint "10s"`)
			return
		}
		sb := testSandboxes[0]
		sb.AutoCheckpointSeconds = 900
		writeJSON(w, 200, sb)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "config", "web", "--auto-checkpoint", "15m")
	if want := "Sandbox web: automatic checkpoints every 15 min when the disk changed\n"; code != exitOK || stdout != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and %q", code, stdout, stderr, want)
	}
	if req.AutoCheckpoint != "15m" {
		t.Errorf("request %+v, want auto_checkpoint 15m", req)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "config", "web", "--auto-checkpoint", "15m")
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(stdout), &sb); code != exitOK || err != nil || sb.AutoCheckpointSeconds != 900 {
		t.Errorf("json: exit %d, stdout %q (%v); want the sandbox", code, stdout, err)
	}

	// cairn checks the interval as cairnd does before it asks.
	code, _, stderr = runCLI(t, context.Background(), "--socket", sock, "config", "web", "--auto-checkpoint", "10s")
	if code != exitUsage || !strings.HasPrefix(stderr, `error V02: invalid --auto-checkpoint "10s"`) {
		t.Errorf("bad interval: exit %d, stderr %q; want 2 and V02", code, stderr)
	}
}

func TestConfigWithoutSettingsExits2(t *testing.T) {
	// No daemon listens there: an accepted command line would exit 1.
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{
		{"config", "web"},
		{"config", "web", "--auto-checkpoint", ""},
		{"config", "--auto-checkpoint", "5m"},
		{"config", "web", "extra", "--auto-checkpoint", "5m"},
	} {
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, args...)...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, "Usage:") {
			t.Errorf("cairn %q: exit %d, stdout %q, stderr %q; want %d, an error and the usage", args, code, stdout, stderr, exitUsage)
		}
	}
}

// lifecycleDaemon answers for sandbox web, which is sb before a start or
// stop: it records the requests in calls ("GET", "start", "stop") and the
// JSON body of the last start or stop in body, and ends both with sb.
func lifecycleDaemon(t *testing.T, sb api.Sandbox, calls *[]string, body *map[string]any) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		*calls = append(*calls, "GET")
		writeJSON(w, 200, sb)
	})
	for _, op := range []string{"start", "stop"} {
		mux.HandleFunc("POST /v1/sandboxes/web/"+op, func(w http.ResponseWriter, r *http.Request) {
			*calls = append(*calls, op)
			*body = jsonBody(r)
			writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-" + op, Kind: "sandbox." + op})
		})
	}
	mux.HandleFunc("GET /v1/operations/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventComplete, Data: sb})
	})
	return fakeDaemon(t, mux)
}

func TestStopSnapshot(t *testing.T) {
	var calls []string
	var body map[string]any
	sock := lifecycleDaemon(t, testSandboxes[0], &calls, &body)
	for _, tc := range []struct {
		args     []string
		wantBody map[string]any
		want     string
	}{
		{[]string{"stop", "web"}, map[string]any{}, "Sandbox web stopped\n"},
		{[]string{"stop", "web", "--snapshot"}, map[string]any{"snapshot": true},
			"Sandbox web stopped; its session is saved: \"cairn start web\" resumes its processes\n"},
	} {
		body = nil
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, tc.args...)...)
		if code != exitOK || stdout != tc.want || stderr != "" {
			t.Errorf("cairn %q: exit %d, stdout %q, stderr %q; want 0 and %q", tc.args, code, stdout, stderr, tc.want)
		}
		if !reflect.DeepEqual(body, tc.wantBody) {
			t.Errorf("cairn %q: request body %v, want %v", tc.args, body, tc.wantBody)
		}
	}

	code, stdout, _ := runCLI(t, context.Background(), "--socket", sock, "--json", "stop", "web", "--snapshot")
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(stdout), &sb); code != exitOK || err != nil || sb.Name != "web" {
		t.Errorf("json: exit %d, stdout %q (%v); want the sandbox", code, stdout, err)
	}
}

func TestStartSaysWhetherItResumes(t *testing.T) {
	for _, tc := range []struct {
		saved string
		want  string
	}{
		{"", "Sandbox web started\n"},
		{"v4", "Sandbox web resumed from its saved session\n"},
	} {
		sb := testSandboxes[1]
		sb.Name, sb.SavedSession = "web", tc.saved
		var calls []string
		var body map[string]any
		sock := lifecycleDaemon(t, sb, &calls, &body)
		code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "start", "web")
		if code != exitOK || stdout != tc.want || stderr != "" {
			t.Errorf("saved session %q: exit %d, stdout %q, stderr %q; want 0 and %q", tc.saved, code, stdout, stderr, tc.want)
		}
		if want := []string{"GET", "start"}; !reflect.DeepEqual(calls, want) {
			t.Errorf("saved session %q: requests %q, want %q (the saved session is read before the start)", tc.saved, calls, want)
		}
	}
}

func TestStartOfMissingSandboxDoesNotStart(t *testing.T) {
	started := false
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, api.CodeNoSandbox, `no sandbox named "`+r.PathValue("name")+`"`)
	})
	mux.HandleFunc("POST /v1/sandboxes/{name}/start", func(w http.ResponseWriter, r *http.Request) {
		started = true
		writeAPIError(w, http.StatusNotFound, api.CodeNoSandbox, `no sandbox named "`+r.PathValue("name")+`"`)
	})
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "start", "nope")
	if code != exitFailure || stdout != "" || stderr != "error S01: no sandbox named \"nope\"\n" || started {
		t.Errorf("exit %d, stdout %q, stderr %q, start asked %v; want 1, the S01 error and no start", code, stdout, stderr, started)
	}
}

func TestInfoNextStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state string
		saved string
		want  string // the next start line; "" for none
	}{
		{"saved session", api.StateStopped, "v4", "next start           resume saved session (v4)\n"},
		{"saved session of another sandbox", api.StateStopped, "web/v4", "next start           resume saved session (web/v4)\n"},
		{"cold stop", api.StateStopped, "", "next start           boot\n"},
		{"running", api.StateRunning, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := testSandboxes[0]
			sb.State, sb.SavedSession = tc.state, tc.saved
			mux := http.NewServeMux()
			mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 200, sb)
			})
			var out bytes.Buffer
			g := newGlobalOptions(nil, &out, &out)
			g.Socket = fakeDaemon(t, mux)
			g.now = func() time.Time { return testNow }
			if err := runInfo(context.Background(), infoOptions{Name: "web"}, g); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if strings.Contains(out.String(), "next start") {
					t.Errorf("info of a %s sandbox has a next start line:\n%s", tc.state, out.String())
				}
				return
			}
			if want := "state                " + tc.state + "\n" + tc.want; !strings.Contains(out.String(), want) {
				t.Errorf("info output lacks %q:\n%s", want, out.String())
			}
		})
	}
}

func TestStatusNextStart(t *testing.T) {
	sb := testSandboxes[0]
	sb.State, sb.SavedSession = api.StateStopped, "v4"
	at := testNow.Add(-3 * time.Minute)
	sb.LastCheckpointAt = &at
	var out bytes.Buffer
	g := newGlobalOptions(nil, &out, &out)
	g.Socket = statusDaemon(t, sb, testCheckpoints)
	g.now = func() time.Time { return testNow }
	if err := runStatus(context.Background(), statusOptions{Name: "web"}, g); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"web  stopped  (image debian)\n" +
		"checkpoints   Saved 3 min ago · off-site — · every 5 min when the disk changed\n" +
		"next start    resume saved session (v4)\n" +
		"disk          40MiB in the sandbox, 12.5MiB in 3 checkpoints\n"
	if out.String() != want {
		t.Errorf("status:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	sb.SavedSession = ""
	g.Socket = statusDaemon(t, sb, testCheckpoints)
	if err := runStatus(context.Background(), statusOptions{Name: "web"}, g); err != nil {
		t.Fatal(err)
	}
	if line := "next start    boot\n"; !strings.Contains(out.String(), line) {
		t.Errorf("status lacks %q:\n%s", line, out.String())
	}
}

func TestCheckpointStatusLineOffsite(t *testing.T) {
	ago := func(d time.Duration) *time.Time { at := testNow.Add(-d); return &at }
	sb := api.Sandbox{LastCheckpointAt: ago(3 * time.Minute), AutoCheckpointSeconds: 300}
	sb.LastOffsiteAt = ago(4*time.Minute + 5*time.Second)
	if got, want := formatCheckpointStatus(testNow, sb), "Saved 3 min ago · off-site 4 min ago · every 5 min when the disk changed"; got != want {
		t.Errorf("uploaded:\n got %q\nwant %q", got, want)
	}
	sb.LastOffsiteAt, sb.OffsiteOff = nil, true
	if got, want := formatCheckpointStatus(testNow, sb), "Saved 3 min ago · off-site off · every 5 min when the disk changed"; got != want {
		t.Errorf("off:\n got %q\nwant %q", got, want)
	}
}
