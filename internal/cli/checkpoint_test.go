package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var testCheckpoints = []api.Checkpoint{
	{ID: "v0", GlobalID: "ck-100", Sandbox: "web", Trigger: api.TriggerManual, Consistency: "frozen",
		Comment: "fresh install", Image: "debian", CreatedAt: testNow.Add(-2 * time.Hour),
		SizeExclusive: 12<<20 + 512<<10, SizeTotal: 300 << 20, Offsite: "uploaded ×2", Stored: api.StoredOffsiteOnly},
	{ID: "auto-20260301T115000Z", GlobalID: "ck-101", Sandbox: "web", Trigger: api.TriggerInterval,
		Consistency: "crash", Image: "debian", CreatedAt: testNow.Add(-10 * time.Minute),
		SizeExclusive: 900, SizeTotal: 301 << 20, HasMemory: true, Current: true, Offsite: "uploading", Stored: api.StoredLocalOnly},
	{ID: "v1", GlobalID: "ck-102", Sandbox: "web", Name: "before-upgrade", Trigger: api.TriggerManual,
		Consistency: "frozen", Label: "stable", Image: "debian", CreatedAt: testNow.Add(-3 * time.Minute),
		SizeExclusive: 0, SizeTotal: 302 << 20, Offsite: "pending", Stored: api.StoredLocalOnly},
}

func TestCheckpointCreatePrintsID(t *testing.T) {
	var req api.CreateCheckpointRequest
	var accept string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-7", Kind: "checkpoint.create", Status: api.OpRunning})
	})
	mux.HandleFunc("GET /v1/operations/op-7/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w,
			api.Event{Type: api.EventProgress, Data: "Quiescing web"},
			api.Event{Type: api.EventComplete, Data: api.Checkpoint{ID: "v3", Sandbox: "web", Consistency: "frozen", Trigger: api.TriggerManual}},
		)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock,
		"checkpoint", "create", "web", "--comment", "before the upgrade", "--label", "stable", "--name", "before-upgrade")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if stdout != "Checkpoint created: v3\n" {
		t.Errorf("stdout %q, want %q", stdout, "Checkpoint created: v3\n")
	}
	if stderr != "Quiescing web\n" {
		t.Errorf("stderr %q, want the progress line", stderr)
	}
	if want := (api.CreateCheckpointRequest{Comment: "before the upgrade", Label: "stable", Name: "before-upgrade"}); req != want {
		t.Errorf("request %+v, want %+v", req, want)
	}
	if accept != "application/json" {
		t.Errorf("Accept %q, want application/json (the operation, not NDJSON)", accept)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "checkpoint", "create", "web")
	var ck api.Checkpoint
	if err := json.Unmarshal([]byte(stdout), &ck); code != exitOK || err != nil || ck.ID != "v3" {
		t.Errorf("json: exit %d, stdout %q (%v); want the checkpoint", code, stdout, err)
	}
}

func TestCheckpointCreateMemory(t *testing.T) {
	var body map[string]any
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		body = jsonBody(r)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-m", Kind: "checkpoint.create"})
	})
	mux.HandleFunc("GET /v1/operations/op-m/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventComplete, Data: api.Checkpoint{ID: "v5", Sandbox: "web", Consistency: "frozen", HasMemory: true}})
	})
	sock := fakeDaemon(t, mux)
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"checkpoint", "create", "web", "--memory"}, map[string]any{"memory": true}},
		{[]string{"checkpoint", "create", "web", "--memory", "--label", "half done"}, map[string]any{"memory": true, "label": "half done"}},
		{[]string{"checkpoint", "create", "web"}, map[string]any{}},
	} {
		body = nil
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, tc.args...)...)
		if code != exitOK || stdout != "Checkpoint created: v5\n" {
			t.Errorf("cairn %q: exit %d, stdout %q, stderr %q", tc.args, code, stdout, stderr)
		}
		if !reflect.DeepEqual(body, tc.want) {
			t.Errorf("cairn %q: request body %v, want %v", tc.args, body, tc.want)
		}
	}
}

