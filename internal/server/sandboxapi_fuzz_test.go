package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

var errorCode = regexp.MustCompile(`^[VSIKLRAOX][0-9]{2}$`)

// FuzzSandboxAPI drives the real handler of a sandbox's management socket
// (/.cairn/api.sock: what code inside a sandbox can call) over the fake
// deps with arbitrary methods, paths, Accept headers and bodies. Whatever
// comes in: no panic; every error is the one JSON shape with a code; every
// call the handler makes acts for the sandbox's own account and name; a
// body the handler acted on is exactly one JSON value of the request type,
// within the size limit, decoded as it is; a larger body is 413.
func FuzzSandboxAPI(f *testing.F) {
	f.Add(uint8(0), "/v1", "", []byte(nil))
	f.Add(uint8(0), "/v1/checkpoints?include_auto=true", "", []byte(nil))
	f.Add(uint8(1), "/v1/checkpoint", "application/json", []byte(`{"comment":"before","label":"x","memory":true}`))
	f.Add(uint8(1), "/v1/checkpoint", "application/x-ndjson", []byte(`{"comment":"a"} {"comment":"b"}`))
	f.Add(uint8(1), "/v1/checkpoint", "", []byte(`{"comment":"a","sandbox":"other"}`))
	f.Add(uint8(1), "/v1/checkpoints/v2/restore", "", []byte(`{"memory":true}`))
	f.Add(uint8(1), "/v1/checkpoints/..%2F..%2Fother%2Fv1/restore", "", []byte(`{}`))
	f.Add(uint8(0), "/v1/sandboxes/other/checkpoints", "", []byte(nil))
	f.Add(uint8(2), "/v1/checkpoints/v2", "", []byte(nil))
	f.Add(uint8(0), "/v1/operations/op-1/events", "", []byte(nil))
	f.Add(uint8(1), "/v1/checkpoint", "", bytes.Repeat([]byte(" "), maxBody+1))
	methods := []string{"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "get"}
	f.Fuzz(func(t *testing.T, m uint8, path, accept string, body []byte) {
		method := methods[int(m)%len(methods)]
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://cairn"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		req.Header.Set("Accept", accept)
		fk := newFake(t)
		rec := httptest.NewRecorder()
		fk.server().SandboxHandler("sb-id").ServeHTTP(rec, req)
		cancel()

		status := rec.Code
		if status >= 400 && method != "HEAD" {
			var eb api.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || !errorCode.MatchString(eb.Error.Code) || eb.Error.Message == "" {
				t.Fatalf("%s %s: status %d with body %q, want the error shape", method, path, status, rec.Body.Bytes())
			}
			if status >= 500 {
				t.Fatalf("%s %s: status %d (%s): a request must not make cairnd fail", method, path, status, eb.Error.Message)
			}
		}
		if len(body) > maxBody && status < 400 {
			t.Fatalf("%s %s: a body of %d bytes was accepted", method, path, len(body))
		}
		for _, c := range fk.takeCalls() {
			if c.Method == "Whoami" || strings.HasPrefix(c.Method, "Operations.") {
				continue
			}
			if c.Account != "acct-x" || len(c.Args) == 0 || c.Args[0] != "inside" {
				t.Fatalf("%s %s: call %+v does not act for the sandbox itself", method, path, c)
			}
			var got, want any
			switch c.Method {
			case "CreateCheckpoint":
				got, want = c.Args[1], new(api.CreateCheckpointRequest)
			case "RestoreFromInside":
				got, want = c.Args[2], new(api.RestoreRequest)
			default:
				continue
			}
			if len(body) > 0 {
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.DisallowUnknownFields()
				if err := dec.Decode(want); err != nil || !json.Valid(body) {
					t.Fatalf("%s %s: acted on body %q, which is not one JSON %T (%v)", method, path, body, want, err)
				}
			}
			if !reflect.DeepEqual(got, reflect.ValueOf(want).Elem().Interface()) {
				t.Fatalf("%s %s: request %+v, body says %+v", method, path, got, want)
			}
		}
	})
}
