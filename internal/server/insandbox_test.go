package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// serveScoped is serve with a request context that ends with the request,
// as a real connection's does.
func serveScoped(t *testing.T, h http.Handler, method, path, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// The management socket of a sandbox acts for that sandbox alone: every
// call carries the account and name Whoami gives for its id, whatever the
// request says; routes outside sandboxRoutes do not exist there; a Whoami
// error is answered in the error shape and nothing else is called.
func TestManagementSocketIsScopedToItsSandbox(t *testing.T) {
	const acct, name = "acct-x", "inside"
	cases := []routeCase{
		{method: "GET", pattern: "/v1", path: "/v1", status: 200,
			want: &call{"Get", acct, []any{name}}, bodyHas: `"name":"inside","account":"acct-x"`},
		{method: "GET", pattern: "/v1/checkpoints", path: "/v1/checkpoints?include_auto=true", status: 200,
			want: &call{"Checkpoints", acct, []any{name, true}}},
		{method: "POST", pattern: "/v1/checkpoint", path: "/v1/checkpoint", body: `{"comment":"before upgrade"}`, hdr: []string{"Accept", "application/json"}, status: 202,
			want: &call{"CreateCheckpointFromInside", acct, []any{name, api.CreateCheckpointRequest{Comment: "before upgrade"}}}},
		{method: "POST", pattern: "/v1/checkpoint", path: "/v1/checkpoint", status: 200, bodyHas: `"type":"complete"`,
			want: &call{"CreateCheckpointFromInside", acct, []any{name, api.CreateCheckpointRequest{}}}},
		{method: "POST", pattern: "/v1/checkpoint", path: "/v1/checkpoint", body: `{"name":"golden","memory":true,"label":"l"}`, hdr: []string{"Accept", "application/json"}, status: 202,
			want: &call{"CreateCheckpointFromInside", acct, []any{name, api.CreateCheckpointRequest{Name: "golden", Memory: true, Label: "l"}}}},
		{method: "GET", pattern: "/v1/checkpoints/{id}", path: "/v1/checkpoints/v2", status: 200,
			want: &call{"Checkpoint", acct, []any{name, "v2"}}},
		{method: "POST", pattern: "/v1/checkpoints/{id}/restore", path: "/v1/checkpoints/v2/restore", body: `{"no_safety_checkpoint":true}`, status: 202,
			want: &call{"RestoreFromInside", acct, []any{name, "v2", api.RestoreRequest{NoSafetyCheckpoint: true}}}, bodyHas: `"kind":"fake.RestoreFromInside"`},
		{method: "GET", pattern: "/v1/operations/{id}", path: "/v1/operations/{op}", status: 200,
			want: &call{"Operations.Get", "", []any{"{op}"}}},
		{method: "GET", pattern: "/v1/operations/{id}/events", path: "/v1/operations/{op}/events", status: 200,
			want: &call{"Operations.Get", "", []any{"{op}"}}, bodyHas: `"type":"complete"`},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.method+" "+c.pattern] = true
	}
	for _, rt := range sandboxRoutes {
		if !covered[rt.method+" "+rt.path] {
			t.Errorf("route %s %s has no case", rt.method, rt.path)
		}
	}

	f := newFake(t)
	f.whoAccount, f.whoName = acct, name
	h := f.server().SandboxHandler("sb-1")
	// The operations it answers about are those started through it.
	opID := startInside(t, f, h)
	whoami := call{"Whoami", "sb-1", nil}
	for _, c := range cases {
		label := "management socket: " + c.method + " " + c.path
		path := strings.ReplaceAll(c.path, "{op}", opID)
		f.err = nil
		rec := serveScoped(t, h, c.method, path, c.body, c.hdr...)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.bodyHas) {
			t.Errorf("%s: %d %s, want %d with %s", label, rec.Code, rec.Body, c.status, c.bodyHas)
		}
		calls := f.takeCalls()
		if len(calls) == 0 || !reflect.DeepEqual(calls[0], whoami) {
			t.Errorf("%s: calls %+v do not start with Whoami(sb-1)", label, calls)
			continue
		}
		checkCalls(t, label, calls[1:], c.want, opID)

		f.err = errdefs.New(api.CodeNoCheckpoint, "no checkpoint here")
		rec = serveScoped(t, h, c.method, path, c.body, c.hdr...)
		if e := errorOf(t, rec); rec.Code != http.StatusNotFound || e.Code != api.CodeNoCheckpoint {
			t.Errorf("%s with the role failing: %d %+v, want 404 K08", label, rec.Code, e)
		}
		f.takeCalls()
	}
	f.err = nil

	// Nothing but sandboxRoutes: no other sandbox, account or snapshot can
	// be named.
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sandboxes"},
		{"GET", "/v1/sandboxes/other"},
		{"POST", "/v1/sandboxes"},
		{"POST", "/v1/sandboxes/other/exec"},
		{"GET", "/v1/sandboxes/other/checkpoints"},
		{"POST", "/v1/sandboxes/inside/checkpoints/v2/keep"},
		{"POST", "/v1/checkpoints/v2/keep"},
		{"GET", "/v1/account"},
		{"GET", "/v1/snapshots"},
		{"POST", "/v1/verify"},
		{"GET", "/v1/operations"},
		{"GET", "/v1/images"},
	} {
		rec := serveScoped(t, h, c.method, c.path, "{}")
		if e := errorOf(t, rec); rec.Code != http.StatusNotFound || e.Code != api.CodeInvalidRequest {
			t.Errorf("management socket: %s %s: %d %+v, want 404 V03", c.method, c.path, rec.Code, e)
		}
		if calls := f.takeCalls(); len(calls) != 1 || !reflect.DeepEqual(calls[0], whoami) {
			t.Errorf("management socket: %s %s: calls %+v, want only Whoami", c.method, c.path, calls)
		}
	}
	rec := serveScoped(t, h, "DELETE", "/v1/checkpoints/v2", "")
	if e := errorOf(t, rec); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET" || e.Code != api.CodeInvalidRequest {
		t.Errorf("management socket: DELETE /v1/checkpoints/v2: %d %v %+v, want 405 Allow: GET", rec.Code, rec.Header(), e)
	}
	f.takeCalls()

	// Whoami fails: the error, in the one shape, and nothing else called.
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{errdefs.New(api.CodeNoSandbox, "this sandbox no longer exists"), 404, api.CodeNoSandbox},
		{errors.New("store closed"), 500, api.CodeInternal},
	} {
		f.whoErr = c.err
		for _, path := range []string{"/v1", "/v1/checkpoints", "/v1/nothing"} {
			rec := serveScoped(t, h, "GET", path, "")
			if e := errorOf(t, rec); rec.Code != c.status || e.Code != c.code || e.Message != c.err.Error() {
				t.Errorf("Whoami failing with %v: GET %s: %d %+v, want %d %s", c.err, path, rec.Code, e, c.status, c.code)
			}
			if calls := f.takeCalls(); len(calls) != 1 || !reflect.DeepEqual(calls[0], whoami) {
				t.Errorf("Whoami failing: GET %s: calls %+v, want only Whoami", path, calls)
			}
		}
	}
}

// startInside starts an operation through the management socket h (a
// checkpoint), waits for it and returns its id. The fake's calls are
// forgotten.
func startInside(t *testing.T, f *fake, h http.Handler) string {
	t.Helper()
	rec := serveScoped(t, h, "POST", "/v1/checkpoint", "", "Accept", "application/json")
	var op api.Operation
	if err := json.Unmarshal(rec.Body.Bytes(), &op); rec.Code != http.StatusAccepted || err != nil || op.ID == "" {
		t.Fatalf("POST /v1/checkpoint: %d %s", rec.Code, rec.Body)
	}
	got, err := f.ops.Get(op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := got.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.takeCalls()
	return op.ID
}
