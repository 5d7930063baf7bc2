package server

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

type observed struct {
	api, route, code string
	status           int
}

type recordingObserver struct {
	mu   sync.Mutex
	seen []observed
}

func (o *recordingObserver) Request(api, route string, status int, code string, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, observed{api, route, code, status})
}

func (o *recordingObserver) take() []observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.seen
	o.seen = nil
	return s
}

// Every request is observed once, labelled with its route's method and
// pattern (never the raw path), its status and its error code; a miss is
// "unmatched".
func TestRequestsObservedByRoutePattern(t *testing.T) {
	f := newFake(t)
	s := f.server()
	obs := &recordingObserver{}
	s.requests = obs
	for _, c := range routeCases {
		path := strings.ReplaceAll(c.path, "{op}", "0123456789abcdef")
		f.err = nil
		rec := serve(t, s, c.method, path, c.body, c.hdr...)
		got := obs.take()
		want := c.method + " " + c.pattern
		if len(got) != 1 || got[0].route != want || got[0].api != hostAPI || got[0].status != rec.Code {
			t.Errorf("%s %s (%d): observed %+v, want one of route %q", c.method, path, rec.Code, got, want)
		}
	}
	f.err = errdefs.New(api.CodeSandboxBusy, "busy")
	serve(t, s, "POST", "/v1/sandboxes/web/start", "")
	serve(t, s, "GET", "/v2/web", "")
	serve(t, s, "PUT", "/v1/sandboxes/web", "")
	want := []observed{
		{hostAPI, "POST /v1/sandboxes/{name}/start", api.CodeSandboxBusy, 409},
		{hostAPI, unmatchedRoute, api.CodeInvalidRequest, 404},
		{hostAPI, unmatchedRoute, api.CodeInvalidRequest, 405},
	}
	got := obs.take()
	if len(got) != len(want) {
		t.Fatalf("observed %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("observed %+v, want %+v", got[i], want[i])
		}
	}
}
