// Package openapi writes the OpenAPI 3.1 document of cairnd's API
// (api/openapi.json, served at GET /v1/openapi.json): the routes as
// described here (routes.go, a table in the order of the server's
// route table) and the schemas of their bodies, made by reflection from
// the wire types of package api with their doc comments as descriptions.
//
// The document is committed and embedded (api.OpenAPI); `go generate
// ./api` writes it again. Tests hold it to the code: here, that it is
// what Build makes now (so a field added to an api type without
// regenerating fails) and that every $ref resolves; in package server,
// that it has exactly the routes of the route table, each with the role
// and handler the table gives it.
package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
)

// kv is one member of an obj.
type kv struct {
	k string
	v any
}

// obj is a JSON object that keeps its members in order.
type obj []kv

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshal(m.k)
		if err != nil {
			return nil, err
		}
		v, err := marshal(m.v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.k, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without escaping <, > and & (the document is
// not embedded in HTML, and people read it).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Version is the document's version of the API (info.version).
const Version = "1"

// Build returns the document, reading the doc comments of package api
// from its source in apiDir.
func Build(apiDir string) ([]byte, error) {
	docs, err := readComments(apiDir)
	if err != nil {
		return nil, fmt.Errorf("read package api's comments: %w", err)
	}
	s := newSchemas(docs)
	s.ref(reflect.TypeFor[api.ErrorBody]())
	paths := obj{}
	byPath := map[string]int{}
	seen := map[string]bool{}
	for _, o := range operations {
		key := o.method + " " + o.path
		if seen[key] {
			return nil, fmt.Errorf("%s described twice", key)
		}
		seen[key] = true
		i, ok := byPath[o.path]
		if !ok {
			i = len(paths)
			byPath[o.path] = i
			paths = append(paths, kv{o.path, obj{}})
		}
		item := paths[i].v.(obj)
		paths[i].v = append(item, kv{strings.ToLower(o.method), o.build(s, docs)})
	}
	doc := obj{
		{"openapi", "3.1.0"},
		{"info", obj{
			{"title", "cairnd API"},
			{"version", Version},
			{"description", description},
		}},
		{"servers", []obj{
			{{"url", "https://{host}:{port}"}, {"description", "cairnd --listen ADDR:PORT: the same API over HTTPS, for API tokens (docs/accounts.md)"},
				{"variables", obj{{"host", obj{{"default", "localhost"}}}, {"port", obj{{"default", "7443"}}}}}},
			{{"url", "http://localhost"}, {"description", "the unix socket /run/cairn/cairn.sock (cairnd --socket; root only, no credentials: the default account, as admin)"}},
		}},
		{"security", []obj{{}, {{"token", []string{}}}}},
		{"tags", tags},
		{"paths", paths},
		{"components", obj{
			{"schemas", s.components()},
			{"responses", obj{{"Error", obj{
				{"description", "The one error shape, with a fitting HTTP status (docs/errors.md). Besides the codes an operation lists, any may answer V03 (a malformed request or body: 400, 408, 413), A01 (no or bad API token: 401), A02 (the token's role does not allow it: 403), A03 (rate limited: 429, with Retry-After) and X01 (an unexpected failure: 500)."},
				{"content", obj{{"application/json", obj{{"schema", obj{{"$ref", "#/components/schemas/ErrorBody"}}}}}}},
			}}}},
			{"securitySchemes", obj{{"token", obj{
				{"type", "http"}, {"scheme", "bearer"},
				{"description", "An API token, cairn_<id>_<secret> (cairn token create), on the HTTPS listener; requests on the unix socket carry none."},
			}}}},
			{"x-error-codes", errorCodes(docs)},
		}},
	}
	compact, err := marshal(doc)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

const description = "The REST API of cairnd (docs/api.md says the same in prose). " +
	"Every route is declared once, in internal/server/routes.go; a test keeps this document to that table. " +
	"A request body is exactly one JSON value of at most 1 MiB: unknown fields and data after the value are refused (V03). " +
	"Errors have one shape, {\"error\":{\"code\",\"message\"}} (components.responses.Error; the codes: components.x-error-codes, docs/errors.md). " +
	"Long work answers 202 with an Operation and a Location header, or, with Accept: application/x-ndjson, streams the operation's events in the response itself: " +
	"one JSON Event per line, ending with a complete or error event (docs/api.md#operations). " +
	"A response of media type application/x-ndjson is such a stream; its schema is that of each line. " +
	"Exec and port connections upgrade the connection (101): what flows after is described in docs/exec-protocol.md and docs/ports.md. " +
	"x-cairn-role is the least role of an API token that may use a route (read < member < admin)."

var tags = []obj{
	{{"name", "server"}, {"description", "cairnd itself"}},
	{{"name", "images"}, {"description", "Images sandboxes start from (docs/images.md)"}},
	{{"name", "sandboxes"}, {"description", "Sandboxes and their lifecycle"}},
	{{"name", "processes"}, {"description", "What runs in a sandbox: exec, services, events"}},
	{{"name", "files"}, {"description", "A running sandbox's files, as it sees them (docs/files.md)"}},
	{{"name", "checkpoints"}, {"description", "A sandbox's checkpoints: create, list, restore, fork, diff (docs/checkpoints.md)"}},
	{{"name", "snapshots"}, {"description", "Named and automatic checkpoints, account-wide"}},
	{{"name", "ports"}, {"description", "Published ports and raw connections (docs/ports.md)"}},
	{{"name", "account"}, {"description", "The caller's account"}},
	{{"name", "access"}, {"description", "Accounts, API tokens and the audit log (docs/accounts.md)"}},
	{{"name", "hosts"}, {"description", "The hosts that share one metadata database (docs/several-hosts.md)"}},
	{{"name", "operations"}, {"description", "Long work and its events"}},
}

// errorCodes is every error code with what it means, in the order of
// api/errors.go.
func errorCodes(docs *comments) obj {
	out := obj{}
	for _, c := range docs.order {
		out = append(out, kv{c, docs.codes[c]})
	}
	return out
}
