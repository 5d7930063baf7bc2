package console

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// assets are the pages: index.html, the style sheet, the JavaScript
// modules and the vendored xterm.js (make console-assets copies it from
// web/node_modules).
//
//go:embed assets
var assets embed.FS

// Names on the wire.
const (
	// CookieName is the session cookie: HttpOnly, Secure,
	// SameSite=Strict, for the whole origin.
	CookieName = "cairn_session"
	// CSRFHeader carries the session's CSRF token on every change.
	CSRFHeader = "X-Cairn-CSRF"
)

// Authenticator checks API tokens (as server.Authenticator does).
type Authenticator interface {
	Authenticate(ctx context.Context, token, remote string) (auth.Credential, error)
}

// Console serves the pages and holds the sessions.
type Console struct {
	authn    Authenticator
	sessions *sessions
	logins   *loginLimit
	// self and forward: with several hosts, a session id begins with the
	// id of the host that opened it, and a request with the cookie of a
	// session another host opened is forwarded to that host (see
	// SetHosts); "" and nil with one.
	self    string
	forward Forward
}

// Forward serves r on the host with id hostID, or calls fail with why it
// cannot before anything is written (hosts.Forwarder.Forward).
type Forward func(w http.ResponseWriter, r *http.Request, hostID string, fail func(error))

// SetHosts makes the console one of several hosts' (docs/several-hosts.md):
// the sessions it opens are named after host self, and a request that
// carries the cookie of a session another host opened is served there,
// through forward (which answers an error itself, the host down
// included). Call it before serving.
func (c *Console) SetHosts(self string, forward Forward) {
	c.self, c.forward = self, forward
	c.sessions.prefix = self
}

// elsewhere serves r on the host that opened its session when that is
// another host, and reports whether it did.
func (c *Console) elsewhere(w http.ResponseWriter, r *http.Request) bool {
	if c.forward == nil {
		return false
	}
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	host, _, ok := strings.Cut(ck.Value, ".")
	if !ok || host == "" || host == c.self || !validHostID(host) {
		return false
	}
	if _, local := c.sessions.peek(ck.Value); local {
		return false
	}
	c.forward(w, r, host, func(err error) {
		// That host is gone or down: so is the session it held.
		setCookie(w, "")
		writeError(w, http.StatusUnauthorized, api.CodeUnauthenticated,
			"the console session was opened on another host, which cannot be reached now ("+err.Error()+"): log in again")
	})
	return true
}

// validHostID reports whether s can be a host id as a cookie carries it
// (the registry then says whether such a host exists).
func validHostID(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, b := range []byte(s) {
		if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b == '-' || b == '_') {
			return false
		}
	}
	return true
}

// New returns a console whose logins are checked by authn.
func New(authn Authenticator, now func() time.Time) *Console {
	return &Console{authn: authn, sessions: newSessions(now), logins: newLoginLimit(now)}
}

// SessionInfo answers GET and POST /console/session: who the session
// speaks for, and the CSRF token its pages send with each change.
type SessionInfo struct {
	Account   string `json:"account"`
	Role      string `json:"role"`
	TokenName string `json:"token_name,omitempty"`
	CSRF      string `json:"csrf"`
}

// loginRequest is the body of POST /console/session.
type loginRequest struct {
	Token string `json:"token"`
}

