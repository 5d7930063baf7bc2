package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

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
