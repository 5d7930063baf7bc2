package server

import (
	"encoding/json"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/openapi"
)

// The OpenAPI document has exactly the routes of the route table (and
// GET /metrics, which cairnd serves beside it): a route added without
// its description, or a description left after its route went, fails.
// Each operation names the route's handler (operationId) and the role the
// server asks of a token for it (x-cairn-role).
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Role        string `json:"x-cairn-role"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	type described struct{ id, role string }
	inDoc := map[string]described{}
	for path, item := range doc.Paths {
		for method, o := range item {
			inDoc[strings.ToUpper(method)+" "+path] = described{o.OperationID, o.Role}
		}
	}
	for _, rt := range routes {
		key := rt.method + " " + rt.path
		d, ok := inDoc[key]
		if !ok {
			t.Errorf("%s is not in api/openapi.json: describe it in internal/openapi/routes.go and run go generate ./api", key)
			continue
		}
		delete(inDoc, key)
		name := runtime.FuncForPC(reflect.ValueOf(rt.handler).Pointer()).Name()
		if handler := name[strings.LastIndex(name, ".")+1:]; d.id != handler {
			t.Errorf("%s: operationId %q, but its handler is %s", key, d.id, handler)
		}
		if want := string(needs(rt)); d.role != want {
			t.Errorf("%s: x-cairn-role %q, but the server asks for %s", key, d.role, want)
		}
	}
	delete(inDoc, openapi.MetricsRoute)
	var extra []string
	for key := range inDoc {
		extra = append(extra, key)
	}
	sort.Strings(extra)
	for _, key := range extra {
		t.Errorf("api/openapi.json describes %s, which the route table lacks", key)
	}
}

// GET /v1/openapi.json answers the embedded document as JSON.
func TestServesOpenAPI(t *testing.T) {
	rec := serve(t, newFake(t).server(), "GET", "/v1/openapi.json", "")
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || !reflect.DeepEqual(rec.Body.Bytes(), api.OpenAPI) {
		t.Fatalf("GET /v1/openapi.json: %d %q, %d bytes", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
}
