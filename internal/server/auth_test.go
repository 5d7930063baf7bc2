package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// fakeAuth knows a token per role, each of account "acct-b".
type fakeAuth struct{}

func (fakeAuth) Authenticate(_ context.Context, token, remote string) (auth.Credential, error) {
	role, ok := strings.CutPrefix(token, "tok-")
	if !ok || !auth.Role(role).Valid() {
		return auth.Credential{}, errdefs.New(api.CodeUnauthenticated, "the API token is not valid")
	}
	return auth.Credential{Account: "acct-b", Role: auth.Role(role), TokenID: "abcdefghijkl", TokenName: role, Remote: remote}, nil
}

// hostWide are the routes whose calls act for no account: what the host
// shares (images), manages (accounts, tokens) or keeps per request
// (operations, checked against the starting account in the server).
var hostWide = map[string]bool{
	"GET /v1/images": true, "POST /v1/images/pull": true, "POST /v1/images/import": true, "POST /v1/images/build": true,
	"GET /v1/images/{name}": true, "DELETE /v1/images/{name}": true, "POST /v1/images/prune": true,
	"GET /v1/accounts": true, "POST /v1/accounts": true, "PATCH /v1/accounts/{name}": true, "DELETE /v1/accounts/{name}": true,
	"GET /v1/tokens": true, "POST /v1/tokens": true, "DELETE /v1/tokens/{id}": true, "GET /v1/hosts": true, "POST /v1/hosts/{name}/evacuate": true,
	"GET /v1/operations": true, "GET /v1/operations/{id}": true, "GET /v1/operations/{id}/events": true,
}

// Through the TCP listener, every route of the table acts for the
// token's account alone, whatever the request says: each call a route
// makes carries the token's account, or the route is one of the host's
// (hostWide). A route added later that takes its account from anywhere
// else fails here.
func TestRemoteRoutesActForTheTokensAccount(t *testing.T) {
	f := newFake(t)
	s := f.server()
	h := s.RemoteHandler(fakeAuth{}, nil)
	for _, c := range routeCases {
		route := c.method + " " + c.pattern
		path := c.path
		if strings.Contains(path, "{op}") {
			// An operation of acct-b's own, started through the API.
			op := f.ops.Start("test", "x", func(context.Context, *operation.Op) (any, error) { return "ok", nil })
			op.Wait(t.Context())
			s.accountOps.add(op.Info().ID, "acct-b", s.ops)
			path = strings.ReplaceAll(path, "{op}", op.Info().ID)
		}
		f.err = nil
		f.takeCalls()
		rec := serve(t, h, c.method, path, c.body, append([]string{"Authorization", "Bearer tok-admin"}, c.hdr...)...)
		if rec.Code != c.status {
			t.Errorf("%s: %d %s, want %d", route, rec.Code, rec.Body, c.status)
			continue
		}
		for _, got := range f.takeCalls() {
			switch {
			case got.Account == "" && !hostWide[route]:
				t.Errorf("%s: called %s for no account; a route of an account's must act for the token's", route, got.Method)
			case got.Account != "" && got.Account != "acct-b" && got.Method != "Whoami":
				t.Errorf("%s: called %s for account %q, want the token's, acct-b", route, got.Method, got.Account)
			}
		}
	}
}

