package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// serve sends one request to h and returns the answer. hdr is pairs of
// header name and value.
func serve(t *testing.T, h http.Handler, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// errorOf returns the error an answer carries, failing t unless the body
// is exactly the one error shape, {"error":{"code","message"}}, as JSON.
func errorOf(t *testing.T, rec *httptest.ResponseRecorder) api.ErrorInfo {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("error answered as %q, want application/json", ct)
	}
	var raw map[string]map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil || len(raw) != 1 || len(raw["error"]) != 2 {
		t.Fatalf("body %q is not the error shape", rec.Body)
	}
	var eb api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("body %q is not the error shape (%v)", rec.Body, err)
	}
	return eb.Error
}

// routeCase is a request to one route and the call it must make.
type routeCase struct {
	method, pattern string // the route, as in routes
	path, body      string // "{op}" in path is an operation's id
	hdr             []string
	status          int
	want            *call // nil: no call
	noErr           bool  // the route cannot fail (the fake's error is not asked)
	bodyHas         string
}

const def = metadata.DefaultAccount

// routeCases reaches every route of the API.
var routeCases = []routeCase{
	{method: "GET", pattern: "/v1", path: "/v1", status: 200, bodyHas: `"account":"default"`, noErr: true},
	{method: "GET", pattern: "/v1/openapi.json", path: "/v1/openapi.json", status: 200, bodyHas: `"openapi": "3.1.0"`, noErr: true},
	{method: "GET", pattern: "/v1/images", path: "/v1/images", status: 200,
		want: &call{"Images.List", "", nil}, bodyHas: `"busybox"`},
	{method: "POST", pattern: "/v1/images/pull", path: "/v1/images/pull", body: `{"ref":"127.0.0.1:5000/app:1","name":"app","insecure":true}`, status: 202,
		want: &call{"Images.Pull", "", []any{api.PullImageRequest{Ref: "127.0.0.1:5000/app:1", Name: "app", Insecure: true}}}},
	{method: "POST", pattern: "/v1/images/import", path: "/v1/images/import?name=app&source=app.tar", body: `TARBYTES`, status: 202,
		want: &call{"Images.Import", "", []any{"TARBYTES", "app", "app.tar"}}},
	{method: "POST", pattern: "/v1/images/build", path: "/v1/images/build?name=app&source=ctx&build_arg=A%3D1&build_arg=B%3Dx%3Dy&network=none&no_cache=true", body: `TARBYTES`, status: 202,
		want: &call{"Images.Build", "", []any{"TARBYTES", api.BuildImageRequest{Name: "app", Source: "ctx", BuildArgs: map[string]string{"A": "1", "B": "x=y"}, Network: "none", NoCache: true}}}},
	{method: "GET", pattern: "/v1/whoami", path: "/v1/whoami", status: 200, bodyHas: `"via":"unix socket"`, noErr: true},
	{method: "GET", pattern: "/v1/audit", path: "/v1/audit?since=1h&target=web", status: 200, noErr: true, bodyHas: `[`},
	{method: "GET", pattern: "/v1/accounts", path: "/v1/accounts", status: 200,
		want: &call{"Access.Accounts", "", nil}, bodyHas: `"default"`},
	{method: "POST", pattern: "/v1/accounts", path: "/v1/accounts", body: `{"name":"team","disk_limit":"1G"}`, status: 201,
		want: &call{"Access.CreateAccount", "", []any{"team", int64(1 << 30)}}},
	{method: "PATCH", pattern: "/v1/accounts/{name}", path: "/v1/accounts/team", body: `{"disk_limit":"0"}`, status: 200,
		want: &call{"Access.SetDiskLimit", "", []any{"team", int64(0)}}},
	{method: "DELETE", pattern: "/v1/accounts/{name}", path: "/v1/accounts/team", status: 200,
		want: &call{"Access.DeleteAccount", "", []any{"team"}}, bodyHas: `"deleted":"team"`},
	{method: "DELETE", pattern: "/v1/accounts/{name}", path: "/v1/accounts/team?force=true", status: 202,
		want: &call{"Access.PurgeAccount", "", []any{"team"}}},
	{method: "GET", pattern: "/v1/tokens", path: "/v1/tokens?account=team", status: 200,
		want: &call{"Access.Tokens", "", []any{"team"}}},
	{method: "POST", pattern: "/v1/tokens", path: "/v1/tokens", body: `{"name":"ci","role":"read","expires":"30d"}`, status: 201,
		want: &call{"Access.CreateToken", "", []any{def, "ci", auth.RoleRead, 30 * 24 * time.Hour}}, bodyHas: `"token":"cairn_x"`},
	{method: "DELETE", pattern: "/v1/tokens/{id}", path: "/v1/tokens/abcdefghijkl", status: 200,
		want: &call{"Access.RevokeToken", "", []any{"abcdefghijkl"}}},
	{method: "GET", pattern: "/v1/hosts", path: "/v1/hosts", status: 200,
		want: &call{"Hosts.List", "", nil}, bodyHas: `"state":"up"`},
	{method: "POST", pattern: "/v1/hosts/{name}/evacuate", path: "/v1/hosts/a/evacuate", body: `{"to":"c","whole":true}`, status: 202,
		want: &call{"Hosts.Evacuate", "", []any{"a", api.EvacuateRequest{To: "c", Whole: true}}}},
	{method: "POST", pattern: "/v1/images/prune", path: "/v1/images/prune", status: 200,
		want: &call{"Images.PruneCache", "", nil}, bodyHas: `"removed":3`},
	{method: "GET", pattern: "/v1/images/{name}", path: "/v1/images/app", status: 200,
		want: &call{"Images.Info", "", []any{"app"}}, bodyHas: `"name":"app"`},
	{method: "DELETE", pattern: "/v1/images/{name}", path: "/v1/images/app", status: 200,
		want: &call{"Images.Delete", "", []any{"app"}}, bodyHas: `"deleted":"app"`},
	{method: "GET", pattern: "/v1/sandboxes", path: "/v1/sandboxes?parent=base", status: 200,
		want: &call{"List", def, []any{"base"}}},
	{method: "POST", pattern: "/v1/sandboxes", path: "/v1/sandboxes", body: `{"name":"web","image":"debian","cpus":2,"memory":"1G","auto_checkpoint":"1h"}`, status: 202,
		want: &call{"Create", def, []any{api.CreateSandboxRequest{Name: "web", Image: "debian", CPUs: 2, Memory: "1G", AutoCheckpoint: "1h"}}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}", path: "/v1/sandboxes/web", status: 200,
		want: &call{"Info", def, []any{"web"}}, bodyHas: `"name":"web"`},
	{method: "DELETE", pattern: "/v1/sandboxes/{name}", path: "/v1/sandboxes/web", status: 202,
		want: &call{"Delete", def, []any{"web"}}},
	{method: "PATCH", pattern: "/v1/sandboxes/{name}", path: "/v1/sandboxes/web", body: `{"auto_checkpoint":"off"}`, status: 200,
		want: &call{"Configure", def, []any{"web", api.ConfigureSandboxRequest{AutoCheckpoint: "off"}}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}/files", path: "/v1/sandboxes/web/files?path=/d/f", status: 200,
		want: &call{"Files.Read", def, []any{"web", "/d/f"}}, bodyHas: "hello"},
	{method: "PUT", pattern: "/v1/sandboxes/{name}/files", path: "/v1/sandboxes/web/files?path=/d/f&mode=0600&owner=app:app", body: "DATA", status: 200,
		want: &call{"Files.Write", def, []any{"web", "/d/f", 0o600, "app:app", true, "DATA"}}, bodyHas: `"path":"/d/f"`},
	{method: "DELETE", pattern: "/v1/sandboxes/{name}/files", path: "/v1/sandboxes/web/files?path=/d&recursive=true", status: 200,
		want: &call{"Files.Remove", def, []any{"web", "/d", true}}, bodyHas: `"deleted":"/d"`},
	{method: "GET", pattern: "/v1/sandboxes/{name}/files/stat", path: "/v1/sandboxes/web/files/stat?path=/d/f", status: 200,
		want: &call{"Files.Stat", def, []any{"web", "/d/f"}}, bodyHas: `"type":"file"`},
	{method: "GET", pattern: "/v1/sandboxes/{name}/files/list", path: "/v1/sandboxes/web/files/list?path=/d&depth=3", status: 200,
		want: &call{"Files.List", def, []any{"web", "/d", 3}}, bodyHas: `[{"name":"f"`},
	{method: "POST", pattern: "/v1/sandboxes/{name}/files/mkdir", path: "/v1/sandboxes/web/files/mkdir", body: `{"path":"/d/e","parents":true}`, status: 201,
		want: &call{"Files.MakeDir", def, []any{"web", "/d/e", true}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/files/rename", path: "/v1/sandboxes/web/files/rename", body: `{"from":"/d/f","to":"/d/g"}`, status: 200,
		want: &call{"Files.Rename", def, []any{"web", "/d/f", "/d/g"}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}/files/tar", path: "/v1/sandboxes/web/files/tar?path=/d", status: 200,
		want: &call{"Files.TarOut", def, []any{"web", "/d"}}, bodyHas: "TARBYTES"},
	{method: "PUT", pattern: "/v1/sandboxes/{name}/files/tar", path: "/v1/sandboxes/web/files/tar?path=/d&parents=false", body: "TARBYTES", status: 200,
		want: &call{"Files.TarIn", def, []any{"web", "/d", false, "TARBYTES"}}, bodyHas: `"entries":1`},
	{method: "GET", pattern: "/v1/sandboxes/{name}/files/watch", path: "/v1/sandboxes/web/files/watch?path=/d&recursive=true", status: 200,
		want: &call{"Files.Watch", def, []any{"web", "/d", true}}, bodyHas: `"type":"create"`},
	{method: "POST", pattern: "/v1/sandboxes/{name}/start", path: "/v1/sandboxes/web/start", status: 202,
		want: &call{"Start", def, []any{"web"}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/stop", path: "/v1/sandboxes/web/stop", body: `{"snapshot":true}`, status: 202,
		want: &call{"Stop", def, []any{"web", api.StopRequest{Snapshot: true}}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/stop", path: "/v1/sandboxes/web/stop", status: 202,
		want: &call{"Stop", def, []any{"web", api.StopRequest{}}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/restart", path: "/v1/sandboxes/web/restart", status: 202,
		want: &call{"Restart", def, []any{"web"}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/exec", path: "/v1/sandboxes/web/exec", body: `{"command":["ls","-l"],"detach":true}`, status: 200,
		want: &call{"Exec", def, []any{"web", api.ExecRequest{Command: []string{"ls", "-l"}, Detach: true}}}, bodyHas: `{"pid":42}`},
	{method: "GET", pattern: "/v1/sandboxes/{name}/events", path: "/v1/sandboxes/web/events?since=0", status: 200,
		want: &call{"Get", def, []any{"web"}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}/processes", path: "/v1/sandboxes/web/processes", status: 200,
		want: &call{"Processes", def, []any{"web"}}, bodyHas: `"pid":42`},
	{method: "GET", pattern: "/v1/sandboxes/{name}/processes/{pid}", path: "/v1/sandboxes/web/processes/42", status: 200,
		want: &call{"Process", def, []any{"web", 42}}, bodyHas: `"state":"running"`},
	// Not upgradable through a recorder: refused before the role (the
	// attach itself is in stream_test.go).
	{method: "POST", pattern: "/v1/sandboxes/{name}/processes/{pid}/attach", path: "/v1/sandboxes/web/processes/42/attach", body: `{"offset":7}`, hdr: []string{"Upgrade", ExecUpgrade}, status: 400},
	{method: "POST", pattern: "/v1/sandboxes/{name}/processes/{pid}/stdin", path: "/v1/sandboxes/web/processes/42/stdin?close=true", body: "hello", status: 200,
		want: &call{"WriteStdin", def, []any{"web", 42, "hello", true}}, bodyHas: `"ok":true`},
	{method: "POST", pattern: "/v1/sandboxes/{name}/processes/{pid}/signal", path: "/v1/sandboxes/web/processes/42/signal", body: `{"signal":"kill"}`, status: 200,
		want: &call{"SignalProcess", def, []any{"web", 42, 9}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/processes/{pid}/signal", path: "/v1/sandboxes/web/processes/42/signal", status: 200,
		want: &call{"SignalProcess", def, []any{"web", 42, 15}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/processes/{pid}/wait", path: "/v1/sandboxes/web/processes/42/wait", status: 200,
		want: &call{"WaitProcess", def, []any{"web", 42}}, bodyHas: `"exit":{"code":3}`},
	{method: "GET", pattern: "/v1/sandboxes/{name}/services", path: "/v1/sandboxes/web/services", status: 200,
		want: &call{"Services", def, []any{"web"}}, bodyHas: "[]"},
	{method: "GET", pattern: "/v1/sandboxes/{name}/services/{service}/logs", path: "/v1/sandboxes/web/services/api/logs?tail_bytes=100", status: 200,
		want: &call{"ServiceLogs", def, []any{"web", "api", 100}}, bodyHas: "log of api"},
	{method: "GET", pattern: "/v1/sandboxes/{name}/services/{service}/logs", path: "/v1/sandboxes/web/services/api/logs", status: 200,
		want: &call{"ServiceLogs", def, []any{"web", "api", 0}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/checkpoint", path: "/v1/sandboxes/web/checkpoint", body: `{"comment":"c","memory":true}`, hdr: []string{"Accept", "application/json"}, status: 202,
		want: &call{"CreateCheckpoint", def, []any{"web", api.CreateCheckpointRequest{Comment: "c", Memory: true}}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}/checkpoints", path: "/v1/sandboxes/web/checkpoints?include_auto=true", status: 200,
		want: &call{"Checkpoints", def, []any{"web", true}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}/checkpoints", path: "/v1/sandboxes/web/checkpoints", status: 200,
		want: &call{"Checkpoints", def, []any{"web", false}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}/checkpoints/{id}", path: "/v1/sandboxes/web/checkpoints/v3", status: 200,
		want: &call{"Checkpoint", def, []any{"web", "v3"}}},
	{method: "DELETE", pattern: "/v1/sandboxes/{name}/checkpoints/{id}", path: "/v1/sandboxes/web/checkpoints/v3", status: 200,
		want: &call{"DeleteCheckpoint", def, []any{"web", "v3"}}, bodyHas: `{"deleted":"web/v3"}`},
	{method: "POST", pattern: "/v1/sandboxes/{name}/checkpoints/{id}/restore", path: "/v1/sandboxes/web/checkpoints/v3/restore", body: `{"as":"copy","disk_only":true}`, status: 202,
		want: &call{"Restore", def, []any{"web", "v3", api.RestoreRequest{As: "copy", DiskOnly: true}}}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/checkpoints/{id}/keep", path: "/v1/sandboxes/web/checkpoints/v3/keep", status: 200,
		want: &call{"KeepCheckpoint", def, []any{"web", "v3"}}, bodyHas: `"id":"v3"`},
	{method: "POST", pattern: "/v1/sandboxes/{name}/checkpoints/{id}/evict", path: "/v1/sandboxes/web/checkpoints/v3/evict", status: 200,
		want: &call{"EvictCheckpoint", def, []any{"web", "v3"}}, bodyHas: `"stored":"off-site only"`},
	{method: "POST", pattern: "/v1/sandboxes/{name}/fork", path: "/v1/sandboxes/web/fork", body: `{"count":3,"name_prefix":"kid"}`, status: 202,
		want: &call{"Fork", def, []any{"web", api.ForkRequest{Count: 3, NamePrefix: "kid"}}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}/diff", path: "/v1/sandboxes/web/diff?from=v1&to=v2", status: 200,
		want: &call{"Diff", def, []any{"web", "v1", "v2"}}},
	{method: "GET", pattern: "/v1/sandboxes/{name}/diff/file", path: "/v1/sandboxes/web/diff/file?from=v1&path=%2Fetc%2Fhosts", status: 200,
		want: &call{"DiffFile", def, []any{"web", "v1", "", "/etc/hosts"}}, bodyHas: `"path":"/etc/hosts"`},
	{method: "GET", pattern: "/v1/sandboxes/{name}/ports", path: "/v1/sandboxes/web/ports", status: 200,
		want: &call{"Ports", def, []any{"web"}}, bodyHas: `"port":8080`},
	{method: "POST", pattern: "/v1/sandboxes/{name}/ports", path: "/v1/sandboxes/web/ports", body: `{"port":8080,"public":true}`, status: 200,
		want: &call{"Publish", def, []any{"web", api.PublishPortRequest{Port: 8080, Public: true}}}, bodyHas: `"public":true`},
	{method: "DELETE", pattern: "/v1/sandboxes/{name}/ports/{port}", path: "/v1/sandboxes/web/ports/8080", status: 200,
		want: &call{"Unpublish", def, []any{"web", 8080}}, bodyHas: `{"unpublished":"web/8080"}`},
	// Without Upgrade: refused before the role (see TestConnectPort).
	{method: "POST", pattern: "/v1/sandboxes/{name}/ports/{port}/connect", path: "/v1/sandboxes/web/ports/5432/connect", status: 400},
	{method: "GET", pattern: "/v1/account/port-token", path: "/v1/account/port-token", status: 200,
		want: &call{"Token", def, []any{false}}, bodyHas: `"token":"tok"`},
	{method: "POST", pattern: "/v1/account/port-token/rotate", path: "/v1/account/port-token/rotate", status: 200,
		want: &call{"Token", def, []any{true}}, bodyHas: `"token":"tok2"`},
	{method: "GET", pattern: "/v1/snapshots", path: "/v1/snapshots", status: 200,
		want: &call{"Snapshots", def, nil}},
	{method: "POST", pattern: "/v1/sandboxes/{name}/snapshot", path: "/v1/sandboxes/web/snapshot", body: `{"name":"golden"}`, status: 202,
		want: &call{"CreateSnapshot", def, []any{"web", api.CreateCheckpointRequest{Name: "golden"}}}},
	{method: "DELETE", pattern: "/v1/snapshots/{ref}", path: "/v1/snapshots/golden", status: 200,
		want: &call{"DeleteSnapshot", def, []any{"golden"}}},
	{method: "POST", pattern: "/v1/snapshots/{ref}/restore", path: "/v1/snapshots/golden/restore", body: `{"name":"new","from_offsite":true}`, status: 202,
		want: &call{"RestoreSnapshot", def, []any{"golden", api.SnapshotRestoreRequest{Name: "new", FromOffsite: true}}}},
	{method: "GET", pattern: "/v1/account", path: "/v1/account", status: 200,
		want: &call{"Account", def, nil}, bodyHas: `"name":"default"`},
	{method: "POST", pattern: "/v1/verify", path: "/v1/verify", body: `{"offsite":true,"location":"primary"}`, status: 202,
		want: &call{"Verify", def, []any{api.VerifyRequest{Offsite: true, Location: "primary"}}}},
	{method: "GET", pattern: "/v1/offsite/checkpoints", path: "/v1/offsite/checkpoints", status: 200,
		want: &call{"OffsiteCheckpoints", def, nil}, bodyHas: `"manifest":"m1"`},
	{method: "POST", pattern: "/v1/offsite/import", path: "/v1/offsite/import", body: `{"all":true}`, status: 200,
		want: &call{"ImportOffsite", def, []any{api.ImportRequest{All: true}}}, bodyHas: `"imported":[`},
	{method: "GET", pattern: "/v1/operations", path: "/v1/operations", status: 200,
		want: &call{"Operations.List", "", nil}, noErr: true},
	{method: "GET", pattern: "/v1/operations/{id}", path: "/v1/operations/{op}", status: 200,
		want: &call{"Operations.Get", "", []any{"{op}"}}},
	{method: "GET", pattern: "/v1/operations/{id}/events", path: "/v1/operations/{op}/events", status: 200,
		want: &call{"Operations.Get", "", []any{"{op}"}}, bodyHas: `"type":"complete"`},
}

// Every route passes what the request says to the right role, for the
// account of the local socket, and answers what the role answers; an error
// of the role is answered in the error shape with its code.
func TestEveryRouteReachesItsRole(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range routeCases {
		covered[c.method+" "+c.pattern] = true
	}
	for _, rt := range routes {
		if !covered[rt.method+" "+rt.path] {
			t.Errorf("route %s %s has no case in routeCases", rt.method, rt.path)
		}
	}

	f := newFake(t)
	s := f.server()
	done := f.ops.Start("test", "x", func(ctx context.Context, op *operation.Op) (any, error) { return "ok", nil })
	if _, err := done.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	opID := done.Info().ID
	for _, c := range routeCases {
		name := c.method + " " + c.path
		path := strings.ReplaceAll(c.path, "{op}", opID)
		f.err = nil
		rec := serve(t, s, c.method, path, c.body, c.hdr...)
		if rec.Code != c.status {
			t.Errorf("%s: %d %s, want %d", name, rec.Code, rec.Body, c.status)
		}
		if c.bodyHas != "" && !strings.Contains(rec.Body.String(), c.bodyHas) {
			t.Errorf("%s: body %s lacks %s", name, rec.Body, c.bodyHas)
		}
		if c.status == http.StatusAccepted {
			var info api.Operation
			if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil || info.ID == "" || rec.Header().Get("Location") != "/v1/operations/"+info.ID {
				t.Errorf("%s: 202 with Location %q and body %s, want an operation and its Location", name, rec.Header().Get("Location"), rec.Body)
			}
		}
		checkCalls(t, name, f.takeCalls(), c.want, opID)

		if c.noErr || c.want == nil {
			continue
		}
		f.err = errdefs.New(api.CodeSandboxBusy, "busy for %s", c.want.Method)
		rec = serve(t, s, c.method, path, c.body, c.hdr...)
		if e := errorOf(t, rec); rec.Code != http.StatusConflict || e.Code != api.CodeSandboxBusy || e.Message != "busy for "+c.want.Method {
			t.Errorf("%s with the role failing: %d %+v, want 409 S05", name, rec.Code, e)
		}
		f.takeCalls()
	}
}

// checkCalls fails t unless calls is exactly want (none if want is nil).
func checkCalls(t *testing.T, name string, calls []call, want *call, opID string) {
	t.Helper()
	if want == nil {
		if len(calls) != 0 {
			t.Errorf("%s: calls %+v, want none", name, calls)
		}
		return
	}
	w := *want
	w.Args = append([]any(nil), w.Args...)
	for i, a := range w.Args {
		if a == "{op}" {
			w.Args[i] = opID
		}
	}
	if len(calls) != 1 || !reflect.DeepEqual(calls[0], w) {
		t.Errorf("%s: calls %+v, want [%+v]", name, calls, w)
	}
}

// Malformed requests are answered in the error shape and never reach a
// role.
func TestBadInputNeverReachesTheRoles(t *testing.T) {
	big := `{"name":"` + strings.Repeat("a", maxBody) + `"}`
	cases := []struct {
		method, path, body string
		hdr                []string
		status             int
		code               string
		msgHas             string
		allow              string
	}{
		{method: "POST", path: "/v1/sandboxes", body: "{not json", status: 400, code: api.CodeInvalidRequest, msgHas: "malformed JSON"},
		{method: "DELETE", path: "/v1/sandboxes/web/ports/http", status: 400, code: api.CodeInvalidArgument, msgHas: `invalid port "http"`},
		{method: "DELETE", path: "/v1/sandboxes/web/ports/000008080", status: 400, code: api.CodeInvalidArgument, msgHas: "invalid port"},
		{method: "POST", path: "/v1/sandboxes/web/ports", body: `{"port":"8080"}`, status: 400, code: api.CodeInvalidRequest, msgHas: "malformed JSON"},
		{method: "POST", path: "/v1/sandboxes/web/ports/5432/connect", status: 400, code: api.CodeInvalidRequest, msgHas: "Upgrade: cairn-tcp"},
		{method: "POST", path: "/v1/sandboxes/web/ports/x/connect", hdr: []string{"Upgrade", "cairn-tcp"}, status: 400, code: api.CodeInvalidArgument, msgHas: "invalid port"},
		{method: "POST", path: "/v1/sandboxes", body: `{"name":"a","bogus":1}`, status: 400, code: api.CodeInvalidRequest, msgHas: `"bogus"`},
		{method: "POST", path: "/v1/sandboxes", body: `{"name":5}`, status: 400, code: api.CodeInvalidRequest, msgHas: "malformed JSON"},
		{method: "POST", path: "/v1/sandboxes", body: "", status: 400, code: api.CodeInvalidRequest, msgHas: "empty"},
		{method: "PATCH", path: "/v1/sandboxes/web", body: "", status: 400, code: api.CodeInvalidRequest, msgHas: "empty"},
		{method: "POST", path: "/v1/sandboxes/web/exec", body: "", status: 400, code: api.CodeInvalidRequest, msgHas: "empty"},
		{method: "POST", path: "/v1/snapshots/golden/restore", body: "", status: 400, code: api.CodeInvalidRequest, msgHas: "empty"},
		{method: "POST", path: "/v1/sandboxes/web/stop", body: "{", status: 400, code: api.CodeInvalidRequest, msgHas: "malformed JSON"},
		{method: "POST", path: "/v1/sandboxes/web/checkpoint", body: `{"nope":1}`, status: 400, code: api.CodeInvalidRequest, msgHas: `"nope"`},
		{method: "POST", path: "/v1/sandboxes/web/fork", body: `{"count":"3"}`, status: 400, code: api.CodeInvalidRequest, msgHas: "malformed JSON"},
		{method: "POST", path: "/v1/sandboxes/web/exec", body: `{"command":"ls"}`, status: 400, code: api.CodeInvalidRequest, msgHas: "malformed JSON"},
		{method: "GET", path: "/v1/sandboxes/web/processes/abc", status: 400, code: api.CodeInvalidArgument, msgHas: `"abc"`},
		{method: "GET", path: "/v1/sandboxes/web/processes/0", status: 400, code: api.CodeInvalidArgument, msgHas: "pid"},
		{method: "POST", path: "/v1/sandboxes/web/processes/42/signal", body: `{"signal":"NOPE"}`, status: 400, code: api.CodeInvalidArgument, msgHas: "NOPE"},
		{method: "POST", path: "/v1/sandboxes/web/processes/42/signal", body: `{"signal":"65"}`, status: 400, code: api.CodeInvalidArgument, msgHas: "from 1 to 64"},
		{method: "POST", path: "/v1/sandboxes/web/processes/42/stdin?close=maybe", body: "x", status: 400, code: api.CodeInvalidArgument, msgHas: "close"},
		{method: "POST", path: "/v1/sandboxes/web/processes/42/attach", body: `{"offset":-1}`, hdr: []string{"Upgrade", ExecUpgrade}, status: 400, code: api.CodeInvalidArgument, msgHas: "offset"},
		{method: "POST", path: "/v1/sandboxes/web/processes/42/attach", body: `{}`, status: 400, code: api.CodeInvalidRequest, msgHas: "Upgrade: cairn-exec"},
		{method: "POST", path: "/v1/sandboxes/web/exec", body: `{"command":["sh"]}`, status: 400, code: api.CodeInvalidRequest, msgHas: "Upgrade: cairn-exec"},
		{method: "POST", path: "/v1/sandboxes/web/exec", body: `{"command":["sh"]}`, hdr: []string{"Upgrade", ExecUpgrade}, status: 400, code: api.CodeInvalidRequest, msgHas: "cannot be upgraded"},
		{method: "PUT", path: "/v1/sandboxes", status: 405, code: api.CodeInvalidRequest, msgHas: "PUT", allow: "GET, POST"},
		{method: "POST", path: "/v1/sandboxes/web", status: 405, code: api.CodeInvalidRequest, msgHas: "/v1/sandboxes/web", allow: "DELETE, GET, PATCH"},
		{method: "GET", path: "/v1/verify", status: 405, code: api.CodeInvalidRequest, allow: "POST"},
		{method: "DELETE", path: "/v1/operations/abc", status: 405, code: api.CodeInvalidRequest, allow: "GET"},
		{method: "GET", path: "/v2/nothing", status: 404, code: api.CodeInvalidRequest, msgHas: "/v2/nothing"},
		{method: "GET", path: "/v1/sandboxes/web/nothing", status: 404, code: api.CodeInvalidRequest, msgHas: "no API endpoint"},
		{method: "GET", path: "/", status: 404, code: api.CodeInvalidRequest},
		{method: "GET", path: "/v1/sandboxes/web/services/api/logs?tail_bytes=-1", status: 400, code: api.CodeInvalidArgument, msgHas: `"-1"`},
		{method: "GET", path: "/v1/sandboxes/web/services/api/logs?tail_bytes=abc", status: 400, code: api.CodeInvalidArgument, msgHas: "tail_bytes"},
		{method: "GET", path: "/v1/sandboxes/web/services/api/logs?tail_bytes=1.5", status: 400, code: api.CodeInvalidArgument, msgHas: "tail_bytes"},
		{method: "GET", path: "/v1/sandboxes/web/services/api/logs?tail_bytes=1048577", status: 400, code: api.CodeInvalidArgument, msgHas: "from 0 to 1048576"},
		{method: "GET", path: "/v1/sandboxes/web/services/api/logs?tail_bytes=99999999999999999999", status: 400, code: api.CodeInvalidArgument, msgHas: "tail_bytes"},
		{method: "GET", path: "/v1/sandboxes/web/services/api/logs?tail_bytes=NaN", status: 400, code: api.CodeInvalidArgument, msgHas: "tail_bytes"},
		{method: "GET", path: "/v1/sandboxes/web/services/api/logs?tail_bytes=%2B5", status: 400, code: api.CodeInvalidArgument, msgHas: "tail_bytes"},
		{method: "POST", path: "/v1/sandboxes", body: big, status: 413, code: api.CodeInvalidRequest, msgHas: "limit of 1 MiB"},
		{method: "POST", path: "/v1/sandboxes/web/stop", body: big, status: 413, code: api.CodeInvalidRequest, msgHas: "limit of 1 MiB"},
		{method: "POST", path: "/v1/sandboxes/web/exec", body: big, status: 413, code: api.CodeInvalidRequest, msgHas: "limit of 1 MiB"},
	}
	f := newFake(t)
	s := f.server()
	for _, c := range cases {
		name := fmt.Sprintf("%s %s %.40q", c.method, c.path, c.body)
		rec := serve(t, s, c.method, c.path, c.body, c.hdr...)
		e := errorOf(t, rec)
		if rec.Code != c.status || e.Code != c.code || !strings.Contains(e.Message, c.msgHas) {
			t.Errorf("%s: %d %+v, want %d %s with %q", name, rec.Code, e, c.status, c.code, c.msgHas)
		}
		if got := rec.Header().Get("Allow"); got != c.allow {
			t.Errorf("%s: Allow %q, want %q", name, got, c.allow)
		}
		if calls := f.takeCalls(); len(calls) != 0 {
			t.Errorf("%s: reached the roles: %+v", name, calls)
		}
	}

	// Just under the limit is fine.
	body := `{"name":"` + strings.Repeat("a", maxBody-len(`{"name":""}`)) + `"}`
	if rec := serve(t, s, "POST", "/v1/sandboxes", body); rec.Code != http.StatusAccepted {
		t.Errorf("a body of exactly 1 MiB: %d %.200s", rec.Code, rec.Body)
	}
}

// Every code of api/errors.go comes back with the HTTP status that
// docs/errors.md gives it (and statusOf), in the one error shape, with the
// role's message; a wrapped error keeps its code, an error without one is
// X01.
func TestEveryErrorCodeIsAnsweredWithItsStatus(t *testing.T) {
	codes := apiCodes(t)
	documented := documentedStatus(t)
	f := newFake(t)
	s := f.server()
	for name, code := range codes {
		want, ok := documented[code]
		if !ok {
			t.Errorf("%s (%s) is not in docs/errors.md", name, code)
			continue
		}
		if got := statusOf(code); got != want {
			t.Errorf("statusOf(%s) = %d, docs/errors.md says %d", code, got, want)
		}
		for _, err := range []error{
			errdefs.New(code, "failure %s", code),
			fmt.Errorf("context: %w", errdefs.New(code, "failure %s", code)),
		} {
			f.err = err
			rec := serve(t, s, "GET", "/v1/sandboxes/web", "")
			if e := errorOf(t, rec); rec.Code != want || e.Code != code || e.Message != err.Error() {
				t.Errorf("%s (%v): %d %+v, want %d %s %q", name, err, rec.Code, e, want, code, err)
			}
		}
	}
	if len(codes) != len(documented) {
		t.Errorf("api/errors.go has %d codes, docs/errors.md %d", len(codes), len(documented))
	}

	f.err = fmt.Errorf("disk on fire")
	rec := serve(t, s, "GET", "/v1/sandboxes/web", "")
	if e := errorOf(t, rec); rec.Code != 500 || e.Code != api.CodeInternal || e.Message != "disk on fire" {
		t.Errorf("an error without a code: %d %+v, want 500 X01", rec.Code, e)
	}
}

// apiCodes returns the Code… constants of api/errors.go by name.
func apiCodes(t *testing.T) map[string]string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "../../api/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, id := range vs.Names {
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(id.Name, "Code") {
				v, _ := strconv.Unquote(lit.Value)
				codes[id.Name] = v
			}
		}
		return true
	})
	if len(codes) < 20 {
		t.Fatalf("found only %d codes in api/errors.go", len(codes))
	}
	return codes
}

// documentedStatus returns the HTTP status of each code in docs/errors.md
// (the first, where several are listed).
func documentedStatus(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`^\| ([A-Z][0-9]{2}) \| ([0-9]{3})[ /]`)
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]], _ = strconv.Atoi(m[2])
		}
	}
	return out
}