func TestCheckpointCreateMemoryHelp(t *testing.T) {
	code, stdout, _ := runCLI(t, context.Background(), "checkpoint", "create", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, s := range []string{"--memory", "paused for as long", "TCP connections", "reconnect"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("help lacks %q:\n%s", s, stdout)
		}
	}
}

func TestCheckpointCreateWarnsOnCrashConsistency(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-8"})
	})
	mux.HandleFunc("GET /v1/operations/op-8/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventComplete, Data: api.Checkpoint{ID: "v4", Consistency: "crash"}})
	})
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "checkpoint", "create", "web")
	if code != exitOK || stdout != "Checkpoint created: v4\n" || !strings.Contains(stderr, "crash-consistent") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, the id and a crash warning", code, stdout, stderr)
	}
}

func TestCheckpointCreateInterruptedNamesOperation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-9", Kind: "checkpoint.create"})
	})
	mux.HandleFunc("GET /v1/operations/op-9/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventProgress, Data: "Quiescing web"})
		w.(http.Flusher).Flush()
		cancel()
		<-r.Context().Done()
	})
	code, _, stderr := runCLI(t, ctx, "--socket", fakeDaemon(t, mux), "checkpoint", "create", "web")
	if code != exitInterrupted || !strings.Contains(stderr, "operation op-9") || !strings.Contains(stderr, "cairn checkpoint list web") {
		t.Errorf("exit %d, stderr %q; want %d, the operation and how to check it", code, stderr, exitInterrupted)
	}
}

func checkpointDaemon(t *testing.T, gotQuery *string) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		if gotQuery != nil {
			*gotQuery = r.URL.RawQuery
		}
		writeJSON(w, 200, testCheckpoints)
	})
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints/{id}", func(w http.ResponseWriter, r *http.Request) {
		for _, ck := range testCheckpoints {
			if ck.ID == r.PathValue("id") {
				writeJSON(w, 200, ck)
				return
			}
		}
		writeAPIError(w, http.StatusNotFound, api.CodeNoCheckpoint, `sandbox web has no checkpoint "`+r.PathValue("id")+`"`)
	})
	mux.HandleFunc("DELETE /v1/sandboxes/web/checkpoints/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "v0" {
			writeAPIError(w, http.StatusNotFound, api.CodeNoCheckpoint, `sandbox web has no checkpoint "`+r.PathValue("id")+`"`)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return fakeDaemon(t, mux)
}

func TestCheckpointListTable(t *testing.T) {
	var query string
	var out bytes.Buffer
	g := newGlobalOptions(nil, &out, &out)
	g.Socket = checkpointDaemon(t, &query)
	g.now = func() time.Time { return testNow }
	if err := runCheckpointList(context.Background(), checkpointListOptions{Name: "web", IncludeAuto: true}, g); err != nil {
		t.Fatal(err)
	}
	if query != "include_auto=true" {
		t.Errorf("query %q, want include_auto=true", query)
	}
	want := "" +
		"ID                       CREATED       TRIGGER    CONSISTENCY   SIZE      TOTAL    MEMORY   COMMENT         OFF-SITE      STORED\n" +
		"v0                       2 hours ago   manual     frozen        12.5MiB   300MiB   -        fresh install   uploaded ×2   off-site only\n" +
		"auto-20260301T115000Z*   10 min ago    interval   crash         900B      301MiB   yes      -               uploading     local only\n" +
		"v1                       3 min ago     manual     frozen        0B        302MiB   -        [stable]        pending       local only\n" +
		"* current: the state the disk was last restored or forked from\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestCheckpointListNoCurrentNoFootnote(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, testCheckpoints[:1])
	})
	code, stdout, _ := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "checkpoint", "list", "web")
	if code != exitOK || strings.Contains(stdout, "*") {
		t.Errorf("exit %d, stdout %q; want 0 and no current mark", code, stdout)
	}
}

func TestCheckpointListJSONRoundTrip(t *testing.T) {
	var query string
	sock := checkpointDaemon(t, &query)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "--json", "checkpoint", "ls", "web")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if query != "" {
		t.Errorf("query %q, want none without --include-auto", query)
	}
	var got []api.Checkpoint
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if !reflect.DeepEqual(got, testCheckpoints) {
		t.Errorf("got %+v, want %+v", got, testCheckpoints)
	}
}