// Handler serves the pages at / and /console/…, the session at
// /console/session and the terminal at /console/terminal/{name};
// apiHandler is the API as Wrap serves it (the terminal goes through it).
func (c *Console) Handler(apiHandler http.Handler) http.Handler {
	static, _ := fs.Sub(assets, "assets")
	files := http.StripPrefix("/console/", http.FileServerFS(static))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.HandleFunc("GET /console/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("POST /console/session", c.login)
	mux.Handle("GET /console/session", c.onItsHost(http.HandlerFunc(c.current)))
	mux.Handle("DELETE /console/session", c.onItsHost(http.HandlerFunc(c.logout)))
	mux.Handle("GET /console/terminal/{name}", c.onItsHost(c.terminal(apiHandler)))
	return headers(mux)
}

// onItsHost serves a request about a session on the host that opened it.
func (c *Console) onItsHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.elsewhere(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// headers adds what every page answer carries: a strict content security
// policy (only this origin's scripts, styles and connections; no frames).
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

func init() {
	// Some minimal systems have no /etc/mime.types: the modules must be
	// served as JavaScript, or the browser refuses them.
	mime.AddExtensionType(".js", "text/javascript; charset=utf-8")
	mime.AddExtensionType(".mjs", "text/javascript; charset=utf-8")
	mime.AddExtensionType(".css", "text/css; charset=utf-8")
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.ErrorBody{Error: api.ErrorInfo{Code: code, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// fail answers an authentication error.
func fail(w http.ResponseWriter, err error) {
	code := errdefs.CodeOf(err)
	status := http.StatusInternalServerError
	switch code {
	case api.CodeUnauthenticated:
		status = http.StatusUnauthorized
	case api.CodeForbidden, api.CodeCSRF:
		status = http.StatusForbidden
	}
	writeError(w, status, code, err.Error())
}

func ended(w http.ResponseWriter) {
	writeError(w, http.StatusUnauthorized, api.CodeUnauthenticated, "the console session has ended (logged out, expired, or its token revoked): log in again")
}

func refused(w http.ResponseWriter, why string) {
	writeError(w, http.StatusForbidden, api.CodeCSRF, why)
}

// sameOrigin reports whether r came from a page of this origin: an Origin
// header, when there is one, must name this host over HTTPS.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser's cross-site request (they all send Origin on changes)
	}
	u, err := url.Parse(o)
	return err == nil && u.Scheme == "https" && strings.EqualFold(u.Host, r.Host)
}

// setCookie sets (or, with id "", clears) the session cookie.
func setCookie(w http.ResponseWriter, id string) {
	ck := &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode}
	if id == "" {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
}

// login opens a session for the token in the body.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		refused(w, "a login from another origin")
		return
	}
	if !c.logins.take(r.RemoteAddr) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, api.CodeRateLimited, "too many logins from this address: wait for Retry-After")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, api.CodeInvalidRequest, "a login is a JSON body {\"token\": \"cairn_…\"}")
		return
	}
	var req loginRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || req.Token == "" {
		writeError(w, http.StatusBadRequest, api.CodeInvalidRequest, "a login is a JSON body {\"token\": \"cairn_…\"}")
		return
	}
	tok := strings.TrimSpace(req.Token)
	cred, err := c.authn.Authenticate(r.Context(), tok, r.RemoteAddr)
	if err != nil {
		fail(w, err)
		return
	}
	id, se := c.sessions.open(tok)
	setCookie(w, id)
	writeJSON(w, http.StatusOK, SessionInfo{Account: cred.Account, Role: string(cred.Role), TokenName: cred.TokenName, CSRF: se.csrf})
}

// session returns r's open session and its id, or answers A01.
func (c *Console) session(w http.ResponseWriter, r *http.Request) (string, session, bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		ended(w)
		return "", session{}, false
	}
	se, ok := c.sessions.get(ck.Value)
	if !ok {
		setCookie(w, "")
		ended(w)
		return "", session{}, false
	}
	return ck.Value, se, true
}

// current answers who the session speaks for (its token checked again).
func (c *Console) current(w http.ResponseWriter, r *http.Request) {
	_, se, ok := c.session(w, r)
	if !ok {
		return
	}
	cred, err := c.authn.Authenticate(r.Context(), se.token, r.RemoteAddr)
	if err != nil {
		if errdefs.CodeOf(err) == api.CodeUnauthenticated {
			c.sessions.closeToken(se.token)
			setCookie(w, "")
		}
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, SessionInfo{Account: cred.Account, Role: string(cred.Role), TokenName: cred.TokenName, CSRF: se.csrf})
}

// logout ends the session (a change: it needs the CSRF token).
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	id, se, ok := c.session(w, r)
	if !ok {
		return
	}
	if !sameOrigin(r) || !se.csrfOK(r.Header.Get(CSRFHeader)) {
		refused(w, "a change with the console's cookie needs its CSRF token in "+CSRFHeader)
		return
	}
	c.sessions.close(id)
	setCookie(w, "")
	w.WriteHeader(http.StatusNoContent)
}

// safe reports whether a method only reads.
func safe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// Wrap lets requests to next (the API as the TCP listener serves it)
// carry the console's session cookie instead of a token: a request with
// an Authorization header goes through untouched; one with the cookie of
// an open session is sent on with the session's token, after its CSRF
// token (and origin) is checked when it changes anything (A09 otherwise).
// A cookie of a session that has ended answers A01.
func (c *Console) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			next.ServeHTTP(w, r)
			return
		}
		if _, err := r.Cookie(CookieName); err != nil {
			next.ServeHTTP(w, r) // no credential at all: the API's own A01
			return
		}
		if c.elsewhere(w, r) {
			return
		}
		_, se, ok := c.session(w, r)
		if !ok {
			return
		}
		if !safe(r.Method) && (!sameOrigin(r) || !se.csrfOK(r.Header.Get(CSRFHeader))) {
			refused(w, "a change with the console's cookie needs its CSRF token in "+CSRFHeader)
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Set("Authorization", "Bearer "+se.token)
		r2.Header.Del("Cookie")
		r2.Header.Del(CSRFHeader)
		// Forwarded here by another host for this session: the session
		// is the credential, not that host's proof, and the request goes
		// on as any from this host would (to the sandbox's own host).
		r2.Header.Del(api.PeerHeader)
		r2.Header.Del(api.CallerHeader)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r2)
		if sw.status == http.StatusUnauthorized {
			c.sessions.closeToken(se.token) // revoked or expired: the session ends with it
		}
	})
}

// statusWriter notes the status of an answer; it flushes and hijacks as
// the writer it wraps (NDJSON streams, the exec upgrade).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := s.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("cannot hijack this connection")
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
