package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Several hosts (docs/several-hosts.md). A request about a sandbox whose
// row names another host is forwarded to that host, after this one
// checked the caller's role; so is a create placed on another host. A
// request another host forwarded (api.PeerHeader, checked by
// RemoteHandler) is always served here, never forwarded again.

type forwardedKey struct{}

// viaSocketKey marks the unix socket's requests: forwarded, they speak
// for the socket's administrator (api.CallerSocket).
type viaSocketKey struct{}

func isForwarded(r *http.Request) bool {
	v, _ := r.Context().Value(forwardedKey{}).(bool)
	return v
}

// callerOf is whom a forwarded r speaks for.
func callerOf(r *http.Request) string {
	if v, _ := r.Context().Value(viaSocketKey{}).(bool); v {
		return api.CallerSocket
	}
	return api.CallerToken
}

// forwarded serves r on another host when it is another host's, and
// reports whether it did (answered, an error included).
func (s *Server) forwarded(w http.ResponseWriter, r *http.Request, rt route) bool {
	if s.hosts == nil || isForwarded(r) {
		return false
	}
	// The role first: a caller that may not use the route learns
	// nothing of the hosts from it (its A02 is answered, and audited,
	// here by the route itself).
	if allowed(r, rt) != nil {
		return false
	}
	host, err := s.targetOf(w, r, rt)
	if err != nil {
		s.fail(w, r, err)
		return true
	}
	if host == "" {
		return false
	}
	s.hosts.Forward(w, r, host, callerOf(r), func(err error) { s.fail(w, r, err) })
	return true
}

// targetOf is the id of the host r is for, "" for this one.
func (s *Server) targetOf(w http.ResponseWriter, r *http.Request, rt route) (string, error) {
	switch {
	case strings.HasPrefix(rt.path, "/v1/operations/{id}"):
		return s.hosts.OperationHost(r.PathValue("id")), nil
	case rt.path == "/v1/sandboxes/{name}/checkpoints/{id}/restore":
		// A restore on another host (on) goes to that host: the
		// sandbox's own may be down.
		var req struct{ On string }
		if ok, err := peekBody(w, r, &req); err != nil || !ok || req.On == "" {
			if err != nil {
				return "", err
			}
			return s.hosts.SandboxHost(r.Context(), credential(r).Account, r.PathValue("name"))
		}
		return s.hosts.Place(r.Context(), req.On, "")
	case strings.HasPrefix(rt.path, "/v1/sandboxes/{name}"):
		return s.hosts.SandboxHost(r.Context(), credential(r).Account, r.PathValue("name"))
	case rt.path == "/v1/hosts/{name}/evacuate":
		// With a host to evacuate to, the evacuation runs there.
		var req struct{ To string }
		if ok, err := peekBody(w, r, &req); err != nil || !ok || req.To == "" {
			return "", err
		}
		return s.hosts.Place(r.Context(), req.To, "")
	case rt.method == http.MethodPost && rt.path == "/v1/sandboxes":
		var req struct{ Host, Image string }
		if ok, err := peekBody(w, r, &req); err != nil || !ok {
			return "", err
		}
		return s.hosts.Place(r.Context(), req.Host, req.Image)
	}
	return "", nil
}

// peekBody decodes r's JSON body into v and leaves it to be read again
// by the handler; ok is false for no body, or one that does not decode
// (the handler, served here, says what is wrong with it).
func peekBody(w http.ResponseWriter, r *http.Request, v any) (ok bool, err error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return false, jsonBodyError(err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return len(body) > 0 && json.Unmarshal(body, v) == nil, nil
}

// peer authenticates a request forwarded by another host: its proof,
// then whom it speaks for. ok is false when r is no forwarded request.
func (s *Server) peer(r *http.Request) (ctx context.Context, ok bool, err error) {
	proof := r.Header.Get(api.PeerHeader)
	if proof == "" {
		return nil, false, nil
	}
	if s.hosts == nil {
		return nil, true, errdefs.New(api.CodeUnauthenticated, "%s: this cairnd shares its metadata with no other host", api.PeerHeader)
	}
	from, err := s.hosts.VerifyPeer(r.Context(), proof)
	if err != nil {
		return nil, true, errdefs.New(api.CodeUnauthenticated, "%s: not a host's proof", api.PeerHeader)
	}
	ctx = context.WithValue(r.Context(), forwardedKey{}, true)
	switch r.Header.Get(api.CallerHeader) {
	case api.CallerSocket:
		cred := socketCredential
		cred.Remote = "unix via host " + from
		return auth.NewContext(ctx, cred), true, nil
	case api.CallerToken:
		return ctx, true, nil // the caller's token is checked below, as any
	}
	return nil, true, errdefs.New(api.CodeUnauthenticated, "%s: want %s or %s", api.CallerHeader, api.CallerToken, api.CallerSocket)
}

// evacuateHost answers POST /v1/hosts/{name}/evacuate.
func (s *Server) evacuateHost(w http.ResponseWriter, r *http.Request) error {
	var req api.EvacuateRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	noteTarget(r, r.PathValue("name"), "")
	if s.evacuations == nil {
		return errdefs.New(api.CodeNoHost, "this cairnd shares its metadata with no other host: there is no host %q to evacuate", r.PathValue("name"))
	}
	op, err := s.evacuations.Evacuate(r.Context(), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	return s.accepted(w, r, op)
}

// listHosts answers GET /v1/hosts.
func (s *Server) listHosts(w http.ResponseWriter, r *http.Request) error {
	out := []api.Host{}
	if s.hosts != nil {
		hs, err := s.hosts.List(r.Context())
		if err != nil {
			return err
		}
		out = hs
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
