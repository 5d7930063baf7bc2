package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// The audit log: every change made through the API (each route but the
// GETs and auditSkipped), recorded once it is answered with who asked
// (the credential), what (auditActions) on what (the path's names), and
// the outcome ("ok", "accepted" with the operation's id, or the error
// code). docs/accounts.md#audit.

// Auditor keeps the audit log (package access).
type Auditor interface {
	// Record appends an entry for a change asked by c.
	Record(ctx context.Context, c auth.Credential, e api.AuditEntry) error
	// Entries returns the log of c's account (every entry for the unix
	// socket) matching f, oldest first.
	Entries(ctx context.Context, c auth.Credential, f api.AuditQuery) ([]api.AuditEntry, error)
}

// auditActions names the change each route makes. A route that changes
// something and is neither here nor in auditSkipped fails a test.
var auditActions = map[string]string{
	"POST /v1/images/pull":                               "image.pull",
	"POST /v1/images/import":                             "image.import",
	"POST /v1/images/build":                              "image.build",
	"DELETE /v1/images/{name}":                           "image.delete",
	"POST /v1/images/prune":                              "image.prune",
	"POST /v1/sandboxes":                                 "sandbox.create",
	"DELETE /v1/sandboxes/{name}":                        "sandbox.delete",
	"PATCH /v1/sandboxes/{name}":                         "sandbox.configure",
	"POST /v1/sandboxes/{name}/start":                    "sandbox.start",
	"POST /v1/sandboxes/{name}/stop":                     "sandbox.stop",
	"POST /v1/sandboxes/{name}/restart":                  "sandbox.restart",
	"POST /v1/sandboxes/{name}/checkpoint":               "checkpoint.create",
	"DELETE /v1/sandboxes/{name}/checkpoints/{id}":       "checkpoint.delete",
	"POST /v1/sandboxes/{name}/checkpoints/{id}/restore": "checkpoint.restore",
	"POST /v1/sandboxes/{name}/checkpoints/{id}/keep":    "checkpoint.keep",
	"POST /v1/sandboxes/{name}/checkpoints/{id}/evict":   "checkpoint.evict",
	"POST /v1/sandboxes/{name}/fork":                     "sandbox.fork",
	"POST /v1/sandboxes/{name}/ports":                    "port.publish",
	"DELETE /v1/sandboxes/{name}/ports/{port}":           "port.unpublish",
	"POST /v1/sandboxes/{name}/snapshot":                 "snapshot.create",
	"DELETE /v1/snapshots/{ref}":                         "snapshot.delete",
	"POST /v1/snapshots/{ref}/restore":                   "snapshot.restore",
	"POST /v1/account/port-token/rotate":                 "port-token.rotate",
	"POST /v1/accounts":                                  "account.create",
	"PATCH /v1/accounts/{name}":                          "account.set",
	"DELETE /v1/accounts/{name}":                         "account.delete",
	"POST /v1/tokens":                                    "token.create",
	"DELETE /v1/tokens/{id}":                             "token.revoke",
	"POST /v1/verify":                                    "verify",
	"POST /v1/hosts/{name}/evacuate":                     "host.evacuate",
	"POST /v1/offsite/import":                            "offsite.import",
}

// auditSkipped are the routes that are not changes of state, though not
// GETs: running a command, opening a connection and working on the files
// inside, and the calls on its processes (what a command could do as
// well) are uses of a sandbox.
var auditSkipped = map[string]bool{
	"POST /v1/sandboxes/{name}/exec":                   true,
	"POST /v1/sandboxes/{name}/processes/{pid}/attach": true,
	"POST /v1/sandboxes/{name}/processes/{pid}/stdin":  true,
	"POST /v1/sandboxes/{name}/processes/{pid}/signal": true,
	"POST /v1/sandboxes/{name}/processes/{pid}/wait":   true,
	"POST /v1/sandboxes/{name}/ports/{port}/connect":   true,
	"PUT /v1/sandboxes/{name}/files":                   true,
	"DELETE /v1/sandboxes/{name}/files":                true,
	"POST /v1/sandboxes/{name}/files/mkdir":            true,
	"POST /v1/sandboxes/{name}/files/rename":           true,
	"PUT /v1/sandboxes/{name}/files/tar":               true,
}

// auditNote is what the handler of one request tells the audit log: the
// error code it answered, the operation it started.
type auditNote struct {
	code, operation string
	target, detail  string // set by a handler whose path names nothing (a create)
}

// noteTarget tells the audit log what a create acted on, and more.
func noteTarget(r *http.Request, target, detail string) {
	if n := noteFrom(r); n != nil {
		n.target, n.detail = target, detail
	}
}

type auditKey struct{}

func noteFrom(r *http.Request) *auditNote {
	n, _ := r.Context().Value(auditKey{}).(*auditNote)
	return n
}

// audited wraps the handler of route rt so that it is recorded.
func (s *Server) audited(rt route, h func(*Server, http.ResponseWriter, *http.Request) error) func(*Server, http.ResponseWriter, *http.Request) error {
	key := rt.method + " " + rt.path
	action, ok := auditActions[key]
	if !ok || s.audit == nil {
		return h
	}
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		note := &auditNote{}
		r = r.WithContext(context.WithValue(r.Context(), auditKey{}, note))
		err := h(s, w, r)
		if err != nil {
			s.fail(w, r, err)
			err = nil
		}
		outcome := "ok"
		switch {
		case note.code != "":
			outcome = note.code
		case note.operation != "":
			outcome = "accepted"
		}
		e := api.AuditEntry{Action: action, Target: auditTarget(rt, r), Outcome: outcome, Detail: note.detail}
		if e.Target == "" {
			e.Target = note.target
		}
		if note.operation != "" {
			e.Detail = strings.TrimPrefix(e.Detail+"; operation "+note.operation, "; ")
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := s.audit.Record(ctx, credential(r), e); err != nil {
			slog.Error("audit: could not record a change", "action", action, "target", e.Target, "err", err)
		}
		return nil
	}
}

// auditTarget is what the request acted on: the path's names joined
// ("web", "web/v3", "web/8080"); a create's handler names its target
// itself (noteTarget).
func auditTarget(rt route, r *http.Request) string {
	var parts []string
	for _, seg := range strings.Split(rt.path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			parts = append(parts, r.PathValue(strings.TrimSuffix(name, "}")))
		}
	}
	return strings.Join(parts, "/")
}

// listAudit answers the audit log of the request's account (every entry
// on the unix socket): ?since= a duration back ("1h") or a time
// (RFC 3339), ?target= a sandbox (its checkpoints and ports included),
// ?limit= the newest N.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	if s.audit == nil {
		return errdefs.New(api.CodeInvalidRequest, "this cairnd keeps no audit log")
	}
	q := r.URL.Query()
	var f api.AuditQuery
	if v := q.Get("since"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			f.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			f.Since = t
		} else {
			return errdefs.New(api.CodeInvalidArgument, "since %q: a duration back (1h, 30m) or a time (2026-12-01T10:00:00Z)", v)
		}
	}
	f.Target = q.Get("target")
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100000 {
			return errdefs.New(api.CodeInvalidArgument, "limit %q: a number from 0 to 100000", v)
		}
		f.Limit = n
	}
	list, err := s.audit.Entries(r.Context(), credential(r), f)
	if err != nil {
		return err
	}
	if list == nil {
		list = []api.AuditEntry{}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}