// A request without a token, or with a bad one, is A01 with a Bearer
// challenge; read cannot change anything, member cannot manage the host.
func TestRemoteRolesAndCredentials(t *testing.T) {
	f := newFake(t)
	h := f.server().RemoteHandler(fakeAuth{}, nil)
	for _, tc := range []struct {
		hdr    []string
		status int
		code   string
	}{
		{nil, http.StatusUnauthorized, api.CodeUnauthenticated},
		{[]string{"Authorization", "Basic eDp5"}, http.StatusUnauthorized, api.CodeUnauthenticated},
		{[]string{"Authorization", "Bearer nope"}, http.StatusUnauthorized, api.CodeUnauthenticated},
	} {
		rec := serve(t, h, "GET", "/v1/sandboxes", "", tc.hdr...)
		if e := errorOf(t, rec); rec.Code != tc.status || e.Code != tc.code || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%v: %d %+v %q", tc.hdr, rec.Code, e, rec.Header().Get("WWW-Authenticate"))
		}
	}
	if calls := f.takeCalls(); len(calls) != 0 {
		t.Fatalf("unauthenticated requests reached the roles: %+v", calls)
	}
	for _, c := range routeCases {
		rt := route{method: c.method, path: c.pattern}
		for _, role := range []auth.Role{auth.RoleRead, auth.RoleMember, auth.RoleAdmin} {
			if role.Allows(needs(rt)) {
				continue
			}
			f.takeCalls()
			path := strings.ReplaceAll(c.path, "{op}", "0123456789abcdef")
			rec := serve(t, h, c.method, path, c.body, append([]string{"Authorization", "Bearer tok-" + string(role)}, c.hdr...)...)
			if e := errorOf(t, rec); rec.Code != http.StatusForbidden || e.Code != api.CodeForbidden {
				t.Errorf("%s %s as %s: %d %+v, want 403 A02", c.method, c.pattern, role, rec.Code, e)
			}
			if calls := f.takeCalls(); len(calls) != 0 {
				t.Errorf("%s %s as %s reached the roles: %+v", c.method, c.pattern, role, calls)
			}
		}
	}
	// What read may do: every GET; never a change.
	for _, rt := range routes {
		if need := needs(rt); (rt.method == "GET") != (need == auth.RoleRead) && !adminRoutes[rt.method+" "+rt.path] && !memberRoutes[rt.method+" "+rt.path] {
			t.Errorf("%s %s needs %s", rt.method, rt.path, need)
		}
	}
	if !reflect.DeepEqual(needs(route{method: "DELETE", path: "/v1/tokens/{id}"}), auth.RoleAdmin) {
		t.Error("revoking a token is not admin's")
	}
}

// A token past its rate gets 429 A03 with Retry-After, and is let in
// again as its bucket refills.
func TestRemoteRateLimitPerToken(t *testing.T) {
	f := newFake(t)
	s := f.server()
	now := time.Unix(1e9, 0)
	s.tokenRates.now = func() time.Time { return now }
	h := s.RemoteHandler(fakeAuth{}, nil)
	limited := 0
	for range tokenRequestBurst + 10 {
		rec := serve(t, h, "GET", "/v1/whoami", "", "Authorization", "Bearer tok-read")
		if rec.Code == http.StatusTooManyRequests {
			limited++
			if e := errorOf(t, rec); e.Code != api.CodeRateLimited || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("limited: %+v %q", e, rec.Header().Get("Retry-After"))
			}
		}
	}
	if limited != 10 {
		t.Errorf("%d of %d requests limited, want 10", limited, tokenRequestBurst+10)
	}
	now = now.Add(time.Second)
	if rec := serve(t, h, "GET", "/v1/whoami", "", "Authorization", "Bearer tok-read"); rec.Code != http.StatusOK {
		t.Errorf("a second later: %d", rec.Code)
	}
}

