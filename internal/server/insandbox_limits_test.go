package server

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// A management socket answers about the operations started through it
// alone: one of another sandbox's socket, or one started on the main API
// (an account-level verify), is answered as an unknown one, O01, and
// nothing of it is streamed.
func TestManagementSocketOperationsAreItsOwn(t *testing.T) {
	f := newFake(t)
	s := f.server()
	a, b := s.SandboxHandler("sb-a"), s.SandboxHandler("sb-b")
	opA := startInside(t, f, a)
	opB := startInside(t, f, b)
	account := f.ops.Start("verify", "account/default", func(ctx context.Context, op *operation.Op) (any, error) { return "ok", nil })
	if _, err := account.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		h    http.Handler
		who  string
		id   string
		seen bool
	}{
		{a, "a", opA, true}, {a, "a", opB, false}, {a, "a", account.Info().ID, false},
		{b, "b", opB, true}, {b, "b", opA, false}, {b, "b", "nope", false},
	} {
		for _, path := range []string{"/v1/operations/" + c.id, "/v1/operations/" + c.id + "/events"} {
			rec := serveScoped(t, c.h, "GET", path, "")
			switch {
			case c.seen && rec.Code != http.StatusOK:
				t.Errorf("socket %s: GET %s: %d %s, want 200", c.who, path, rec.Code, rec.Body)
			case !c.seen:
				if e := errorOf(t, rec); rec.Code != http.StatusNotFound || e.Code != api.CodeNoOperation || e.Message != `no operation "`+c.id+`"` {
					t.Errorf("socket %s: GET %s: %d %+v, want 404 O01 as for an unknown id", c.who, path, rec.Code, e)
				}
				if strings.Contains(rec.Body.String(), "working on") {
					t.Errorf("socket %s: GET %s leaked the events: %s", c.who, path, rec.Body)
				}
			}
		}
	}
	// The main API still sees every one.
	for _, id := range []string{opA, opB, account.Info().ID} {
		if rec := serve(t, s, "GET", "/v1/operations/"+id, ""); rec.Code != http.StatusOK {
			t.Errorf("main API: GET /v1/operations/%s: %d", id, rec.Code)
		}
	}
}