func TestCheckpointListEmptyJSONIsArray(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("null"))
	})
	code, stdout, _ := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "--json", "checkpoint", "list", "web")
	if code != exitOK || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("exit %d, stdout %q; want 0 and []", code, stdout)
	}
}

func TestCheckpointInfo(t *testing.T) {
	var out bytes.Buffer
	g := newGlobalOptions(nil, &out, &out)
	g.Socket = checkpointDaemon(t, nil)
	g.now = func() time.Time { return testNow }
	if err := runCheckpointInfo(context.Background(), checkpointRef{Name: "web", ID: "v1"}, g); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"id            v1\n",
		"global id     ck-102\n",
		"sandbox       web\n",
		"name          before-upgrade\n",
		"created       2026-03-01 11:57:00 UTC (3 min ago)\n",
		"trigger       manual\n",
		"consistency   frozen\n",
		"comment       -\n",
		"label         stable\n",
		"memory        no\n",
		"size          0B (freed by deleting it)\n",
		"total         302MiB\n",
		"off-site      pending\n",
		"current       no\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("info output lacks %q:\n%s", line, out.String())
		}
	}

	// get is an alias; --json prints the checkpoint.
	code, stdout, _ := runCLI(t, context.Background(), "--socket", g.Socket, "--json", "checkpoint", "get", "web", "v0")
	var ck api.Checkpoint
	if err := json.Unmarshal([]byte(stdout), &ck); code != exitOK || err != nil || !reflect.DeepEqual(ck, testCheckpoints[0]) {
		t.Errorf("json: exit %d, stdout %q (%v); want checkpoint v0", code, stdout, err)
	}
}

func TestCheckpointDelete(t *testing.T) {
	sock := checkpointDaemon(t, nil)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "checkpoint", "delete", "web", "v0")
	if code != exitOK || stdout != "Checkpoint v0 of web deleted\n" || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	code, stdout, stderr = runCLI(t, context.Background(), "--socket", sock, "checkpoint", "delete", "web", "v9")
	if code != exitFailure || stdout != "" || stderr != "error K08: sandbox web has no checkpoint \"v9\"\n" {
		t.Errorf("unknown id: exit %d, stdout %q, stderr %q; want 1 and error K08", code, stdout, stderr)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "checkpoint", "rm", "web", "v9")
	var body api.ErrorBody
	if err := json.Unmarshal([]byte(stdout), &body); code != exitFailure || err != nil || body.Error.Code != api.CodeNoCheckpoint {
		t.Errorf("unknown id, json: exit %d, stdout %q (%v); want 1 and K08", code, stdout, err)
	}
}

// restoreDaemon answers a restore of web's checkpoints with operation
// op-r, recording the request and whether the events were asked for.
func restoreDaemon(t *testing.T, req *api.RestoreRequest, followed *bool) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoints/{id}/restore", func(w http.ResponseWriter, r *http.Request) {
		*req = api.RestoreRequest{}
		json.NewDecoder(r.Body).Decode(req)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-r", Kind: "sandbox.restore", Resource: "sandbox/web", Status: api.OpRunning})
	})
	mux.HandleFunc("GET /v1/operations/op-r/events", func(w http.ResponseWriter, r *http.Request) {
		*followed = true
		sb := testSandboxes[0]
		if req.As != "" {
			sb.Name, sb.ID = req.As, "sb-9"
		}
		writeEvents(w,
			api.Event{Type: api.EventProgress, Data: "Taking a safety checkpoint of web"},
			api.Event{Type: api.EventComplete, Data: sb},
		)
	})
	return fakeDaemon(t, mux)
}

