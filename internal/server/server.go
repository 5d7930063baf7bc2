package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// maxBody bounds a request body.
const maxBody = 1 << 20

// Server serves the API.
type Server struct {
	sandboxes   Sandboxes
	views       SandboxViews
	checkpoints Checkpoints
	rewinds     Rewinds
	processes   Processes
	files       Files
	accounts    Accounts
	access      Access
	images      Images
	ops         Operations
	scope       SandboxScope
	ports       Ports
	activity    Activity
	// stopping ends followed event streams (StopFollowers).
	stopping      context.Context
	stopFollowers context.CancelFunc
	info          api.ServerInfo
	// fingerprint is the listener's certificate's now; nil: info's.
	fingerprint func() string
	mux         *http.ServeMux
	// insideOps is which sandbox started each operation through its
	// management socket.
	insideOps opOwners
	// accountOps is which account started each operation through the
	// API: an account sees its own operations alone.
	accountOps opOwners
	// tokenRates is each API token's request rate (RemoteHandler).
	tokenRates tokenRates
	// authFails is each remote address's bad tokens (RemoteHandler).
	authFails failedAuths
	// sessions are the long sessions open, by token (sessions.go).
	sessions sessions
	audit    Auditor // nil: no audit log
	// requests is told about every request answered; nil: nobody.
	requests RequestObserver
	// hosts are the other hosts (forward.go); nil: one host.
	hosts       Hosts
	evacuations Evacuations
}

// New returns a server over d; info is what GET /v1 answers (its Account
// set per request).
func New(d Deps, info api.ServerInfo) *Server {
	s := &Server{
		sandboxes: d.Sandboxes, views: d.Views, checkpoints: d.Checkpoints, rewinds: d.Rewinds,
		processes: d.Processes, files: d.Files, accounts: d.Accounts, access: d.Access, audit: d.Audit, images: d.Images,
		ops: d.Operations, scope: d.Scope, ports: d.Ports, activity: d.Activity, info: info,
		requests: d.Requests, fingerprint: d.Fingerprint, hosts: d.Hosts, evacuations: d.Evacuations,
	}
	s.stopping, s.stopFollowers = context.WithCancel(context.Background())
	s.mux = newMux(s, hostAPI, routes)
	return s
}

