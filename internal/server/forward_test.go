package server

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// farHosts is three hosts: sandbox "far" runs on host "hb", a create with
// host "hc" is placed there, and the peer proof "hb good" is host hb's.
type farHosts struct{ fakeHosts }

func (farHosts) SandboxHost(_ context.Context, _, name string) (string, error) {
	if name == "far" {
		return "hb", nil
	}
	return "", nil
}

func (farHosts) Place(_ context.Context, want, _ string) (string, error) {
	switch want {
	case "", "ha":
		return "", nil
	case "hc":
		return "hc", nil
	}
	return "", errdefs.New(api.CodeNoHost, "no host named %q", want)
}

func (farHosts) VerifyPeer(_ context.Context, proof string) (string, error) {
	if proof == "hb good" {
		return "hb", nil
	}
	return "", errdefs.New(api.CodeUnauthenticated, "bad proof")
}

func farServer(t *testing.T) (*fake, *Server) {
	f := newFake(t)
	s := New(Deps{
		Sandboxes: f, Views: f, Checkpoints: f, Rewinds: f, Processes: f, Files: f, Accounts: f, Access: fakeAccess{f}, Audit: &f.audit,
		Images: fakeImages{f}, Operations: fakeOps{f}, Scope: f, Ports: f, Activity: f.hub, Hosts: farHosts{fakeHosts{f}},
	}, api.ServerInfo{Version: "test"})
	return f, s
}

// A request for another host's sandbox is forwarded to that host, for
// the socket's administrator or for the token's caller, after the role is
// checked here; a create is forwarded to the host it is placed on; the
// rest is answered here.
func TestRequestsForAnotherHostAreForwarded(t *testing.T) {
	f, s := farServer(t)
	remote := s.RemoteHandler(fakeAuth{}, nil)
	for _, c := range []struct {
		what               string
		h                  http.Handler
		method, path, body string
		hdr                []string
		status             int
		want               []call
	}{
		{"socket exec", s, "POST", "/v1/sandboxes/far/exec", `{"cmd":["true"]}`, nil, http.StatusTeapot,
			[]call{{"Hosts.Forward", "", []any{"hb", api.CallerSocket}}}},
		{"token get", remote, "GET", "/v1/sandboxes/far", "", []string{"Authorization", "Bearer tok-read"}, http.StatusTeapot,
			[]call{{"Hosts.Forward", "", []any{"hb", api.CallerToken}}}},
		{"a read token's stop is refused here", remote, "POST", "/v1/sandboxes/far/stop", "{}", []string{"Authorization", "Bearer tok-read"}, http.StatusForbidden, nil},
		{"a local sandbox", s, "GET", "/v1/sandboxes/near", "", nil, http.StatusOK, []call{{"Info", def, []any{"near"}}}},
		{"create placed on hc", s, "POST", "/v1/sandboxes", `{"name":"new","host":"hc"}`, nil, http.StatusTeapot,
			[]call{{"Hosts.Forward", "", []any{"hc", api.CallerSocket}}}},
		{"create on an unknown host", s, "POST", "/v1/sandboxes", `{"name":"new","host":"nope"}`, nil, http.StatusNotFound, nil},
		{"create here", s, "POST", "/v1/sandboxes", `{"name":"new","host":"ha"}`, nil, http.StatusAccepted,
			[]call{{"Create", def, []any{api.CreateSandboxRequest{Name: "new", Host: "ha"}}}}},
		{"forwarded by hb: served here", remote, "GET", "/v1/sandboxes/far", "",
			[]string{api.PeerHeader, "hb good", api.CallerHeader, api.CallerSocket}, http.StatusOK, []call{{"Info", def, []any{"far"}}}},
		{"forwarded for a token: the token is checked here", remote, "GET", "/v1/sandboxes/far", "",
			[]string{api.PeerHeader, "hb good", api.CallerHeader, api.CallerToken, "Authorization", "Bearer tok-read"}, http.StatusOK,
			[]call{{"Info", "acct-b", []any{"far"}}}},
		{"forwarded for a token without one", remote, "GET", "/v1/sandboxes/far", "",
			[]string{api.PeerHeader, "hb good", api.CallerHeader, api.CallerToken}, http.StatusUnauthorized, nil},
		{"a forged proof", remote, "GET", "/v1/sandboxes/far", "",
			[]string{api.PeerHeader, "hb forged", api.CallerHeader, api.CallerSocket, "Authorization", "Bearer tok-admin"}, http.StatusUnauthorized, nil},
	} {
		f.takeCalls()
		rec := serve(t, c.h, c.method, c.path, c.body, c.hdr...)
		if rec.Code != c.status {
			t.Errorf("%s: %d %s, want %d", c.what, rec.Code, rec.Body, c.status)
		}
		if got := f.takeCalls(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: calls %+v, want %+v", c.what, got, c.want)
		}
	}
}
