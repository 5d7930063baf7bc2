package portproxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/httpedge"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Limits are the bounds of the proxy's listener: many clients (browsers
// open several connections each), 10 s for a request's headers, no bound
// on its body (an upload streams to the server inside for as long as it
// takes), two minutes idle between requests.
func Limits() httpedge.Limits {
	return httpedge.Limits{Name: "port proxy", MaxConns: 4096, HeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// MaxHeaderBytes bounds a request's headers, and MaxResponseHeaderBytes
// the headers of an answer from inside a sandbox.
const (
	MaxHeaderBytes         = 64 << 10
	MaxResponseHeaderBytes = 1 << 20
)

// NewServer returns the http.Server of the proxy h under Limits; serve it
// httpedge.Listen(ln, Limits()).
func NewServer(h http.Handler) *http.Server {
	srv := httpedge.NewServer(h, Limits())
	srv.MaxHeaderBytes = MaxHeaderBytes
	return srv
}

// Proxy is the port proxy: an http.Handler that forwards each request to
// the sandbox port its URL names (see the package comment).
type Proxy struct {
	svc *Service
	rp  *httputil.ReverseProxy
}

// Proxy returns the service's proxy.
func (s *Service) Proxy() *Proxy {
	p := &Proxy{svc: s}
	tr := &http.Transport{
		// No Proxy: the environment's HTTP_PROXY must not apply.
		DialContext:            p.dial,
		MaxIdleConnsPerHost:    32,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		DisableCompression:     true, // pass encodings through as they are
	}
	p.rp = &httputil.ReverseProxy{Rewrite: rewrite, Transport: tr, ErrorHandler: p.failed,
		ErrorLog: slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn)}
	return p
}

// forward is what ServeHTTP decided about a request, for rewrite and dial.
type forward struct {
	t         target
	sandboxID string
	// dropAuth: the Authorization header carried the credential, which
	// the server inside must not see.
	dropAuth bool
}

type forwardKey struct{}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, err := parseTarget(r.Host, r.URL.EscapedPath(), p.svc.cfg.Domain)
	switch {
	case errors.Is(err, errBadHost):
		writeError(w, http.StatusBadRequest, api.CodeInvalidRequest, "malformed Host header: use "+p.svc.scheme+"://PORT-NAME."+p.svc.cfg.Domain+"/ or /sandboxes/NAME/ports/PORT/")
		return
	case err != nil:
		writeError(w, http.StatusNotFound, api.CodeInvalidRequest, "not a port URL: use "+p.svc.scheme+"://PORT-NAME."+p.svc.cfg.Domain+"/ or /sandboxes/NAME/ports/PORT/")
		return
	case t.bare:
		u := *r.URL
		u.Path, u.RawPath = t.prefix+"/", ""
		http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
		return
	}
	ctx := r.Context()
	acct, sb, err := lookup(ctx, p.svc.cfg.Store, p.svc.cfg.Account, t.name)
	var port metadata.PublishedPort
	if err == nil {
		port, err = p.svc.cfg.Store.Port(ctx, sb.ID, t.port)
		if errors.Is(err, metadata.ErrNotFound) {
			err = errdefs.New(api.CodePortNotPublished, "sandbox %s has not published port %d", t.name, t.port)
		}
	}
	fwd := forward{t: t, sandboxID: sb.ID}
	if err == nil && port.Public {
		// Open to anyone; a token in the URL is still not passed on.
		if r.URL.Query().Has(api.PortTokenQuery) {
			r.URL.RawQuery = withoutToken(r.URL.Query())
		}
	} else if !p.authorize(w, r, acct, t, &fwd) {
		// Private, or missing: who has no credential learns nothing more.
		return
	}
	if err != nil {
		p.fail(w, r, err)
		return
	}
	if sb.State != metadata.SandboxRunning && !sb.Settings.Asleep { // one asleep wakes as it is dialed
		p.fail(w, r, notRunning(sb))
		return
	}
	if isUpgrade(r) {
		// A WebSocket lasts as long as it is used: no deadline of the
		// request applies to it.
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Time{})
		rc.SetWriteDeadline(time.Time{})
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, forwardKey{}, fwd)))
}

// authorize checks the credentials of a request to a private (or
// missing) port, and reports whether it may go on; if not, it answered it
// (401, or the redirect that sets the cookie from ?cairn_token=). A
// request may carry several (a bearer token of the server inside and the
// cookie): one accepted is enough.
func (p *Proxy) authorize(w http.ResponseWriter, r *http.Request, acct metadata.Account, t target, fwd *forward) bool {
	q := r.URL.Query()
	if q.Has(api.PortTokenQuery) {
		tok := q.Get(api.PortTokenQuery)
		if ok, err := p.allows(r, acct, tok); err != nil || !ok {
			p.refuse(w, r, err, true)
			return false
		}
		cookiePath := "/"
		if t.prefix != "" {
			cookiePath = t.prefix + "/"
		}
		http.SetCookie(w, &http.Cookie{
			Name: api.PortTokenCookie, Value: tok, Path: cookiePath,
			HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
		})
		r.URL.RawQuery = withoutToken(q)
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.Redirect(w, r, r.URL.RequestURI(), http.StatusSeeOther)
			return false
		}
		return true
	}
	presented := false
	if tok, found := bearer(r); found {
		presented = true
		ok, err := p.allows(r, acct, tok)
		if err != nil {
			p.refuse(w, r, err, true)
			return false
		}
		if ok {
			fwd.dropAuth = true
			return true
		}
	}
	for _, c := range r.CookiesNamed(api.PortTokenCookie) {
		presented = true
		ok, err := p.allows(r, acct, c.Value)
		if err != nil || ok {
			if err != nil {
				p.refuse(w, r, err, true)
			}
			return ok
		}
	}
	p.refuse(w, r, nil, presented)
	return false
}