// The bodies of the management socket hold the fields docs/sandbox-api.md
// lists, and nothing else: any other (those the main API knows included)
// is V03 and reaches no role; so is a body past 4 KiB (413), trailing data
// or a body that is not an object. name and memory are the sandbox's
// settings' to allow: they go to CreateCheckpointFromInside, never to
// CreateCheckpoint, and its V02 comes back as such.
func TestManagementSocketRefusesUndocumentedFields(t *testing.T) {
	f := newFake(t)
	h := f.server().SandboxHandler("sb-1")
	json := []string{"Accept", "application/json"}
	for _, c := range []struct {
		path, body string
		status     int
		msgHas     string
	}{
		{"/v1/checkpoint", `{"comment":"x","bogus":1}`, 400, `unknown field "bogus"`},
		{"/v1/checkpoint", `{"trigger":"interval"}`, 400, `unknown field "trigger"`},
		{"/v1/checkpoint", `{"comment":"x"} {"memory":true}`, 400, "after the object"},
		{"/v1/checkpoint", `["comment"]`, 400, "malformed"},
		{"/v1/checkpoint", `{"comment":"` + strings.Repeat("a", sandboxMaxBody) + `"}`, 413, "4096 bytes"},
		{"/v1/checkpoints/v1/restore", `{"as":"copy"}`, 400, `unknown field "as"`},
		{"/v1/checkpoints/v1/restore", `{"disk_only":true}`, 400, `unknown field "disk_only"`},
		{"/v1/checkpoints/v1/restore", `{"from_offsite":true}`, 400, `unknown field "from_offsite"`},
		{"/v1/checkpoints/v1/restore", `{"no_safety_checkpoint":"yes"}`, 400, "malformed"},
	} {
		rec := serveScoped(t, h, "POST", c.path, c.body, json...)
		if e := errorOf(t, rec); rec.Code != c.status || e.Code != api.CodeInvalidRequest || !strings.Contains(e.Message, c.msgHas) {
			t.Errorf("POST %s %.60s: %d %+v, want %d V03 with %q", c.path, c.body, rec.Code, e, c.status, c.msgHas)
		}
		if calls := f.takeCalls(); len(calls) != 1 || calls[0].Method != "Whoami" {
			t.Errorf("POST %s %.60s: calls %+v, want only Whoami", c.path, c.body, calls)
		}
	}

	// Empty bodies and white space are the defaults.
	for _, body := range []string{"", " \n", "{}"} {
		rec := serveScoped(t, h, "POST", "/v1/checkpoint", body, json...)
		calls := f.takeCalls()
		if rec.Code != http.StatusAccepted || len(calls) != 2 ||
			!reflect.DeepEqual(calls[1], call{"CreateCheckpointFromInside", "acct-x", []any{"inside", api.CreateCheckpointRequest{}}}) {
			t.Errorf("POST /v1/checkpoint %q: %d, calls %+v", body, rec.Code, calls)
		}
	}

	// The settings refuse: their code and message come back.
	f.err = errorV02("named snapshots from inside sandbox inside are not allowed")
	rec := serveScoped(t, h, "POST", "/v1/checkpoint", `{"name":"golden"}`, json...)
	if e := errorOf(t, rec); rec.Code != 400 || e.Code != api.CodeInvalidArgument || !strings.Contains(e.Message, "not allowed") {
		t.Errorf("a name the settings refuse: %d %+v, want 400 V02", rec.Code, e)
	}
	calls := f.takeCalls()
	if len(calls) != 2 || !reflect.DeepEqual(calls[1], call{"CreateCheckpointFromInside", "acct-x", []any{"inside", api.CreateCheckpointRequest{Name: "golden"}}}) {
		t.Errorf("a name: calls %+v, want it given to CreateCheckpointFromInside", calls)
	}
	f.err = errorL06("sandbox inside may make 2 checkpoints a minute from inside")
	rec = serveScoped(t, h, "POST", "/v1/checkpoint", "", json...)
	if e := errorOf(t, rec); rec.Code != http.StatusTooManyRequests || e.Code != api.CodeInsideQuota {
		t.Errorf("past the quota: %d %+v, want 429 L06", rec.Code, e)
	}
}

// A sandbox that asks too often is answered 429 L05, with Retry-After,
// before anything is looked up; its rate fills again with time, and the
// socket of another sandbox is not slowed by it.
func TestManagementSocketRequestRate(t *testing.T) {
	f := newFake(t)
	s := f.server()
	h, other := s.SandboxHandler("sb-1"), s.SandboxHandler("sb-2")
	ok, limited := 0, 0
	start := time.Now()
	for range 3 * sandboxRequestBurst {
		rec := serveScoped(t, h, "GET", "/v1", "")
		switch rec.Code {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			if e := errorOf(t, rec); e.Code != api.CodeTooManyRequests || rec.Header().Get("Retry-After") != "1" {
				t.Fatalf("429 with %+v, Retry-After %q; want L05 and 1", e, rec.Header().Get("Retry-After"))
			}
		default:
			t.Fatalf("GET /v1: %d %s", rec.Code, rec.Body)
		}
	}
	elapsed := time.Since(start)
	if most := sandboxRequestBurst + int(elapsed.Seconds()*sandboxRequestRate) + 1; ok < sandboxRequestBurst || ok > most || limited == 0 {
		t.Errorf("%d requests in %v: %d answered, %d refused; want %d to %d answered", 3*sandboxRequestBurst, elapsed, ok, limited, sandboxRequestBurst, most)
	}
	if whoami := len(f.takeCalls()); whoami != 2*ok {
		t.Errorf("%d calls for %d requests answered: a refused request reached the roles", whoami, ok)
	}
	if rec := serveScoped(t, other, "GET", "/v1", ""); rec.Code != http.StatusOK {
		t.Errorf("the other sandbox's socket: %d, want 200", rec.Code)
	}
	time.Sleep(200 * time.Millisecond) // 4 tokens back
	if rec := serveScoped(t, h, "GET", "/v1", ""); rec.Code != http.StatusOK {
		t.Errorf("after a pause: %d, want 200", rec.Code)
	}
}
