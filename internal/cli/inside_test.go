package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

// The --inside-… flags send only what was given: a flag left out is left
// as it is (nil), one given false is sent false.
func TestConfigInsideFlags(t *testing.T) {
	var req api.ConfigureSandboxRequest
	mux := http.NewServeMux()
	mux.HandleFunc("PATCH /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		req = api.ConfigureSandboxRequest{}
		json.NewDecoder(r.Body).Decode(&req)
		sb := testSandboxes[0]
		sb.Inside = api.InsideSettings{Names: true, CheckpointsPerMinute: 2, CheckpointsKept: 5}
		writeJSON(w, 200, sb)
	})
	sock := fakeDaemon(t, mux)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "config", "web", "--inside-names", "--inside-memory=false", "--inside-rate", "2")
	if want := "Sandbox web: from inside: checkpoints, 2 a minute, newest 5 kept; disk only; names allowed\n"; code != exitOK || stdout != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	in := req.Inside
	if in == nil || in.Names == nil || !*in.Names || in.Memory == nil || *in.Memory || in.CheckpointsPerMinute == nil ||
		*in.CheckpointsPerMinute != 2 || in.CheckpointsKept != nil || req.AutoCheckpoint != "" {
		t.Errorf("request %+v (inside %+v), want names true, memory false, rate 2, keep unset", req, in)
	}
}

func TestFormatInside(t *testing.T) {
	for in, want := range map[api.InsideSettings]string{
		{}: "no checkpoints",
		{CheckpointsPerMinute: 10, CheckpointsKept: 20}:                          "checkpoints, 10 a minute, newest 20 kept; disk only; no names",
		{Memory: true, Names: true, CheckpointsPerMinute: 1, CheckpointsKept: 0}: "checkpoints, 1 a minute, all kept; memory allowed; names allowed",
	} {
		if got := formatInside(in); got != want {
			t.Errorf("formatInside(%+v) = %q, want %q", in, got, want)
		}
	}
}