func (p *Proxy) allows(r *http.Request, acct metadata.Account, credential string) (bool, error) {
	if credential == "" {
		return false, nil
	}
	return p.svc.cfg.Credentials.Allows(r.Context(), acct, credential)
}

// refuse answers a request whose credentials were not accepted (presented:
// it carried some) with 401, or with 500 when deciding failed (err).
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, err error, presented bool) {
	if err != nil {
		p.fail(w, r, err)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="cairn port"`)
	msg := "this port is private: send the account's port token (`cairn port token`) as `Authorization: Bearer TOKEN`, or open the URL once with ?" + api.PortTokenQuery + "=TOKEN"
	if presented {
		msg = "the port token is not accepted (wrong, or replaced by `cairn port token --rotate`): " + msg
	}
	writeError(w, http.StatusUnauthorized, api.CodePortCredentials, msg)
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// withoutToken returns q without the token parameter, encoded.
func withoutToken(q url.Values) string {
	q.Del(api.PortTokenQuery)
	return q.Encode()
}

func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && httpHeaderHas(r.Header, "Connection", "upgrade")
}

// httpHeaderHas reports whether a comma-separated header has token (in
// any case).
func httpHeaderHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// rewrite makes the request to the server inside: to the sandbox's port
// (an address dial understands), with the path form's prefix cut, the
// Host as the client sent it, X-Forwarded-For/-Host/-Proto (and
// X-Forwarded-Prefix for the path form) set by the proxy alone, and the
// credential that opened the port taken out.
func rewrite(pr *httputil.ProxyRequest) {
	fwd := pr.In.Context().Value(forwardKey{}).(forward)
	out := pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = net.JoinHostPort(fwd.sandboxID, strconv.Itoa(fwd.t.port))
	out.Header.Del("X-Forwarded-Prefix") // the client's is not to be believed
	if fwd.t.prefix != "" {
		out.URL.Path = strings.TrimPrefix(out.URL.Path, fwd.t.prefix)
		if out.URL.RawPath != "" {
			out.URL.RawPath = strings.TrimPrefix(out.URL.RawPath, fwd.t.prefix)
		}
		if !strings.HasPrefix(out.URL.Path, "/") {
			out.URL.Path, out.URL.RawPath = "/"+out.URL.Path, ""
		}
		out.Header.Set("X-Forwarded-Prefix", fwd.t.prefix)
	}
	out.Host = pr.In.Host
	pr.SetXForwarded()
	if fwd.dropAuth {
		out.Header.Del("Authorization")
	}
	dropCookie(out.Header, api.PortTokenCookie)
}

// dropCookie takes the cookie name out of the Cookie headers of h.
func dropCookie(h http.Header, name string) {
	vals := h.Values("Cookie")
	if len(vals) == 0 {
		return
	}
	var keep []string
	for _, v := range vals {
		for part := range strings.SplitSeq(v, ";") {
			part = strings.TrimSpace(part)
			if k, _, _ := strings.Cut(part, "="); part != "" && k != name {
				keep = append(keep, part)
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// dial connects to the address rewrite made: SANDBOXID:PORT.
func (p *Proxy) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	id, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, err
	}
	fwd, _ := ctx.Value(forwardKey{}).(forward)
	c, err := p.svc.cfg.Dialer.DialSandbox(ctx, id, port)
	if err != nil {
		return nil, dialError(err, fwd.t.name, port)
	}
	return c, nil
}

// failed is the ReverseProxy's ErrorHandler: the server inside could not
// be reached, or failed mid-answer.
func (p *Proxy) failed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	fwd, _ := r.Context().Value(forwardKey{}).(forward)
	p.fail(w, r, dialError(err, fwd.t.name, fwd.t.port))
}

// fail answers err in the API's error shape.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := errdefs.CodeOf(err)
	status := statusOf(code)
	if status >= 500 && code != api.CodePortNotRunning {
		slog.Warn("port proxy request failed", "host", r.Host, "path", r.URL.Path, "code", code, "err", err)
	}
	writeError(w, status, code, err.Error())
}

// statusOf is the HTTP status of the codes the proxy answers (as
// docs/errors.md gives them).
func statusOf(code string) int {
	switch code {
	case api.CodeNoSandbox, api.CodePortNotPublished:
		return http.StatusNotFound
	case api.CodePortCredentials:
		return http.StatusUnauthorized
	case api.CodePortNotRunning, api.CodeSandboxDown, api.CodeAgentUnreachable:
		return http.StatusServiceUnavailable
	case api.CodeNotRunning, api.CodeSandboxBusy:
		return http.StatusConflict
	case api.CodePortUnreachable:
		return http.StatusBadGateway
	}
	if strings.HasPrefix(code, "V") {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorInfo{Code: code, Message: msg}})
}
