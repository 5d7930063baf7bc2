package openapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

const apiDir = "../../api"

// The committed document is what Build makes from the code now: a route
// description, an api type or a doc comment changed without `go generate
// ./api` fails here.
func TestCommittedDocumentIsCurrent(t *testing.T) {
	doc, err := Build(apiDir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, api.OpenAPI) {
		t.Fatal("api/openapi.json is out of date: run go generate ./api")
	}
}

// parsed is the committed document as generic JSON.
func parsed(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("api/openapi.json is not JSON: %v", err)
	}
	return doc
}

// The document is OpenAPI 3.x; every $ref resolves within it; every
// operation has a unique operationId, responses, and each path
// parameter of its path.
func TestDocumentIsValid(t *testing.T) {
	doc := parsed(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("openapi %q, want 3.x", doc["openapi"])
	}
	if info, _ := doc["info"].(map[string]any); info["title"] == nil || info["version"] == nil {
		t.Errorf("info %v lacks title or version", info)
	}
	var refs int
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				refs++
				if resolve(doc, ref) == nil {
					t.Errorf("%s: $ref %q does not resolve", at, ref)
				}
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for _, e := range v {
				walk(at+"[]", e)
			}
		}
	}
	walk("#", doc)
	if refs == 0 {
		t.Error("no $ref at all")
	}
	ids := map[string]string{}
	param := regexp.MustCompile(`\{([^}]+)\}`)
	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("no paths")
	}
	for path, item := range paths {
		for method, o := range item.(map[string]any) {
			o := o.(map[string]any)
			key := method + " " + path
			id, _ := o["operationId"].(string)
			if id == "" || ids[id] != "" {
				t.Errorf("%s: operationId %q missing or also %s's", key, id, ids[id])
			}
			ids[id] = key
			if r, _ := o["responses"].(map[string]any); r["default"] == nil || len(r) < 2 {
				t.Errorf("%s: responses %v: want an answer and the error default", key, r)
			}
			declared := map[string]bool{}
			ps, _ := o["parameters"].([]any)
			for _, p := range ps {
				p := p.(map[string]any)
				if p["in"] == "path" {
					declared[p["name"].(string)] = true
				}
			}
			for _, m := range param.FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s: path parameter %s not declared", key, m[1])
				}
			}
		}
	}
}

// resolve follows a local JSON pointer ("#/components/schemas/Sandbox").
func resolve(doc map[string]any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = doc
	for _, tok := range strings.Split(rest, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
	}
	return cur
}

// componentTypes is the Go type of each component the document has.
func componentTypes(t *testing.T) map[string]reflect.Type {
	docs, err := readComments(apiDir)
	if err != nil {
		t.Fatal(err)
	}
	s := newSchemas(docs)
	s.ref(reflect.TypeFor[api.ErrorBody]())
	for _, o := range operations {
		o.build(s, docs)
	}
	return s.named
}

// Each component schema has exactly the properties the JSON tags of its
// api struct give, required exactly when not omitempty: a field added to
// an api type, renamed or made optional without the document fails.
func TestSchemasMatchAPITypes(t *testing.T) {
	doc := parsed(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	types := componentTypes(t)
	for name, typ := range types {
		sc, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("api.%s is used by a route and has no component", name)
			continue
		}
		if sc["x-go-type"] != "api."+name {
			t.Errorf("component %s: x-go-type %v", name, sc["x-go-type"])
		}
		var wantProps, wantReq []string
		for i := range typ.NumField() {
			if n, optional, ok := jsonField(typ.Field(i)); ok {
				wantProps = append(wantProps, n)
				if !optional {
					wantReq = append(wantReq, n)
				}
			}
		}
		var gotProps, gotReq []string
		props, _ := sc["properties"].(map[string]any)
		for n := range props {
			gotProps = append(gotProps, n)
		}
		req, _ := sc["required"].([]any)
		for _, n := range req {
			gotReq = append(gotReq, n.(string))
		}
		for _, l := range [][]string{wantProps, wantReq, gotProps, gotReq} {
			slices.Sort(l)
		}
		if !slices.Equal(gotProps, wantProps) {
			t.Errorf("component %s has properties %v; api.%s's JSON fields are %v", name, gotProps, name, wantProps)
		}
		if !slices.Equal(gotReq, wantReq) {
			t.Errorf("component %s requires %v; api.%s always has %v", name, gotReq, name, wantReq)
		}
	}
	for name := range schemas {
		if types[name] == nil {
			t.Errorf("component %s is no api type a route uses", name)
		}
	}
}

// The document lists every error code of package api, with its meaning.
func TestEveryErrorCodeListed(t *testing.T) {
	codes := parsed(t)["components"].(map[string]any)["x-error-codes"].(map[string]any)
	for _, c := range []string{api.CodeNoCheckpoint, api.CodeDiskLimit, api.CodeInterrupted, api.CodeInternal, api.CodeRateLimited} {
		if s, _ := codes[c].(string); s == "" {
			t.Errorf("code %s missing or without meaning", c)
		}
	}
}
