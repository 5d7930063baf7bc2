package openapi

import (
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
)

// op describes one route.
type op struct {
	method, path string
	// id is the operationId: the name of the route's handler in
	// internal/server (a test checks it).
	id      string
	tag     string
	summary string
	desc    string
	// admin: only admin tokens may use it; otherwise a GET is read's and
	// the rest member's (as internal/server's needs).
	admin bool
	// member: a GET that needs member all the same (it reads a secret
	// that opens more than records).
	member bool
	query  []param
	body   *body
	resp   []resp
	codes  []string // the error codes it answers, beyond the common ones
}

// param is a query parameter.
type param struct {
	name, desc string
	schema     obj
	required   bool
}

// body is a request body.
type body struct {
	typ      reflect.Type // its JSON schema; nil: media is raw bytes
	media    string       // default application/json
	desc     string
	optional bool // an empty body is taken as {}
}

// resp is one response.
type resp struct {
	status  int
	media   string       // "" for none (101)
	typ     reflect.Type // the JSON of the body (or of each NDJSON line)
	array   bool         // a JSON array of typ
	schema  obj          // instead of typ
	desc    string
	headers obj
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// Query parameter schemas.
var (
	str     = obj{{"type", "string"}}
	boolean = obj{{"type", "boolean"}}
	integer = obj{{"type", "integer"}, {"format", "int64"}, {"minimum", 0}}
)

func q(name string, schema obj, desc string) param {
	return param{name: name, desc: desc, schema: schema}
}

func jsonBody[T any](desc string) *body { return &body{typ: typeOf[T](), desc: desc} }

// optionalBody is a JSON body that may be left out (no body: {}).
func optionalBody[T any](desc string) *body {
	return &body{typ: typeOf[T](), desc: desc, optional: true}
}

func ok[T any](desc string) resp {
	return resp{status: 200, media: "application/json", typ: typeOf[T](), desc: desc}
}

func list[T any](desc string) resp {
	return resp{status: 200, media: "application/json", typ: typeOf[T](), array: true, desc: desc}
}

func created[T any](desc string) resp {
	return resp{status: 201, media: "application/json", typ: typeOf[T](), desc: desc}
}

// done is a 200 answer {"FIELD":"…"} saying what was done.
func done(field, desc string) resp {
	return resp{status: 200, media: "application/json", desc: desc, schema: obj{
		{"type", "object"}, {"properties", obj{{field, obj{{"type", "string"}}}}}, {"required", []string{field}},
	}}
}

var locationHeader = obj{{"Location", obj{
	{"description", "/v1/operations/{id} of the operation"}, {"schema", obj{{"type", "string"}}},
}}}

var operationHeader = obj{{"Cairn-Operation", obj{
	{"description", "the id of the operation streamed"}, {"schema", obj{{"type", "string"}}},
}}}

// accepted is what long work answers: 202 and the Operation, or its
// events streamed with Accept: application/x-ndjson. result says what
// the complete event carries.
func accepted(result string) []resp {
	return []resp{
		{status: 202, media: "application/json", typ: typeOf[api.Operation](), headers: locationHeader,
			desc: "The operation started; its complete event carries " + result + "."},
		{status: 200, media: "application/x-ndjson", typ: typeOf[api.Event](), headers: operationHeader,
			desc: "With Accept: application/x-ndjson: the operation's events, one per line, from the first to its complete event (carrying " + result + ") or error event."},
	}
}

// upgrade is a 101 Switching Protocols to protocol.
func upgrade(protocol, desc string) resp {
	return resp{status: 101, desc: desc, headers: obj{{"Upgrade", obj{
		{"description", protocol}, {"schema", obj{{"type", "string"}, {"const", protocol}}},
	}}}}
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// paramDesc says what path parameter name of path is.
func paramDesc(path, name string) string {
	switch {
	case name == "name" && strings.HasPrefix(path, "/v1/images/"):
		return "the image's name"
	case name == "name" && strings.HasPrefix(path, "/v1/accounts/"):
		return "the account's name"
	case name == "name":
		return "the sandbox's name in the caller's account"
	case name == "id" && strings.HasPrefix(path, "/v1/operations/"):
		return "the operation's id"
	case name == "id" && strings.HasPrefix(path, "/v1/tokens/"):
		return "the token's id (its public part)"
	case name == "id":
		return "a checkpoint of the sandbox: its id (v3, auto-20261129T091500Z), global id or snapshot name"
	case name == "ref":
		return "a checkpoint of the account: its global id, a snapshot name, or SANDBOX/ID"
	case name == "service":
		return "the service's name (/etc/cairn/services/NAME.json inside)"
	case name == "port":
		return "a port inside the sandbox, 1-65535"
	case name == "pid":
		return "a process: its pid inside the sandbox (a background process's id; see the list)"
	}
	panic("openapi: no description of path parameter " + name + " of " + path)
}

// role is the least role of an API token that may use o.
func (o op) role() string {
	switch {
	case o.admin:
		return "admin"
	case o.member:
		return "member"
	case o.method == http.MethodGet || o.method == http.MethodHead:
		return "read"
	}
	return "member"
}

// build is o's Operation Object.
func (o op) build(s *schemas, docs *comments) obj {
	out := obj{{"tags", []string{o.tag}}, {"summary", o.summary}}
	desc := o.desc
	if len(o.codes) > 0 {
		var b strings.Builder
		for i, c := range o.codes {
			meaning, known := docs.codes[c]
			if !known {
				panic(fmt.Sprintf("openapi: %s %s lists unknown error code %s", o.method, o.path, c))
			}
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s (%s)", c, meaning)
		}
		desc = strings.TrimSpace(desc + "\n\nErrors: " + b.String() + ".")
	}
	if desc != "" {
		out = append(out, kv{"description", desc})
	}
	out = append(out, kv{"operationId", o.id})
	var params []obj
	for _, m := range pathParam.FindAllStringSubmatch(o.path, -1) {
		params = append(params, obj{{"name", m[1]}, {"in", "path"}, {"required", true},
			{"description", paramDesc(o.path, m[1])}, {"schema", obj{{"type", "string"}}}})
	}
	for _, p := range o.query {
		params = append(params, obj{{"name", p.name}, {"in", "query"}, {"required", p.required},
			{"description", p.desc}, {"schema", p.schema}})
	}
	if len(params) > 0 {
		out = append(out, kv{"parameters", params})
	}
	if b := o.body; b != nil {
		media := b.media
		if media == "" {
			media = "application/json"
		}
		var schema obj
		if b.typ != nil {
			schema = s.of(b.typ)
		} else {
			schema = obj{{"type", "string"}, {"format", "binary"}}
		}
		rb := obj{}
		if b.desc != "" {
			rb = append(rb, kv{"description", b.desc})
		}
		out = append(out, kv{"requestBody", append(rb, kv{"required", !b.optional},
			kv{"content", obj{{media, obj{{"schema", schema}}}}})})
	}
	responses := obj{}
	for _, r := range o.resp {
		ro := obj{{"description", r.desc}}
		if len(r.headers) > 0 {
			ro = append(ro, kv{"headers", r.headers})
		}
		if r.media != "" {
			schema := r.schema
			if r.typ != nil {
				schema = s.of(r.typ)
			}
			if r.array {
				schema = obj{{"type", "array"}, {"items", schema}}
			}
			if schema == nil {
				schema = obj{{"type", "string"}}
			}
			ro = append(ro, kv{"content", obj{{r.media, obj{{"schema", schema}}}}})
		}
		responses = append(responses, kv{strconv.Itoa(r.status), ro})
	}
	responses = append(responses, kv{"default", obj{{"$ref", "#/components/responses/Error"}}})
	out = append(out, kv{"responses", responses})
	return append(out, kv{"x-cairn-role", o.role()})
}
