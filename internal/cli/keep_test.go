package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// insideDaemon serves sandbox web with v0 (manual), v1 and v2 (made from
// inside) and an automatic one; keeping a checkpoint clears its mark.
func insideDaemon(t *testing.T) string {
	cks := []api.Checkpoint{
		{ID: "v0", Sandbox: "web", Trigger: api.TriggerManual, Consistency: "frozen", CreatedAt: testNow.Add(-time.Hour)},
		{ID: "v1", Sandbox: "web", Trigger: api.TriggerManual, Consistency: "frozen", CreatedAt: testNow.Add(-30 * time.Minute), FromInside: true},
		{ID: "v2", Sandbox: "web", Name: "golden", Trigger: api.TriggerManual, Consistency: "frozen", CreatedAt: testNow.Add(-20 * time.Minute), FromInside: true},
		{ID: "auto-20260301T115000Z", Sandbox: "web", Trigger: api.TriggerInterval, Consistency: "crash", CreatedAt: testNow.Add(-10 * time.Minute)},
	}
	find := func(w http.ResponseWriter, id string) *api.Checkpoint {
		for i := range cks {
			if cks[i].ID == id {
				return &cks[i]
			}
		}
		writeAPIError(w, http.StatusNotFound, api.CodeNoCheckpoint, `sandbox web has no checkpoint "`+id+`"`)
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, cks)
	})
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints/{id}", func(w http.ResponseWriter, r *http.Request) {
		if ck := find(w, r.PathValue("id")); ck != nil {
			writeJSON(w, 200, ck)
		}
	})
	mux.HandleFunc("POST /v1/sandboxes/web/checkpoints/{id}/keep", func(w http.ResponseWriter, r *http.Request) {
		if ck := find(w, r.PathValue("id")); ck != nil {
			ck.FromInside = false
			writeJSON(w, 200, ck)
		}
	})
	return fakeDaemon(t, mux)
}

// The list marks what was made from inside, and says what may be deleted.
func TestCheckpointListMarksInside(t *testing.T) {
	var out bytes.Buffer
	g := newGlobalOptions(nil, &out, &out)
	g.Socket = insideDaemon(t)
	g.now = func() time.Time { return testNow }
	if err := runCheckpointList(context.Background(), checkpointListOptions{Name: "web", IncludeAuto: true}, g); err != nil {
		t.Fatal(err)
	}
	triggers := map[string]string{}
	lines := strings.Split(out.String(), "\n")
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 4 && (strings.HasPrefix(f[0], "v") || strings.HasPrefix(f[0], "auto-")) {
			triggers[f[0]] = f[4]
		}
	}
	for id, want := range map[string]string{"v0": "manual", "v1": "inside", "v2": "inside", "auto-20260301T115000Z": "interval"} {
		if triggers[id] != want {
			t.Errorf("%s: trigger %q, want %q:\n%s", id, triggers[id], want, out.String())
		}
	}
	if !strings.Contains(out.String(), "inside: made from inside the sandbox; beyond its --inside-keep the oldest unnamed are deleted (keep one: cairn checkpoint keep web ID)\n") {
		t.Errorf("no footnote on inside checkpoints:\n%s", out.String())
	}

	// After keeping v1 and v2, nothing is marked and there is no footnote.
	for _, id := range []string{"v1", "v2"} {
		if code, _, stderr := runCLI(t, context.Background(), "--socket", g.Socket, "checkpoint", "keep", "web", id); code != exitOK {
			t.Fatalf("keep %s: exit %d, %s", id, code, stderr)
		}
	}
	out.Reset()
	if err := runCheckpointList(context.Background(), checkpointListOptions{Name: "web"}, g); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "inside") {
		t.Errorf("after keep, still marked inside:\n%s", out.String())
	}
}

func TestCheckpointInfoSaysFromInside(t *testing.T) {
	sock := insideDaemon(t)
	for id, want := range map[string]string{
		"v0": "from inside   no\n",
		"v1": "from inside   yes (may be deleted beyond the sandbox's --inside-keep; cairn checkpoint keep web v1 keeps it)\n",
		"v2": "from inside   yes (named: never deleted for --inside-keep)\n",
	} {
		code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "checkpoint", "info", "web", id)
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("info %s: exit %d, stdout %q, stderr %q; want %q", id, code, stdout, stderr, want)
		}
	}
}

func TestCheckpointKeep(t *testing.T) {
	sock := insideDaemon(t)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "checkpoint", "keep", "web", "v1")
	if code != exitOK || stdout != "Checkpoint v1 of web kept: it is not deleted for the sandbox's --inside-keep\n" || stderr != "" {
		t.Errorf("keep v1: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "checkpoint", "info", "web", "v1")
	if code != exitOK || !strings.Contains(stdout, "from inside   no\n") {
		t.Errorf("info after keep: exit %d, stdout %q", code, stdout)
	}

	// An automatic checkpoint: said to change nothing.
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "checkpoint", "keep", "web", "auto-20260301T115000Z")
	if code != exitOK || !strings.Contains(stdout, "is automatic (interval), not made from inside: nothing changed") {
		t.Errorf("keep auto: exit %d, stdout %q", code, stdout)
	}

	// --json prints the checkpoint.
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "checkpoint", "keep", "web", "v2")
	var ck api.Checkpoint
	if err := json.Unmarshal([]byte(stdout), &ck); code != exitOK || err != nil || ck.ID != "v2" || ck.Name != "golden" || ck.FromInside {
		t.Errorf("keep --json: exit %d, stdout %q (%v); want v2 not from inside", code, stdout, err)
	}

	// Unknown checkpoint: K08; missing arguments: usage (exit 2).
	code, stdout, stderr = runCLI(t, context.Background(), "--socket", sock, "checkpoint", "keep", "web", "v9")
	if code != exitFailure || stdout != "" || stderr != "error K08: sandbox web has no checkpoint \"v9\"\n" {
		t.Errorf("unknown id: exit %d, stdout %q, stderr %q; want 1 and error K08", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t, context.Background(), "--socket", sock, "checkpoint", "keep", "web"); code != exitUsage {
		t.Errorf("keep without ID: exit %d, want %d", code, exitUsage)
	}
}
