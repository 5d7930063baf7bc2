package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

func TestSnapshotRestore(t *testing.T) {
	var req api.SnapshotRestoreRequest
	var ref string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/snapshots/{ref}/restore", func(w http.ResponseWriter, r *http.Request) {
		ref = r.PathValue("ref")
		json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-s"})
	})
	mux.HandleFunc("GET /v1/operations/op-s/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventComplete, Data: api.Sandbox{ID: "sb-5", Name: "web-v2", SourceCheckpoint: "web/v2"}})
	})
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "snapshot", "restore", "web/v2", "web-v2")
	if code != exitOK || stdout != "Sandbox web-v2 created from snapshot web/v2 and running\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if ref != "web/v2" || req.Name != "web-v2" {
		t.Errorf("ref %q, request %+v; want web/v2 and web-v2", ref, req)
	}
}

func TestSnapshotRestoreDiskOnly(t *testing.T) {
	var body map[string]any
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/snapshots/{ref}/restore", func(w http.ResponseWriter, r *http.Request) {
		body = jsonBody(r)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-sd"})
	})
	mux.HandleFunc("GET /v1/operations/op-sd/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventComplete, Data: api.Sandbox{ID: "sb-6", Name: "web-v3"}})
	})
	sock := fakeDaemon(t, mux)
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"snapshot", "restore", "web/v3", "web-v3", "--disk-only"}, map[string]any{"name": "web-v3", "disk_only": true}},
		{[]string{"snapshot", "restore", "web/v3", "web-v3"}, map[string]any{"name": "web-v3"}},
	} {
		body = nil
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, tc.args...)...)
		if code != exitOK || stdout != "Sandbox web-v3 created from snapshot web/v3 and running\n" {
			t.Errorf("cairn %q: exit %d, stdout %q, stderr %q", tc.args, code, stdout, stderr)
		}
		if !reflect.DeepEqual(body, tc.want) {
			t.Errorf("cairn %q: request body %v, want %v", tc.args, body, tc.want)
		}
	}
}

func TestSnapshotCreate(t *testing.T) {
	var req api.CreateCheckpointRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/snapshot", func(w http.ResponseWriter, r *http.Request) {
		req = api.CreateCheckpointRequest{}
		json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-sc", Kind: "checkpoint.create"})
	})
	mux.HandleFunc("GET /v1/operations/op-sc/events", func(w http.ResponseWriter, r *http.Request) {
		name := req.Name
		if name == "" {
			name = "web-20260301-120000"
		}
		writeEvents(w,
			api.Event{Type: api.EventProgress, Data: "Quiescing web"},
			api.Event{Type: api.EventComplete, Data: api.Checkpoint{ID: "v4", GlobalID: "ck-104", Sandbox: "web", Name: name,
				Trigger: api.TriggerManual, Consistency: "frozen"}},
		)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "snapshot", "create", "web", "--name", "before-upgrade")
	if code != exitOK || stdout != "Snapshot created: before-upgrade (web/v4)\n" || stderr != "Quiescing web\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if req.Name != "before-upgrade" {
		t.Errorf("request %+v, want name before-upgrade", req)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "snapshot", "create", "web")
	if code != exitOK || stdout != "Snapshot created: web-20260301-120000 (web/v4)\n" || req.Name != "" {
		t.Errorf("default name: exit %d, stdout %q, request %+v", code, stdout, req)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "snapshot", "create", "web")
	var ck api.Checkpoint
	if err := json.Unmarshal([]byte(stdout), &ck); code != exitOK || err != nil || ck.GlobalID != "ck-104" {
		t.Errorf("json: exit %d, stdout %q (%v); want the checkpoint", code, stdout, err)
	}
}

var testSnapshots = []api.Checkpoint{
	{ID: "v1", GlobalID: "ck-102", Sandbox: "web", Name: "before-upgrade", Trigger: api.TriggerManual,
		Consistency: "frozen", CreatedAt: testNow.Add(-3 * time.Minute), SizeExclusive: 12 << 20, Offsite: "uploaded ×2", Stored: api.StoredLocalAndOffsite},
	{ID: "auto-20260301T115000Z", GlobalID: "ck-101", Sandbox: "old", SandboxDeleted: true, Trigger: api.TriggerDelete,
		Consistency: "crash", CreatedAt: testNow.Add(-10 * time.Minute), SizeExclusive: 900, Offsite: "pending", Stored: api.StoredLocalOnly},
}

func TestSnapshotListTable(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/snapshots", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, testSnapshots)
	})
	var out bytes.Buffer
	g := newGlobalOptions(nil, &out, &out)
	g.Socket = fakeDaemon(t, mux)
	g.now = func() time.Time { return testNow }
	if err := runSnapshotList(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ID       NAME             SANDBOX         CHECKPOINT              TRIGGER   STATE   CONSISTENCY   AGE          SIZE    OFF-SITE      STORED\n" +
		"ck-102   before-upgrade   web             v1                      manual    ready   frozen        3 min ago    12MiB   uploaded ×2   local + off-site\n" +
		"ck-101   -                old (deleted)   auto-20260301T115000Z   delete    ready   crash         10 min ago   900B    pending       local only\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestSnapshotListJSON(t *testing.T) {
	body := "null"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/snapshots", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	})
	sock := fakeDaemon(t, mux)

	code, stdout, _ := runCLI(t, context.Background(), "--socket", sock, "--json", "snapshot", "list")
	if code != exitOK || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("null: exit %d, stdout %q; want 0 and []", code, stdout)
	}
	body = "[]"
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "snapshot", "ls")
	if code != exitOK || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("empty: exit %d, stdout %q; want 0 and []", code, stdout)
	}

	b, _ := json.Marshal(testSnapshots)
	body = string(b)
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "snapshot", "list")
	var got []api.Checkpoint
	if err := json.Unmarshal([]byte(stdout), &got); code != exitOK || err != nil || !reflect.DeepEqual(got, testSnapshots) {
		t.Errorf("exit %d, stdout %q (%v); want the snapshots", code, stdout, err)
	}
	if !strings.Contains(stdout, `"sandbox_deleted": true`) {
		t.Errorf("stdout %q lacks sandbox_deleted", stdout)
	}
}

func TestSnapshotDelete(t *testing.T) {
	var ref string
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /v1/snapshots/{ref}", func(w http.ResponseWriter, r *http.Request) {
		ref = r.PathValue("ref")
		if ref == "nope" {
			writeAPIError(w, http.StatusNotFound, api.CodeNoCheckpoint, `no checkpoint or snapshot "nope" in your account`)
			return
		}
		writeJSON(w, 200, testSnapshots[0])
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "snapshot", "delete", "web/v1")
	if code != exitOK || stdout != "Snapshot web/v1 deleted\n" || stderr != "" || ref != "web/v1" {
		t.Errorf("exit %d, stdout %q, stderr %q, ref %q", code, stdout, stderr, ref)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "snapshot", "rm", "before-upgrade")
	var ck api.Checkpoint
	if err := json.Unmarshal([]byte(stdout), &ck); code != exitOK || err != nil || ck.GlobalID != "ck-102" {
		t.Errorf("json: exit %d, stdout %q (%v); want the deleted checkpoint", code, stdout, err)
	}

	code, stdout, stderr = runCLI(t, context.Background(), "--socket", sock, "snapshot", "delete", "nope")
	if code != exitFailure || stdout != "" || !strings.HasPrefix(stderr, "error K08: ") {
		t.Errorf("unknown: exit %d, stdout %q, stderr %q; want 1 and K08", code, stdout, stderr)
	}
}
