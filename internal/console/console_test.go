package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// tokens is an Authenticator of a fixed set of tokens.
type tokens map[string]auth.Credential

func (t tokens) Authenticate(_ context.Context, token, _ string) (auth.Credential, error) {
	if c, ok := t[token]; ok {
		return c, nil
	}
	return auth.Credential{}, errdefs.New(api.CodeUnauthenticated, "no such token")
}

// fixture is a console in front of an API that answers 401 without the
// right bearer token and otherwise echoes the token it was given.
type fixture struct {
	t    *testing.T
	toks tokens
	now  time.Time
	h    http.Handler
	c    *Console
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, toks: tokens{"cairn_a": {Account: "alice", Role: auth.RoleMember, TokenName: "laptop"}}, now: time.Unix(1_800_000_000, 0)}
	c := New(f.toks, func() time.Time { return f.now })
	f.c = c
	apiH := c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, ok := f.toks[tok]; !ok {
			writeError(w, http.StatusUnauthorized, api.CodeUnauthenticated, "bad token")
			return
		}
		if r.Header.Get("Cookie") != "" || r.Header.Get(CSRFHeader) != "" {
			t.Errorf("the API got the cookie or the CSRF header")
		}
		w.Write([]byte(tok))
	}))
	mux := http.NewServeMux()
	mux.Handle("/v1/", apiH)
	mux.Handle("/", c.Handler(apiH))
	f.h = mux
	return f
}

func (f *fixture) do(method, path, cookie, csrf, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "https://cairn.test"+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	}
	if csrf != "" {
		r.Header.Set(CSRFHeader, csrf)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func code(w *httptest.ResponseRecorder) string {
	var eb api.ErrorBody
	json.Unmarshal(w.Body.Bytes(), &eb)
	return eb.Error.Code
}

func (f *fixture) login() (cookie, csrf string) {
	w := f.do("POST", "/console/session", "", "", `{"token":"cairn_a"}`)
	if w.Code != 200 {
		f.t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	var s SessionInfo
	json.Unmarshal(w.Body.Bytes(), &s)
	if s.Account != "alice" || s.Role != "member" || s.CSRF == "" {
		f.t.Fatalf("login answered %+v", s)
	}
	res := w.Result()
	for _, c := range res.Cookies() {
		if c.Name == CookieName {
			if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
				f.t.Errorf("cookie %+v: want HttpOnly, Secure, SameSite=Strict, Path=/", c)
			}
			return c.Value, s.CSRF
		}
	}
	f.t.Fatal("no session cookie")
	return
}

func TestLoginCSRFAndLogout(t *testing.T) {
	f := newFixture(t)
	if w := f.do("POST", "/console/session", "", "", `{"token":"cairn_nope"}`); w.Code != 401 || code(w) != api.CodeUnauthenticated {
		t.Errorf("login with a bad token: %d %s", w.Code, code(w))
	}
	ck, csrf := f.login()
	// Reading needs no CSRF token; the API gets the session's token.
	if w := f.do("GET", "/v1/sandboxes", ck, "", ""); w.Code != 200 || w.Body.String() != "cairn_a" {
		t.Errorf("GET with the cookie: %d %q", w.Code, w.Body)
	}
	// Changing does.
	for _, bad := range []string{"", "x" + csrf[1:]} {
		if w := f.do("POST", "/v1/sandboxes", ck, bad, "{}"); w.Code != 403 || code(w) != api.CodeCSRF {
			t.Errorf("POST with CSRF %q: %d %s", bad, w.Code, code(w))
		}
	}
	if w := f.do("DELETE", "/v1/sandboxes/web", ck, csrf, ""); w.Code != 200 {
		t.Errorf("DELETE with the CSRF token: %d %s", w.Code, w.Body)
	}
	// A token in the Authorization header goes through untouched.
	r := httptest.NewRequest("POST", "https://cairn.test/v1/sandboxes", nil)
	r.Header.Set("Authorization", "Bearer cairn_a")
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Errorf("a bearer token: %d", w.Code)
	}
	// Logout needs the CSRF token, then the cookie is dead.
	if w := f.do("DELETE", "/console/session", ck, "", ""); w.Code != 403 {
		t.Errorf("logout without CSRF: %d", w.Code)
	}
	if w := f.do("DELETE", "/console/session", ck, csrf, ""); w.Code != 204 {
		t.Errorf("logout: %d", w.Code)
	}
	for _, m := range []string{"GET", "POST"} {
		if w := f.do(m, "/v1/sandboxes", ck, csrf, "{}"); w.Code != 401 || code(w) != api.CodeUnauthenticated {
			t.Errorf("%s after logout: %d %s", m, w.Code, code(w))
		}
	}
}

func TestSessionEndsWithItsToken(t *testing.T) {
	f := newFixture(t)
	ck, _ := f.login()
	delete(f.toks, "cairn_a") // revoked
	if w := f.do("GET", "/v1/sandboxes", ck, "", ""); w.Code != 401 {
		t.Errorf("a revoked token's session: %d", w.Code)
	}
	f.toks["cairn_a"] = auth.Credential{Account: "alice", Role: auth.RoleMember}
	if w := f.do("GET", "/v1/sandboxes", ck, "", ""); w.Code != 401 {
		t.Errorf("the session came back with its token: %d", w.Code)
	}
}