func TestRestoreWithoutWaitPrintsOperation(t *testing.T) {
	var req api.RestoreRequest
	var followed bool
	sock := restoreDaemon(t, &req, &followed)
	for _, cmd := range [][]string{{"restore"}, {"checkpoint", "restore"}} {
		followed = false
		args := append(append([]string{"--socket", sock}, cmd...), "web", "v2", "--no-safety-checkpoint")
		code, stdout, stderr := runCLI(t, context.Background(), args...)
		if code != exitOK || stdout != "Restore of web to v2 started (operation op-r)\n" || stderr != "" {
			t.Errorf("cairn %q: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
		if followed {
			t.Errorf("cairn %q: followed the operation without --wait", cmd)
		}
		if want := (api.RestoreRequest{NoSafetyCheckpoint: true}); req != want {
			t.Errorf("cairn %q: request %+v, want %+v", cmd, req, want)
		}
	}

	code, stdout, _ := runCLI(t, context.Background(), "--socket", sock, "--json", "restore", "web", "v2")
	var op api.Operation
	if err := json.Unmarshal([]byte(stdout), &op); code != exitOK || err != nil || op.ID != "op-r" {
		t.Errorf("json: exit %d, stdout %q (%v); want the operation", code, stdout, err)
	}
}

func TestRestoreWaitFollows(t *testing.T) {
	var req api.RestoreRequest
	var followed bool
	sock := restoreDaemon(t, &req, &followed)
	for _, args := range [][]string{{"restore", "web", "v2", "--wait"}, {"rollback", "web", "v2"}} {
		followed = false
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, args...)...)
		if code != exitOK || stdout != "Sandbox web restored to v2\n" || stderr != "Taking a safety checkpoint of web\n" {
			t.Errorf("cairn %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
		if !followed {
			t.Errorf("cairn %q: did not follow the operation", args)
		}
		if req != (api.RestoreRequest{}) {
			t.Errorf("cairn %q: request %+v, want an in-place restore with a safety checkpoint", args, req)
		}
	}

	code, stdout, _ := runCLI(t, context.Background(), "--socket", sock, "--json", "rollback", "web", "v2")
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(stdout), &sb); code != exitOK || err != nil || sb.Name != "web" {
		t.Errorf("json: exit %d, stdout %q (%v); want the sandbox", code, stdout, err)
	}
}

func TestRestoreAsNewAlwaysFollows(t *testing.T) {
	var req api.RestoreRequest
	var followed bool
	sock := restoreDaemon(t, &req, &followed)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "checkpoint", "restore", "web", "v2", "--as", "web-old")
	if code != exitOK || stdout != "Sandbox web-old created from web/v2 and running\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if !followed || req.As != "web-old" {
		t.Errorf("followed %v, request %+v; want followed and As web-old", followed, req)
	}
}

func TestRestoreDiskOnly(t *testing.T) {
	var body map[string]any
	var id string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoints/{id}/restore", func(w http.ResponseWriter, r *http.Request) {
		id, body = r.PathValue("id"), jsonBody(r)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-d", Kind: "sandbox.restore"})
	})
	mux.HandleFunc("GET /v1/operations/op-d/events", func(w http.ResponseWriter, r *http.Request) {
		sb := testSandboxes[0]
		if as, _ := body["as"].(string); as != "" {
			sb.Name = as
		}
		writeEvents(w, api.Event{Type: api.EventComplete, Data: sb})
	})
	sock := fakeDaemon(t, mux)
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"restore", "web", "v3", "--disk-only"}, map[string]any{"disk_only": true}},
		{[]string{"checkpoint", "restore", "web", "v3", "--disk-only", "--wait"}, map[string]any{"disk_only": true}},
		{[]string{"checkpoint", "restore", "web", "v3", "--as", "web-old", "--disk-only"}, map[string]any{"as": "web-old", "disk_only": true}},
		{[]string{"rollback", "web", "v3", "--disk-only"}, map[string]any{"disk_only": true}},
		{[]string{"rollback", "web", "v3", "--disk-only", "--no-safety-checkpoint"}, map[string]any{"disk_only": true, "no_safety_checkpoint": true}},
		{[]string{"rollback", "web", "v3"}, map[string]any{}},
	} {
		body, id = nil, ""
		code, _, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, tc.args...)...)
		if code != exitOK {
			t.Errorf("cairn %q: exit %d, stderr %q", tc.args, code, stderr)
		}
		if id != "v3" || !reflect.DeepEqual(body, tc.want) {
			t.Errorf("cairn %q: checkpoint %q, request body %v; want v3, %v", tc.args, id, body, tc.want)
		}
	}
}