// newMux serves rts, the routes of apiName: each path dispatches on the
// method, and every miss (unknown path, wrong method) is answered in the
// one error shape. Each answer is told to the server's observer.
func newMux(s *Server, apiName string, rts []route) *http.ServeMux {
	mux := http.NewServeMux()
	byPath := map[string]map[string]route{}
	var paths []string
	for _, rt := range rts {
		if byPath[rt.path] == nil {
			byPath[rt.path] = map[string]route{}
			paths = append(paths, rt.path)
		}
		rt.handler = s.audited(rt, permitted(rt, rt.handler))
		byPath[rt.path][rt.method] = rt
	}
	for _, p := range paths {
		methods := byPath[p]
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			rt, ok := methods[r.Method]
			label := unmatchedRoute
			if ok {
				label = rt.method + " " + rt.path
			}
			w, done := s.observe(w, apiName, label)
			defer done()
			if !ok {
				var allowed []string
				for m := range methods {
					allowed = append(allowed, m)
				}
				sort.Strings(allowed)
				w.Header().Set("Allow", strings.Join(allowed, ", "))
				writeError(w, http.StatusMethodNotAllowed, api.CodeInvalidRequest, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
				return
			}
			if s.forwarded(w, r, rt) {
				return
			}
			if err := rt.handler(s, w, r); err != nil {
				s.fail(w, r, err)
			}
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w, done := s.observe(w, apiName, unmatchedRoute)
		defer done()
		writeError(w, http.StatusNotFound, api.CodeInvalidRequest, fmt.Sprintf("no API endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// ServeHTTP implements http.Handler.
// Its requests are the unix socket's: the default account's, as admin.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := context.WithValue(auth.NewContext(r.Context(), socketCredential), viaSocketKey{}, true)
	s.mux.ServeHTTP(w, r.WithContext(ctx))
}

// statusOf maps an error code to its HTTP status.
func statusOf(code string) int {
	switch code {
	case api.CodeNoHost:
		return http.StatusNotFound
	case api.CodeHostDown:
		return http.StatusServiceUnavailable
	case api.CodeHostUp:
		return http.StatusConflict
	case api.CodeNoSandbox, api.CodeNoImage, api.CodeNoCheckpoint, api.CodeNoOperation, api.CodeNoService, api.CodeNoLocation,
		api.CodePortNotPublished, api.CodeNoSuchImage, api.CodeNoAccount, api.CodeNoToken, api.CodeNoFile, api.CodeNoProcess:
		return http.StatusNotFound
	case api.CodeUnauthenticated:
		return http.StatusUnauthorized
	case api.CodeForbidden, api.CodeCSRF:
		return http.StatusForbidden
	case api.CodeRateLimited:
		return http.StatusTooManyRequests
	case api.CodeAccountNotEmpty, api.CodeTokenNameTaken, api.CodeAccountExists,
		api.CodeFileExists, api.CodeNotDir, api.CodeIsDir, api.CodeDirNotEmpty:
		return http.StatusConflict
	case api.CodeNameTaken, api.CodeAlreadyRunning, api.CodeNotRunning, api.CodeSandboxBusy,
		api.CodeSnapshotNameTaken, api.CodeCheckpointCurrent, api.CodeMemoryImageBad, api.CodeNoMemory, api.CodeNotOffsite, api.CodeLocalGone,
		api.CodeImageExists, api.CodeImageInUse,
		api.CodeProcessExited, api.CodeNotBackground, api.CodeStdinClosed, api.CodeStdinFull:
		return http.StatusConflict
	case api.CodeOffsiteUnavailable:
		return http.StatusServiceUnavailable
	case api.CodeOffsiteFailed, api.CodePortUnreachable, api.CodeRegistryFailed, api.CodeRegistryDenied:
		return http.StatusBadGateway
	case api.CodePortCredentials:
		return http.StatusUnauthorized
	case api.CodeFileDenied:
		return http.StatusForbidden
	case api.CodeExecFailed, api.CodeExecTimedOut, api.CodeImageDamaged, api.CodeDockerfile, api.CodeBuildStepFailed, api.CodeStepTimeout, api.CodeStepOutOfMemory,
		api.CodeContextRefused, api.CodeBadTar, api.CodeFileLimit:
		return http.StatusUnprocessableEntity
	case api.CodeContextTooLarge:
		return http.StatusRequestEntityTooLarge
	case api.CodeDiskLimit, api.CodePoolFull, api.CodeFileNoSpace:
		return http.StatusInsufficientStorage
	case api.CodeTooManyRequests, api.CodeInsideQuota, api.CodeWatchLimit, api.CodeTooManyProcesses:
		return http.StatusTooManyRequests
	case api.CodeAgentUnreachable, api.CodeSandboxDown, api.CodeNetworkUnavailable, api.CodePortNotRunning:
		return http.StatusServiceUnavailable
	case api.CodeInvalidRule:
		return http.StatusBadRequest
	case api.CodeRuntimeFailed, api.CodeImageBuildFailed, api.CodeCheckpointFailed, api.CodeInternal, api.CodeFileFailed:
		return http.StatusInternalServerError
	}
	if strings.HasPrefix(code, "V") {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// fail answers err in the one error shape. Unexpected errors are logged.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := errdefs.CodeOf(err)
	status := statusOf(code)
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		status = http.StatusRequestEntityTooLarge
	}
	if timeout := net.Error(nil); code == api.CodeInvalidRequest && errors.As(err, &timeout) && timeout.Timeout() {
		status = http.StatusRequestTimeout
	}
	if status >= 500 {
		slog.Error("request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	}
	if n := noteFrom(r); n != nil {
		n.code = code
	}
	writeError(w, status, code, err.Error())
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	if o, ok := w.(interface{ setCode(string) }); ok {
		o.setCode(code) // for the observer (observe.go)
	}
	writeJSON(w, status, api.ErrorBody{Error: api.ErrorInfo{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body of at most maxBody bytes into v: exactly one
// JSON value, unknown fields and anything after the value refused. A
// larger body is answered 413 (by fail).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, next := dec.Token(); !errors.Is(next, io.EOF) {
			err = next
			if err == nil {
				err = errors.New("data after the JSON value")
			}
		}
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errdefs.New(api.CodeInvalidRequest, "request body is empty; expected JSON")
		}
		return jsonBodyError(err)
	}
	return nil
}

// jsonBodyError is the error of a JSON body that could not be read or
// decoded: too large, too slow, or malformed.
func jsonBodyError(err error) error {
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		return errdefs.Wrap(api.CodeInvalidRequest, err, "request body is larger than the limit of %d MiB", maxBody>>20)
	}
	if err := bodyTimeout(err); err != nil {
		return err
	}
	return errdefs.Wrap(api.CodeInvalidRequest, err, "malformed JSON body")
}

// bodyTimeout is the error of a request body the client did not send
// within the connection's read deadline (see package httpedge): V03,
// answered 408; nil for any other error.
func bodyTimeout(err error) error {
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		return errdefs.Wrap(api.CodeInvalidRequest, err, "request body not received in time: send the whole request at once")
	}
	return nil
}

// account returns the account a request acts for. On the local socket every
// request acts for the default account; token auth comes with TCP.
func (s *Server) account(r *http.Request) string { return credential(r).Account }

// accepted records that r's account started op, and answers as
// acceptedOp does.
func (s *Server) accepted(w http.ResponseWriter, r *http.Request, op *operation.Op) error {
	s.accountOps.add(op.Info().ID, s.account(r), s.ops)
	if n := noteFrom(r); n != nil {
		n.operation = op.Info().ID
	}
	return s.acceptedOp(w, r, op)
}

// acceptedOp answers 202 with an operation, or, if the client accepts
// NDJSON, streams the operation's events in the response instead.
func (s *Server) acceptedOp(w http.ResponseWriter, r *http.Request, op *operation.Op) error {
	if strings.Contains(r.Header.Get("Accept"), ndjson) {
		return s.streamEvents(w, r, op)
	}
	info := op.Info()
	w.Header().Set("Location", "/v1/operations/"+info.ID)
	writeJSON(w, http.StatusAccepted, info)
	return nil
}

const ndjson = "application/x-ndjson"

// streamEvents writes an operation's events as NDJSON, from its first,
// until its complete or error event, or until the token of the request
// is revoked or expires (a long session).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, op *operation.Op) error {
	w.Header().Set("Content-Type", ndjson)
	w.Header().Set("Cairn-Operation", op.Info().ID)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // the client knows the stream is open before any event
	}
	enc := json.NewEncoder(w)
	// Once the header is sent, an error can only end the stream early:
	// the token's end says why, in the last line.
	ctx, done := s.openSession(r)
	defer done()
	op.Follow(ctx, func(ev api.Event) error {
		if err := enc.Encode(ev); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	endStream(ctx, w, enc)
	return nil
}
