package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

// TestNumberFlagsRefuseBadValues: every numeric flag refuses NaN, Inf,
// negative, overflowing and out-of-range values before cairnd is asked,
// with V02, the flag and the range, as a usage error; --json carries the
// code too.
func TestNumberFlagsRefuseBadValues(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock") // never reached
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"create", "web", "--memory", "NaN"}, `invalid --memory "NaN": a size from 64MiB to 16TiB`},
		{[]string{"create", "web", "--memory", "4611686018427387904"}, `invalid --memory "4611686018427387904"`},
		{[]string{"create", "web", "--memory", "-1G"}, `invalid --memory "-1G"`},
		{[]string{"create", "web", "--memory", "1e3G"}, `invalid --memory "1e3G"`},
		{[]string{"create", "web", "--memory", "99999999999999999999999999"}, `invalid --memory "99999999999999999999999999"`},
		{[]string{"create", "web", "--cpus", "NaN"}, `invalid --cpus "NaN": a number from 0.01 to 1024, or 0 for no limit`},
		{[]string{"create", "web", "--cpus", "Inf"}, `invalid --cpus "Inf"`},
		{[]string{"create", "web", "--cpus", "-1"}, `invalid --cpus "-1"`},
		{[]string{"create", "web", "--cpus", "1e400"}, `invalid --cpus "1e400"`},
		{[]string{"create", "web", "--cpus", "0.001"}, `invalid --cpus "0.001"`},
		{[]string{"create", "web", "--auto-checkpoint", "NaN"}, `invalid --auto-checkpoint "NaN": a whole number of seconds from 1m to 24h`},
		{[]string{"create", "web", "--auto-checkpoint", "-5m"}, `invalid --auto-checkpoint "-5m"`},
		{[]string{"create", "web", "--auto-checkpoint", "9999999999999h"}, `invalid --auto-checkpoint "9999999999999h"`},
		{[]string{"config", "web", "--auto-checkpoint", "25h"}, `invalid --auto-checkpoint "25h"`},
		{[]string{"fork", "web", "--count", "65"}, `invalid --count "65": a whole number from 1 to 64`},
		{[]string{"fork", "web", "--count", "9223372036854775808"}, `invalid --count "9223372036854775808"`},
		{[]string{"fork", "web", "--count", "-1"}, `invalid --count "-1"`},
		{[]string{"logs", "web", "svc", "--tail-bytes", "1048577"}, `invalid --tail-bytes "1048577": a whole number from 0 to 1048576`},
		{[]string{"logs", "web", "svc", "--tail-bytes", "-1"}, `invalid --tail-bytes "-1"`},
	} {
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, c.args...)...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "error V02: "+c.msg) {
			t.Errorf("cairn %q: exit %d, stdout %q, stderr %q; want 2 and V02 %q", c.args, code, stdout, firstLine(stderr), c.msg)
		}
		code, stdout, _ = runCLI(t, context.Background(), append([]string{"--socket", sock, "--json"}, c.args...)...)
		var out struct{ Error api.ErrorInfo }
		if err := json.Unmarshal([]byte(stdout), &out); code != exitUsage || err != nil || out.Error.Code != api.CodeInvalidArgument || !strings.HasPrefix(out.Error.Message, c.msg) {
			t.Errorf("cairn --json %q: exit %d, %q (%v); want code V02", c.args, code, stdout, err)
		}
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// TestNumberFlagsPassGoodValues: values in range reach cairnd as given.
func TestNumberFlagsPassGoodValues(t *testing.T) {
	var body map[string]any
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		body = jsonBody(r)
		writeAPIError(w, http.StatusConflict, api.CodeNameTaken, "taken") // enough: the request was seen
	})
	sock := fakeDaemon(t, mux)
	code, _, stderr := runCLI(t, context.Background(), "--socket", sock, "create", "web", "--cpus", "1.5", "--memory", "1.5G", "--auto-checkpoint", "90s")
	if code != exitFailure || !strings.Contains(stderr, "S02") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if body["cpus"] != 1.5 || body["memory"] != "1.5G" || body["auto_checkpoint"] != "90s" {
		t.Errorf("request %v, want cpus 1.5, memory 1.5G, auto_checkpoint 90s", body)
	}
}