func TestRestoreMemoryImageBad(t *testing.T) {
	msg := "the memory image of checkpoint v3 is missing or damaged (pages.img); restore its disk alone with --disk-only"
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoints/v3/restore", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusConflict, api.CodeMemoryImageBad, msg)
	})
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "rollback", "web", "v3")
	if code != exitFailure || stdout != "" || stderr != "error K04: "+msg+"\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the K04 error", code, stdout, stderr)
	}
}

func TestRestoreFailureFromOperation(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoints/v2/restore", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-f"})
	})
	mux.HandleFunc("GET /v1/operations/op-f/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventError, Data: api.ErrorInfo{Code: api.CodeDiskLimit, Message: "disk limit of 10GiB reached"}})
	})
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "rollback", "web", "v2")
	if code != exitFailure || stdout != "" || stderr != "error L04: disk limit of 10GiB reached\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestCheckpointUsageErrorsExit2(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{
		{"checkpoint", "bogus"},
		{"checkpoint", "create"},
		{"checkpoint", "create", "a", "b"},
		{"checkpoint", "list"},
		{"checkpoint", "info", "web"},
		{"checkpoint", "get", "web", "v1", "v2"},
		{"checkpoint", "delete", "web"},
		{"checkpoint", "restore", "web"},
		{"checkpoint", "restore", "web", "v1", "--as", "x", "--no-safety-checkpoint"},
		{"restore", "web"},
		{"restore", "web", "v1", "--bogus"},
		{"rollback", "web"},
		{"rollback", "web", "v1", "--as", "x"},
		{"fork"},
		{"fork", "web", "--count", "0"},
		{"fork", "web", "--count", "-2"},
		{"fork", "web", "--count", "many"},
		{"fork", "web", "--memory", "--disk-only"},
		{"stop"},
		{"stop", "web", "--snapshot=maybe"},
		{"start", "web", "--snapshot"},
		{"snapshot", "bogus"},
		{"snapshot", "restore", "before-upgrade"},
		{"snapshot", "create"},
		{"snapshot", "list", "extra"},
		{"snapshot", "delete"},
		{"snapshot", "delete", "a", "b"},
		{"account", "extra"},
		{"diff", "web"},
		{"diff", "web", "v1", "v2", "v3"},
		{"status"},
	} {
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, args...)...)
		if code != exitUsage {
			t.Errorf("cairn %q: exit %d, want %d (stderr %q)", args, code, exitUsage, stderr)
			continue
		}
		if stdout != "" {
			t.Errorf("cairn %q: stdout %q, want nothing", args, stdout)
		}
		if !(strings.HasPrefix(stderr, "error: ") || strings.HasPrefix(stderr, "error V02: ")) || !strings.Contains(stderr, "Usage:") {
			t.Errorf("cairn %q: stderr %q, want an error and the usage", args, stderr)
		}
	}
}

func TestCheckpointHelpHasExamples(t *testing.T) {
	root := newRootCommand(newGlobalOptions(nil, &bytes.Buffer{}, &bytes.Buffer{}))
	for _, path := range [][]string{
		{"checkpoint"}, {"checkpoint", "create"}, {"checkpoint", "list"}, {"checkpoint", "info"},
		{"checkpoint", "delete"}, {"checkpoint", "keep"}, {"checkpoint", "restore"}, {"restore"}, {"rollback"}, {"fork"},
		{"snapshot"}, {"snapshot", "create"}, {"snapshot", "list"}, {"snapshot", "delete"},
		{"snapshot", "restore"}, {"diff"}, {"status"}, {"config"}, {"account"}, {"create"}, {"info"},
		{"start"}, {"stop"},
	} {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.CommandPath() != "cairn "+strings.Join(path, " ") {
			t.Errorf("%q: not found (%v)", path, err)
			continue
		}
		if cmd.Short == "" || cmd.Long == "" || cmd.Example == "" {
			t.Errorf("%q: want Short, Long and Example", path)
		}
	}
}
