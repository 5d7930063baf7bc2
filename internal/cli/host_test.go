package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// cairn host evacuate sends the request, follows the operation and
// prints what became of each sandbox, its lost checkpoints and a summary;
// it exits 1 when a sandbox was not restored, with --json too.
func TestHostEvacuatePrintsTheReport(t *testing.T) {
	var got api.EvacuateRequest
	rep := api.EvacuationReport{Host: "a", Restored: 1, Failed: 1, Lost: 1, Sandboxes: []api.Evacuated{
		{Account: "default", Name: "web", ID: "sb-1", Host: "c", Checkpoint: "v2", GlobalID: "g2", Memory: true, Lazy: true, State: "running",
			Lost: []api.LostCheckpoint{{ID: "v3", GlobalID: "g3", CreatedAt: time.Unix(1_700_000_000, 0)}}},
		{Account: "team", Name: "db", ID: "sb-2", Host: "a", Error: &api.ErrorInfo{Code: api.CodeNotOffsite, Message: "no checkpoint off-site"}},
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/hosts/a/evacuate", func(w http.ResponseWriter, r *http.Request) {
		got = api.EvacuateRequest{}
		json.NewDecoder(r.Body).Decode(&got)
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-e", Kind: "host.evacuate", Resource: "host/a", Status: api.OpRunning})
	})
	mux.HandleFunc("GET /v1/operations/op-e/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, api.Event{Type: api.EventProgress, Data: "Restoring the 2 sandboxes of host a on c"}, api.Event{Type: api.EventComplete, Data: rep})
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "host", "evacuate", "a", "--to", "c")
	want := "web: restored on c from v2 (running, its processes resumed, its disk filled as it is read)\n" +
		"  lost, only in the lost host's pool: v3 (g3)\n" +
		"team/db: not restored (R02 no checkpoint off-site); it stays on a\n" +
		"Host a: 1 sandbox restored, 1 not; 1 checkpoint lost (only on a)\n"
	if code != 1 || stdout != want || stderr != "Restoring the 2 sandboxes of host a on c\n" {
		t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %q", code, stdout, want, stderr)
	}
	if got.To != "c" || got.Whole || len(got.Sandboxes) != 0 {
		t.Errorf("request %+v", got)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "host", "evacuate", "a", "--whole")
	var back api.EvacuationReport
	if err := json.Unmarshal([]byte(stdout), &back); err != nil || code != 1 || back.Restored != 1 || len(back.Sandboxes) != 2 {
		t.Errorf("--json: exit %d, %v, %q", code, err, stdout)
	}
	if !got.Whole {
		t.Errorf("--whole was not sent: %+v", got)
	}
}
