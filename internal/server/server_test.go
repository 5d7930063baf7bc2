package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// The edge answers unknown routes, wrong methods and malformed bodies in the
// one error shape. (handlers_test.go tests every route against a fake;
// test/integration, end to end.)
func TestErrorsHaveOneShape(t *testing.T) {
	s := New(Deps{Operations: operation.NewRegistry(t.Context(), nil)}, api.ServerInfo{Version: "test"})
	cases := []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/v2/nothing", "", 404, api.CodeInvalidRequest},
		{"PUT", "/v1/sandboxes", "", 405, api.CodeInvalidRequest},
		{"POST", "/v1/sandboxes", "{not json", 400, api.CodeInvalidRequest},
		{"POST", "/v1/sandboxes", "", 400, api.CodeInvalidRequest},
		{"POST", "/v1/sandboxes", `{"name":"a","bogus":1}`, 400, api.CodeInvalidRequest},
		{"GET", "/v1/operations/nope", "", 404, api.CodeNoOperation},
		{"GET", "/v1/operations/nope/events", "", 404, api.CodeNoOperation},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
		var eb api.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
			t.Errorf("%s %s: body %q is not the error shape", c.method, c.path, rec.Body)
			continue
		}
		if rec.Code != c.status || eb.Error.Code != c.code || eb.Error.Message == "" {
			t.Errorf("%s %s: %d %+v, want %d %s", c.method, c.path, rec.Code, eb.Error, c.status, c.code)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/v1", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"version":"test"`) {
		t.Errorf("GET /v1: %d %s", rec.Code, rec.Body)
	}
}

func TestEveryCodeHasAStatus(t *testing.T) {
	for code, want := range map[string]int{
		api.CodeInvalidName: 400, api.CodeNoSandbox: 404, api.CodeNameTaken: 409, api.CodeNotRunning: 409,
		api.CodeNoCheckpoint: 404, api.CodeDiskLimit: 507, api.CodePoolFull: 507, api.CodeInternal: 500, api.CodeExecFailed: 422,
	} {
		if got := statusOf(code); got != want {
			t.Errorf("statusOf(%s) = %d, want %d", code, got, want)
		}
	}
}

// GET /v1 answers the fingerprint of the certificate served now, not the
// one cairnd started with.
func TestServerInfoFingerprintIsCurrent(t *testing.T) {
	fp := "sha256:aa"
	s := New(Deps{Operations: operation.NewRegistry(t.Context(), nil), Fingerprint: func() string { return fp }},
		api.ServerInfo{Version: "test", Listen: "https://127.0.0.1:7443", TLSFingerprint: "sha256:stale"})
	info := func() api.ServerInfo {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/v1", nil))
		var got api.ServerInfo
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("GET /v1: %s", rec.Body)
		}
		return got
	}
	if got := info().TLSFingerprint; got != "sha256:aa" {
		t.Errorf("fingerprint %q, want sha256:aa", got)
	}
	fp = "sha256:bb" // renewed
	if got := info().TLSFingerprint; got != "sha256:bb" {
		t.Errorf("after a renewal: fingerprint %q, want sha256:bb", got)
	}
}