func TestSessionLifetime(t *testing.T) {
	f := newFixture(t)
	ck, _ := f.login()
	f.now = f.now.Add(idleTimeout - time.Minute)
	if w := f.do("GET", "/v1/x", ck, "", ""); w.Code != 200 {
		t.Fatalf("within the idle timeout: %d", w.Code)
	}
	f.now = f.now.Add(idleTimeout + time.Minute)
	if w := f.do("GET", "/v1/x", ck, "", ""); w.Code != 401 {
		t.Errorf("after the idle timeout: %d", w.Code)
	}
	ck, _ = f.login()
	for i := 0; i < int(maxAge/idleTimeout)+1; i++ {
		f.now = f.now.Add(idleTimeout - time.Minute)
		f.do("GET", "/v1/x", ck, "", "")
	}
	if w := f.do("GET", "/v1/x", ck, "", ""); w.Code != 401 {
		t.Errorf("past the session's maximum age: %d", w.Code)
	}
}

func TestOtherOrigins(t *testing.T) {
	f := newFixture(t)
	ck, csrf := f.login()
	r := httptest.NewRequest("POST", "https://cairn.test/v1/sandboxes", strings.NewReader("{}"))
	r.AddCookie(&http.Cookie{Name: CookieName, Value: ck})
	r.Header.Set(CSRFHeader, csrf)
	r.Header.Set("Origin", "https://evil.test")
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != 403 || code(w) != api.CodeCSRF {
		t.Errorf("a change from another origin: %d %s", w.Code, code(w))
	}
	r = httptest.NewRequest("POST", "https://cairn.test/console/session", strings.NewReader(`{"token":"cairn_a"}`))
	r.Header.Set("Content-Type", "text/plain") // what a cross-site form can send
	w = httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusUnsupportedMediaType {
		t.Errorf("a login that is not JSON: %d", w.Code)
	}
}

func TestPagesServed(t *testing.T) {
	f := newFixture(t)
	for path, typ := range map[string]string{"/": "text/html", "/console/app.js": "text/javascript", "/console/app.css": "text/css", "/console/vendor/xterm.mjs": "text/javascript"} {
		w := f.do("GET", path, "", "", "")
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), typ) {
			t.Errorf("GET %s: %d %q", path, w.Code, w.Header().Get("Content-Type"))
		}
		if !strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: no content security policy", path)
		}
	}
}

func TestLoginsAreLimited(t *testing.T) {
	f := newFixture(t)
	refused := 0
	for i := 0; i < loginBurst+5; i++ {
		if w := f.do("POST", "/console/session", "", "", `{"token":"cairn_nope"}`); w.Code == http.StatusTooManyRequests {
			if code(w) != api.CodeRateLimited || w.Header().Get("Retry-After") == "" {
				t.Errorf("a limited login: %s %q", code(w), w.Header().Get("Retry-After"))
			}
			refused++
		}
	}
	if refused != 5 {
		t.Errorf("%d of %d logins at once refused, want 5", refused, loginBurst+5)
	}
	f.now = f.now.Add(2 * time.Second)
	if w := f.do("POST", "/console/session", "", "", `{"token":"cairn_a"}`); w.Code != 200 {
		t.Errorf("a login after the pause: %d", w.Code)
	}
}

func TestNoDirectoryListings(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/console/", "/console/vendor/"} {
		if w := f.do("GET", p, "", "", ""); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d", p, w.Code)
		}
	}
}

// With several hosts, a session lives on the host that opened it: its
// cookie names that host, and another host forwards what carries it
// there (pages, API calls and changes with the CSRF token alike). A host
// that cannot be reached ends the session with a clear A01.
func TestSessionsOfAnotherHostAreForwarded(t *testing.T) {
	a, b := newFixture(t), newFixture(t)
	var forwarded []string
	forward := func(w http.ResponseWriter, r *http.Request, host string, fail func(error)) {
		forwarded = append(forwarded, host+" "+r.Method+" "+r.URL.Path)
		if host != "a" {
			fail(errors.New("host " + host + " is not registered"))
			return
		}
		a.h.ServeHTTP(w, r)
	}
	a.c.SetHosts("a", forward)
	b.c.SetHosts("b", forward)
	cookie, csrf := a.login()
	if !strings.HasPrefix(cookie, "a.") {
		t.Fatalf("a's session id %q does not name host a", cookie)
	}
	if w := b.do("GET", "/console/session", cookie, "", ""); w.Code != 200 {
		t.Fatalf("a's session asked on b: %d %s", w.Code, w.Body)
	}
	if w := b.do("GET", "/v1/sandboxes", cookie, "", ""); w.Code != 200 || w.Body.String() != "cairn_a" {
		t.Fatalf("an API call with a's session on b: %d %s", w.Code, w.Body)
	}
	if w := b.do("DELETE", "/console/session", cookie, csrf, ""); w.Code != http.StatusNoContent {
		t.Fatalf("logout through b: %d %s", w.Code, w.Body)
	}
	if w := a.do("GET", "/console/session", cookie, "", ""); w.Code != 401 {
		t.Fatalf("a's session after the logout through b: %d", w.Code)
	}
	if len(forwarded) != 3 {
		t.Errorf("forwarded %q, want the three requests", forwarded)
	}
	// b's own, ended sessions are not forwarded; an unreachable host's
	// session ends.
	forwarded = nil
	if w := b.do("GET", "/console/session", "b.gone", "", ""); w.Code != 401 || len(forwarded) != 0 {
		t.Fatalf("an unknown session of b itself: %d, forwarded %q", w.Code, forwarded)
	}
	w := b.do("GET", "/v1/sandboxes", "zz.x", "", "")
	if w.Code != 401 || code(w) != api.CodeUnauthenticated || !strings.Contains(w.Body.String(), "log in again") {
		t.Fatalf("a session of an unreachable host: %d %s", w.Code, w.Body)
	}
	if w := b.do("GET", "/console/session", "../../x.y", "", ""); w.Code != 401 || len(forwarded) != 1 {
		t.Fatalf("a cookie naming no host id: %d, forwarded %q", w.Code, forwarded)
	}
}
