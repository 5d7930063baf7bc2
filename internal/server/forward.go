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
	host, err := s.targetOf(w, r, rt)
	if err == nil && host != "" {
		err = allowed(r, rt)
	}
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
	case strings.HasPrefix(rt.path, "/v1/sandboxes/{name}"):
		return s.hosts.SandboxHost(r.Context(), credential(r).Account, r.PathValue("name"))
	case rt.method == http.MethodPost && rt.path == "/v1/sandboxes":
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			return "", jsonBodyError(err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct{ Host, Image string }
		if json.Unmarshal(body, &req) != nil {
			return "", nil // the handler says what is wrong with it
		}
		return s.hosts.Place(r.Context(), req.Host, req.Image)
	}
	return "", nil
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