// Every route that changes something is audited (or, a use and not a
// change, skipped by name): a route added later without an audit name
// fails here. A change is recorded with the token, the target and the
// outcome: ok, accepted with its operation, or the error code (A02 for a
// role that may not).
func TestEveryChangeIsAudited(t *testing.T) {
	for _, rt := range routes {
		key := rt.method + " " + rt.path
		if rt.method == http.MethodGet {
			if auditActions[key] != "" {
				t.Errorf("%s is a GET and audited", key)
			}
			continue
		}
		if auditActions[key] == "" && !auditSkipped[key] {
			t.Errorf("%s changes something and has no audit action", key)
		}
	}
	f := newFake(t)
	h := f.server().RemoteHandler(fakeAuth{}, nil)
	serve(t, h, "DELETE", "/v1/sandboxes/web/checkpoints/v3", "", "Authorization", "Bearer tok-member")
	serve(t, h, "POST", "/v1/sandboxes/web/start", "", "Authorization", "Bearer tok-member")
	serve(t, h, "POST", "/v1/sandboxes/web/stop", "{}", "Authorization", "Bearer tok-read")
	f.err = errdefs.New(api.CodeNoSandbox, "no sandbox named %q", "gone")
	serve(t, h, "DELETE", "/v1/sandboxes/gone", "", "Authorization", "Bearer tok-member")
	serve(t, h, "GET", "/v1/sandboxes/web", "", "Authorization", "Bearer tok-member")
	got := f.audit.take()
	want := []struct{ action, target, outcome, token string }{
		{"checkpoint.delete", "web/v3", "ok", "member"},
		{"sandbox.start", "web", "accepted", "member"},
		{"sandbox.stop", "web", api.CodeForbidden, "read"},
		{"sandbox.delete", "gone", api.CodeNoSandbox, "member"},
	}
	if len(got) != len(want) {
		t.Fatalf("audit log %+v, want %d entries", got, len(want))
	}
	for i, w := range want {
		e := got[i]
		if e.Action != w.action || e.Target != w.target || e.Outcome != w.outcome || e.TokenName != w.token || e.Account != "acct-b" || e.Remote == "" {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
	if !strings.HasPrefix(got[1].Detail, "operation ") {
		t.Errorf("an accepted change does not name its operation: %+v", got[1])
	}
}

// Bad tokens from one address: after authFailBurst of them, every request
// from it is A03 with Retry-After, a good token's too, before the token is
// looked at; another address is untouched, requests without a token are
// not counted, and one more try is let in as the allowance comes back.
func TestRemoteRateLimitFailedAuthPerAddress(t *testing.T) {
	f := newFake(t)
	s := f.server()
	now := time.Unix(1e9, 0)
	s.authFails.now = func() time.Time { return now }
	h := s.RemoteHandler(fakeAuth{}, nil)
	from := func(remote, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/v1/whoami", nil)
		req.RemoteAddr = remote
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for range 2 * authFailBurst {
		if rec := from("198.51.100.9:4000", ""); rec.Code != http.StatusUnauthorized {
			t.Fatalf("no token: %d", rec.Code)
		}
	}
	for i := range authFailBurst {
		if rec := from("203.0.113.5:"+itoa(5000+i), "cairn_guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("bad token %d: %d, want 401 until the allowance is spent", i, rec.Code)
		}
	}
	for _, tok := range []string{"cairn_guess", "tok-read", ""} {
		rec := from("203.0.113.5:6000", tok)
		if e := errorOf(t, rec); rec.Code != http.StatusTooManyRequests || e.Code != api.CodeRateLimited || rec.Header().Get("Retry-After") != "6" {
			t.Errorf("token %q from the guessing address: %d %+v Retry-After %q, want 429 A03 6", tok, rec.Code, e, rec.Header().Get("Retry-After"))
		}
	}
	if rec := from("203.0.113.6:5000", "tok-read"); rec.Code != http.StatusOK {
		t.Errorf("a good token from another address: %d %s", rec.Code, rec.Body)
	}
	if rec := from("198.51.100.9:4000", "tok-read"); rec.Code != http.StatusOK {
		t.Errorf("after requests without a token: %d %s", rec.Code, rec.Body)
	}
	now = now.Add(authFailEvery)
	if rec := from("203.0.113.5:6001", "tok-read"); rec.Code != http.StatusOK {
		t.Errorf("once the allowance is back: %d %s", rec.Code, rec.Body)
	}
	if rec := from("203.0.113.5:6002", "cairn_guess"); rec.Code != http.StatusUnauthorized {
		t.Errorf("one more guess: %d", rec.Code)
	}
	if rec := from("203.0.113.5:6003", "tok-read"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("after it: %d, want 429", rec.Code)
	}
}

// A forced account delete is admin's, an operation, audited as such; a
// token cannot force the delete of its own account, and force is true or
// false.
func TestForcedAccountDelete(t *testing.T) {
	f := newFake(t)
	h := f.server().RemoteHandler(fakeAuth{}, nil)
	for _, tc := range []struct {
		path, token string
		status      int
		code        string
	}{
		{"/v1/accounts/team?force=true", "tok-member", http.StatusForbidden, api.CodeForbidden},
		{"/v1/accounts/acct-b?force=true", "tok-admin", http.StatusBadRequest, api.CodeInvalidArgument},
		{"/v1/accounts/team?force=yes", "tok-admin", http.StatusBadRequest, api.CodeInvalidArgument},
	} {
		rec := serve(t, h, "DELETE", tc.path, "", "Authorization", "Bearer "+tc.token)
		if e := errorOf(t, rec); rec.Code != tc.status || e.Code != tc.code {
			t.Errorf("%s as %s: %d %+v, want %d %s", tc.path, tc.token, rec.Code, e, tc.status, tc.code)
		}
	}
	if calls := f.takeCalls(); len(calls) != 0 {
		t.Errorf("refused deletes reached Access: %+v", calls)
	}
	rec := serve(t, h, "DELETE", "/v1/accounts/team?force=true", "", "Authorization", "Bearer tok-admin")
	if rec.Code != http.StatusAccepted {
		t.Fatalf("forced delete: %d %s", rec.Code, rec.Body)
	}
	got := f.audit.take()
	last := got[len(got)-1]
	if last.Action != "account.delete" || last.Target != "team" || last.Outcome != "accepted" || !strings.HasPrefix(last.Detail, "force; operation ") {
		t.Errorf("audit entry %+v, want account.delete of team, accepted, force and its operation", last)
	}
}
