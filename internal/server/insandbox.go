package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
)

// sandboxRoutes is the API of the management socket, /.cairn/api.sock,
// served to the processes inside one sandbox and scoped to it alone: no
// route takes a sandbox or account name, so nothing else can be named.
// See docs/sandbox-api.md.
var sandboxRoutes = []route{
	{"GET", "/v1", (*Server).sbInfo},
	{"GET", "/v1/checkpoints", (*Server).sbListCheckpoints},
	{"POST", "/v1/checkpoint", (*Server).sbCreateCheckpoint},
	{"GET", "/v1/checkpoints/{id}", (*Server).sbGetCheckpoint},
	{"POST", "/v1/checkpoints/{id}/restore", (*Server).sbRestore},
	{"GET", "/v1/operations/{id}", (*Server).getOperation},
	{"GET", "/v1/operations/{id}/events", (*Server).operationEvents},
}

type scopeKey struct{}

// scope is the sandbox a management-socket request comes from.
type scope struct{ account, name string }

// SandboxHandler returns the handler of sandbox id's management socket.
func (s *Server) SandboxHandler(id string) http.Handler {
	mux := newMux(s, sandboxRoutes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		account, name, err := s.scope.Whoami(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), scopeKey{}, scope{account, name})
		mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

func scopeOf(r *http.Request) scope {
	sc, _ := r.Context().Value(scopeKey{}).(scope)
	return sc
}

func (s *Server) sbInfo(w http.ResponseWriter, r *http.Request) error {
	sc := scopeOf(r)
	sb, err := s.views.Get(r.Context(), sc.account, sc.name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sb)
	return nil
}

func (s *Server) sbListCheckpoints(w http.ResponseWriter, r *http.Request) error {
	sc := scopeOf(r)
	list, err := s.checkpoints.Checkpoints(r.Context(), sc.account, sc.name, r.URL.Query().Get("include_auto") == "true")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) sbGetCheckpoint(w http.ResponseWriter, r *http.Request) error {
	sc := scopeOf(r)
	ck, err := s.checkpoints.Checkpoint(r.Context(), sc.account, sc.name, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ck)
	return nil
}

// sbCreateCheckpoint streams NDJSON progress ending in a complete event
// with the checkpoint (or 202 and an operation with Accept: application/json).
func (s *Server) sbCreateCheckpoint(w http.ResponseWriter, r *http.Request) error {
	sc := scopeOf(r)
	var req api.CreateCheckpointRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	op, err := s.rewinds.CreateCheckpoint(r.Context(), sc.account, sc.name, req)
	if err != nil {
		return err
	}
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		return accepted(w, r, op)
	}
	return streamEvents(w, r, op)
}

// sbRestore starts an in-place restore and answers 202 at once: the
// restore ends every process inside, the caller included, and carries on
// in cairnd.
func (s *Server) sbRestore(w http.ResponseWriter, r *http.Request) error {
	sc := scopeOf(r)
	var req api.RestoreRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			return err
		}
	}
	op, err := s.rewinds.RestoreFromInside(context.WithoutCancel(r.Context()), sc.account, sc.name, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	info := op.Info()
	writeJSON(w, http.StatusAccepted, info)
	return nil
}
