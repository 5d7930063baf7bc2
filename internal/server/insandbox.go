package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// sandboxRoutes is the API of the management socket, /.cairn/api.sock,
// served to the processes inside one sandbox and scoped to it alone: no
// route takes a sandbox or account name, checkpoints are looked up among
// the sandbox's own, and operations among those started through its
// socket. See docs/sandbox-api.md.
var sandboxRoutes = []route{
	{"GET", "/v1", (*Server).sbInfo},
	{"GET", "/v1/checkpoints", (*Server).sbListCheckpoints},
	{"POST", "/v1/checkpoint", (*Server).sbCreateCheckpoint},
	{"GET", "/v1/checkpoints/{id}", (*Server).sbGetCheckpoint},
	{"POST", "/v1/checkpoints/{id}/restore", (*Server).sbRestore},
	{"GET", "/v1/operations/{id}", (*Server).sbGetOperation},
	{"GET", "/v1/operations/{id}/events", (*Server).sbOperationEvents},
}

// What the processes of one sandbox may ask of its management socket
// (the connections and read deadlines are bounded by httpedge.Sandbox).
const (
	// sandboxMaxBody bounds a request body: the routes take a comment and
	// a label at most.
	sandboxMaxBody = 4 << 10
	// sandboxRequestRate is how many requests a second a sandbox may make
	// on average, and sandboxRequestBurst how many at once; beyond, 429
	// and L05.
	sandboxRequestRate  = 20
	sandboxRequestBurst = 40
)

type scopeKey struct{}

// scope is the sandbox a management-socket request comes from.
type scope struct{ id, account, name string }

// SandboxHandler returns the handler of sandbox id's management socket.
// Each handler has its own request rate (one handler serves one socket).
func (s *Server) SandboxHandler(id string) http.Handler {
	mux := newMux(s, sandboxAPI, sandboxRoutes)
	rate := newTokenBucket(sandboxRequestRate, sandboxRequestBurst, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rate.take() {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, api.CodeTooManyRequests,
				"too many requests from this sandbox: at most "+itoa(sandboxRequestRate)+" a second; slow down")
			return
		}
		account, name, err := s.scope.Whoami(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), scopeKey{}, scope{id, account, name})
		// Its own credential: a member of its account, which the scope
		// narrows to the sandbox itself.
		ctx = auth.NewContext(ctx, auth.Credential{Account: account, Role: auth.RoleMember, Remote: "sandbox " + name})
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

// insideCheckpointRequest is what the body of POST /v1/checkpoint may
// hold; whether the sandbox may name it or save its memory is the
// sandbox's settings' to say (Rewinds.CreateCheckpointFromInside).
type insideCheckpointRequest struct {
	Comment string `json:"comment"`
	Label   string `json:"label"`
	Name    string `json:"name"`
	Memory  bool   `json:"memory"`
}

// insideRestoreRequest is what the body of POST
// /v1/checkpoints/{id}/restore may hold.
type insideRestoreRequest struct {
	NoSafetyCheckpoint bool `json:"no_safety_checkpoint"`
}

// decodeInside reads the body of a management-socket request into v (a
// pointer to one of the inside…Request types): at most sandboxMaxBody
// bytes (larger: V03, answered 413), one JSON object with none but v's
// fields and nothing after it (else V03). An empty body, or one of white
// space only, leaves v as it is.
func decodeInside(body io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(body, sandboxMaxBody+1))
	if err != nil {
		if terr := bodyTimeout(err); terr != nil {
			return terr
		}
		return errdefs.Wrap(api.CodeInvalidRequest, err, "reading the request body")
	}
	if len(b) > sandboxMaxBody {
		return errdefs.Wrap(api.CodeInvalidRequest, &http.MaxBytesError{Limit: sandboxMaxBody},
			"request body is larger than the limit of %d bytes", sandboxMaxBody)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errdefs.Wrap(api.CodeInvalidRequest, err, "malformed JSON body")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errdefs.New(api.CodeInvalidRequest, "malformed JSON body: data after the object")
	}
	return nil
}

// sbCreateCheckpoint streams NDJSON progress ending in a complete event
// with the checkpoint (or 202 and an operation with Accept: application/json).
func (s *Server) sbCreateCheckpoint(w http.ResponseWriter, r *http.Request) error {
	sc := scopeOf(r)
	var in insideCheckpointRequest
	if err := decodeInside(r.Body, &in); err != nil {
		return err
	}
	req := api.CreateCheckpointRequest{Comment: in.Comment, Label: in.Label, Name: in.Name, Memory: in.Memory}
	op, err := s.rewinds.CreateCheckpointFromInside(r.Context(), sc.account, sc.name, req)
	if err != nil {
		return err
	}
	s.insideOps.add(op.Info().ID, sc.id, s.ops)
	s.accountOps.add(op.Info().ID, sc.account, s.ops)
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		return s.acceptedOp(w, r, op)
	}
	return s.streamEvents(w, r, op)
}

// sbRestore starts an in-place restore and answers 202 at once: the
// restore ends every process inside, the caller included, and carries on
// in cairnd.
func (s *Server) sbRestore(w http.ResponseWriter, r *http.Request) error {
	sc := scopeOf(r)
	var in insideRestoreRequest
	if err := decodeInside(r.Body, &in); err != nil {
		return err
	}
	req := api.RestoreRequest{NoSafetyCheckpoint: in.NoSafetyCheckpoint}
	op, err := s.rewinds.RestoreFromInside(context.WithoutCancel(r.Context()), sc.account, sc.name, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	s.insideOps.add(op.Info().ID, sc.id, s.ops)
	s.accountOps.add(op.Info().ID, sc.account, s.ops)
	writeJSON(w, http.StatusAccepted, op.Info())
	return nil
}

func (s *Server) sbGetOperation(w http.ResponseWriter, r *http.Request) error {
	if err := s.insideOps.check(r.PathValue("id"), scopeOf(r).id); err != nil {
		return err
	}
	return s.getOperation(w, r)
}

func (s *Server) sbOperationEvents(w http.ResponseWriter, r *http.Request) error {
	if err := s.insideOps.check(r.PathValue("id"), scopeOf(r).id); err != nil {
		return err
	}
	return s.operationEvents(w, r)
}

// opOwners remembers which sandbox started each operation through its
// management socket: a socket answers about those alone. Entries of
// operations the registry forgot are dropped as more come.
type opOwners struct {
	mu      sync.Mutex
	sandbox map[string]string // operation id → sandbox id (or account name)
}

// opOwnersSweep is the size past which add drops forgotten operations.
const opOwnersSweep = 4096

func (o *opOwners) add(opID, sandboxID string, ops Operations) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sandbox == nil {
		o.sandbox = map[string]string{}
	}
	if len(o.sandbox) >= opOwnersSweep {
		for id := range o.sandbox {
			if _, err := ops.Get(id); err != nil {
				delete(o.sandbox, id)
			}
		}
	}
	o.sandbox[opID] = sandboxID
}

// ownedBy reports whether account started operation opID through the
// API. An operation started otherwise (by cairnd itself, or before a
// restart) is no token's: only the unix socket sees it.
func (o *opOwners) ownedBy(opID, account string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner, ok := o.sandbox[opID]
	return ok && owner != "" && owner == account
}

// check answers O01, as for an operation that does not exist, unless
// sandbox id started operation opID.
func (o *opOwners) check(opID, sandboxID string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sandbox[opID] != sandboxID || sandboxID == "" {
		return errdefs.New(api.CodeNoOperation, "no operation %q", opID)
	}
	return nil
}
