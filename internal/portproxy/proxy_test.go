package portproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/httpedge"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metadata/sqlite"
)

// The tests run the proxy on a real loopback listener, with servers on
// loopback standing for the ports inside sandboxes: the loopDialer
// connects a sandbox's port to the server the test started for it.

const webID = "0000000000000001"

// loopDialer reaches port P of a sandbox at addrs[id][P].
type loopDialer struct {
	mu    sync.Mutex
	addrs map[string]map[int]string
	dials int
}

func (d *loopDialer) DialSandbox(ctx context.Context, id string, port int) (net.Conn, error) {
	d.mu.Lock()
	addr, ok := d.addrs[id][port]
	d.dials++
	d.mu.Unlock()
	if !ok {
		addr = "127.0.0.1:1" // nothing listens there: connection refused
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

func (d *loopDialer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials
}

func (d *loopDialer) route(id string, port int, addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.addrs[id] == nil {
		d.addrs[id] = map[int]string{}
	}
	d.addrs[id][port] = addr
}

// seen is what a backend received.
type seen struct {
	Name   string      `json:"name"` // the backend's
	Path   string      `json:"path"`
	Query  string      `json:"query"`
	Host   string      `json:"host"`
	Header http.Header `json:"header"`
}

// backend starts an HTTP server on loopback that answers every request
// with what it saw, as JSON, and a WebSocket echo at /ws; it returns its
// address.
func backend(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			echo(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(seen{Name: name, Path: r.URL.Path, Query: r.URL.RawQuery, Host: r.Host, Header: r.Header})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// echo sends every WebSocket message back, prefixed with "echo: ".
func echo(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	for {
		typ, b, err := c.Read(r.Context())
		if err != nil {
			return
		}
		if err := c.Write(r.Context(), typ, append([]byte("echo: "), b...)); err != nil {
			return
		}
	}
}

// env is a store with the default account and its sandbox web (running),
// a proxy over it on loopback, and the dialer.
type env struct {
	t      *testing.T
	store  metadata.Store
	acct   metadata.Account
	svc    *Service
	dialer *loopDialer
	addr   string // the proxy's
}

func newEnv(t *testing.T) *env {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "meta.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	acct, err := store.EnsureAccount(ctx, metadata.DefaultAccount)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CreateSandbox(ctx, metadata.Sandbox{ID: webID, AccountID: acct.ID, Name: "web", Image: "debian", State: metadata.SandboxRunning}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &loopDialer{addrs: map[string]map[int]string{}}
	svc, err := New(Config{Store: store, Dialer: d, Addr: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(svc.Proxy())
	go srv.Serve(httpedge.Listen(ln, Limits()))
	t.Cleanup(func() { srv.Close() })
	return &env{t: t, store: store, acct: acct, svc: svc, dialer: d, addr: ln.Addr().String()}
}

// publish publishes port of web, served by a new backend called name.
func (e *env) publish(port int, public bool, name string) {
	e.t.Helper()
	e.dialer.route(webID, port, backend(e.t, name))
	if _, err := e.svc.Publish(context.Background(), metadata.DefaultAccount, "web", api.PublishPortRequest{Port: port, Public: public}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) token() string {
	e.t.Helper()
	tok, err := e.svc.Token(context.Background(), metadata.DefaultAccount, false)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.Token
}

// client returns an HTTP client whose every connection goes to the proxy,
// whatever host the URL names, and that follows no redirect unless jar.
func (e *env) client(jar bool) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", e.addr)
	}}
	e.t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	if jar {
		c.Jar, _ = cookiejar.New(nil)
	} else {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

// url returns the URL of path on the proxy with host (its port added).
func (e *env) url(host, path string) string {
	_, port, _ := net.SplitHostPort(e.addr)
	return "http://" + host + ":" + port + path
}

// get sends a GET with hdr (pairs of name and value) and returns the
// answer, its body read.
func (e *env) get(c *http.Client, url string, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// wantSeen decodes what the backend saw from a 200 answer.
func wantSeen(t *testing.T, what string, resp *http.Response, body []byte) seen {
	t.Helper()
	var s seen
	if resp.StatusCode != 200 || json.Unmarshal(body, &s) != nil || s.Name == "" {
		t.Fatalf("%s: %s %s, want 200 from the server inside", what, resp.Status, body)
	}
	return s
}

// wantError checks an answer in the one error shape.
func wantError(t *testing.T, what string, resp *http.Response, body []byte, status int, code string) api.ErrorInfo {
	t.Helper()
	var eb api.ErrorBody
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &eb) != nil || eb.Error.Code != code {
		t.Errorf("%s: %s %s, want %d with code %s", what, resp.Status, body, status, code)
	}
	return eb.Error
}

func TestHostAndPathFormsReachTheirPort(t *testing.T) {
	e := newEnv(t)
	e.publish(8080, true, "eighty-eighty")
	e.publish(3000, true, "three-thousand")
	c := e.client(false)

	host := "8080-web.localhost"
	resp, body := e.get(c, e.url(host, "/a/b%2Fc?x=1&y=2"), "X-Forwarded-For", "6.6.6.6", "X-Forwarded-Prefix", "/evil")
	s := wantSeen(t, "host form", resp, body)
	if s.Name != "eighty-eighty" || s.Path != "/a/b/c" || s.Query != "x=1&y=2" || s.Host != e.url(host, "")[len("http://"):] {
		t.Errorf("host form: the server inside saw %+v", s)
	}
	if got := s.Header.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want the client's address alone", got)
	}
	if s.Header.Get("X-Forwarded-Proto") != "http" || s.Header.Get("X-Forwarded-Host") != s.Host || s.Header.Get("X-Forwarded-Prefix") != "" {
		t.Errorf("forwarded headers %v", s.Header)
	}
	resp, body = e.get(c, e.url("3000-web.localhost", "/"))
	if s := wantSeen(t, "host form, other port", resp, body); s.Name != "three-thousand" {
		t.Errorf("port 3000 reached %s", s.Name)
	}

	// Path form: on the domain itself, or on an address.
	for _, h := range []string{"localhost", "127.0.0.1"} {
		resp, body = e.get(c, e.url(h, "/sandboxes/web/ports/3000/app/x?q=1"))
		s = wantSeen(t, "path form on "+h, resp, body)
		if s.Name != "three-thousand" || s.Path != "/app/x" || s.Query != "q=1" || s.Header.Get("X-Forwarded-Prefix") != "/sandboxes/web/ports/3000" {
			t.Errorf("path form on %s: the server inside saw %+v", h, s)
		}
	}
	resp, body = e.get(c, e.url("localhost", "/sandboxes/web/ports/8080/"))
	if s := wantSeen(t, "path form root", resp, body); s.Path != "/" || s.Name != "eighty-eighty" {
		t.Errorf("path form root: %+v", s)
	}
	// Without the slash after the port: redirected to it, query kept.
	resp, _ = e.get(c, e.url("localhost", "/sandboxes/web/ports/8080?q=1"))
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "/sandboxes/web/ports/8080/?q=1" {
		t.Errorf("bare path form: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	// Anything else on the domain is no port URL.
	for _, p := range []string{"/", "/sandboxes/web", "/sandboxes/web/ports/", "/sandboxes/Web/ports/80/", "/sandboxes/web/ports/080/", "/sandboxes/web/ports/70000/"} {
		resp, body = e.get(c, e.url("localhost", p))
		wantError(t, "GET "+p, resp, body, 404, api.CodeInvalidRequest)
	}
}

func TestWebSocketThroughTheProxy(t *testing.T) {
	e := newEnv(t)
	e.publish(8080, true, "ws")
	e.publish(8081, false, "private-ws")
	c := e.client(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		url string
		hdr http.Header
	}{
		{e.url("8080-web.localhost", "/ws"), nil},
		{e.url("localhost", "/sandboxes/web/ports/8080/ws"), nil},
		{e.url("8081-web.localhost", "/ws"), http.Header{"Authorization": {"Bearer " + e.token()}}},
	} {
		ws, _, err := websocket.Dial(ctx, tc.url, &websocket.DialOptions{HTTPClient: c, HTTPHeader: tc.hdr})
		if err != nil {
			t.Fatalf("dial %s: %v", tc.url, err)
		}
		for _, msg := range []string{"hello", strings.Repeat("x", 20<<10)} {
			if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, got, err := ws.Read(ctx)
			if err != nil || string(got) != "echo: "+msg {
				t.Fatalf("%s: read %.40q, %v", tc.url, got, err)
			}
		}
		ws.Close(websocket.StatusNormalClosure, "")
	}
	// A private one without the token is refused before any upgrade.
	_, resp, err := websocket.Dial(ctx, e.url("8081-web.localhost", "/ws"), &websocket.DialOptions{HTTPClient: c})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a private WebSocket without a token: %v, %v", resp, err)
	}
}

func TestPrivatePortCredentials(t *testing.T) {
	e := newEnv(t)
	e.publish(8080, false, "private")
	tok := e.token()
	c := e.client(false)
	u := e.url("8080-web.localhost", "/page?keep=1")

	resp, body := e.get(c, u)
	wantError(t, "no token", resp, body, 401, api.CodePortCredentials)
	if resp.Header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	for _, bad := range []string{"Bearer wrong", "Bearer " + tok + "x", "Bearer " + tok[:len(tok)-1], "Basic " + tok} {
		resp, body = e.get(c, u, "Authorization", bad)
		wantError(t, "Authorization: "+bad, resp, body, 401, api.CodePortCredentials)
	}
	resp, body = e.get(c, u, "Cookie", api.PortTokenCookie+"=wrong")
	wantError(t, "a wrong cookie", resp, body, 401, api.CodePortCredentials)
	resp, body = e.get(c, e.url("8080-web.localhost", "/page?"+api.PortTokenQuery+"=wrong"))
	wantError(t, "a wrong ?"+api.PortTokenQuery, resp, body, 401, api.CodePortCredentials)
	if len(resp.Cookies()) != 0 {
		t.Errorf("a wrong token set cookies %v", resp.Cookies())
	}

	// The bearer token opens it, and the server inside does not see it.
	resp, body = e.get(c, u, "Authorization", "Bearer "+tok)
	if s := wantSeen(t, "bearer", resp, body); s.Header.Get("Authorization") != "" {
		t.Errorf("the server inside saw Authorization %q", s.Header.Get("Authorization"))
	}
	// Another Authorization (the server's own) next to a valid cookie goes
	// through.
	resp, body = e.get(c, u, "Authorization", "Bearer app-token", "Cookie", "a=1; "+api.PortTokenCookie+"="+tok+"; b=2")
	if s := wantSeen(t, "cookie with the app's own bearer", resp, body); s.Header.Get("Authorization") != "Bearer app-token" || s.Header.Get("Cookie") != "a=1; b=2" {
		t.Errorf("the server inside saw Authorization %q, Cookie %q", s.Header.Get("Authorization"), s.Header.Get("Cookie"))
	}

	// ?cairn_token= sets the cookie and redirects to the URL without it.
	resp, _ = e.get(c, e.url("8080-web.localhost", "/page?keep=1&"+api.PortTokenQuery+"="+tok))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/page?keep=1" {
		t.Errorf("?%s=: %s to %q, want 303 to /page?keep=1", api.PortTokenQuery, resp.Status, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == api.PortTokenCookie {
			cookie = ck
		}
	}
	if cookie == nil || cookie.Value != tok || !cookie.HttpOnly || cookie.Path != "/" || cookie.SameSite != http.SameSiteLaxMode {
		t.Fatalf("cookie %+v", cookie)
	}
	// A browser (a client with a cookie jar) follows it and gets the page;
	// neither the cookie nor the parameter reach the server inside.
	browser := e.client(true)
	resp, body = e.get(browser, e.url("8080-web.localhost", "/page?keep=1&"+api.PortTokenQuery+"="+tok))
	s := wantSeen(t, "browser", resp, body)
	if s.Path != "/page" || s.Query != "keep=1" || s.Header.Get("Cookie") != "" {
		t.Errorf("the server inside saw %+v", s)
	}
	resp, body = e.get(browser, e.url("8080-web.localhost", "/other"))
	wantSeen(t, "browser, next page", resp, body)
	// The path form scopes its cookie to the port's prefix.
	resp, _ = e.get(c, e.url("localhost", "/sandboxes/web/ports/8080/x?"+api.PortTokenQuery+"="+tok))
	if ck := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(ck) != 1 || ck[0].Path != "/sandboxes/web/ports/8080/" ||
		resp.Header.Get("Location") != "/sandboxes/web/ports/8080/x" {
		t.Errorf("path form ?%s=: %s, cookies %v, to %q", api.PortTokenQuery, resp.Status, ck, resp.Header.Get("Location"))
	}

	// A rotation refuses the old token at once, header and cookie alike.
	rotated, err := e.svc.Token(context.Background(), metadata.DefaultAccount, true)
	if err != nil || rotated.Token == tok || len(rotated.Token) != 43 {
		t.Fatalf("rotate: %+v, %v", rotated, err)
	}
	resp, body = e.get(c, u, "Authorization", "Bearer "+tok)
	wantError(t, "the old token after a rotation", resp, body, 401, api.CodePortCredentials)
	resp, body = e.get(browser, e.url("8080-web.localhost", "/other"))
	wantError(t, "the old cookie after a rotation", resp, body, 401, api.CodePortCredentials)
	resp, body = e.get(c, u, "Authorization", "Bearer "+rotated.Token)
	wantSeen(t, "the new token", resp, body)
}

func TestPublicPortNeedsNothing(t *testing.T) {
	e := newEnv(t)
	e.publish(8080, true, "public")
	tok := e.token()
	c := e.client(false)
	resp, body := e.get(c, e.url("8080-web.localhost", "/"))
	wantSeen(t, "public", resp, body)
	// Even a token in the URL is not passed on to the server inside.
	resp, body = e.get(c, e.url("8080-web.localhost", "/p?a=1&"+api.PortTokenQuery+"="+tok))
	if s := wantSeen(t, "public with a token", resp, body); s.Query != "a=1" {
		t.Errorf("the server inside saw the query %q", s.Query)
	}
	// Private again: refused at once.
	e.publish(8080, false, "public")
	resp, body = e.get(c, e.url("8080-web.localhost", "/"))
	wantError(t, "made private", resp, body, 401, api.CodePortCredentials)
}

func TestUnknownTargets(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.publish(8080, true, "public")
	tok := e.token()
	auth := []string{"Authorization", "Bearer " + tok}
	c := e.client(false)

	// Another account's sandbox, published and public, answers as a
	// missing one: the proxy's URLs name the default account's.
	bob, err := e.store.EnsureAccount(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.CreateSandbox(ctx, metadata.Sandbox{ID: "0000000000000002", AccountID: bob.ID, Name: "bobs", Image: "debian", State: metadata.SandboxRunning}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PublishPort(ctx, metadata.PublishedPort{SandboxID: "0000000000000002", Port: 8080, Public: true}); err != nil {
		t.Fatal(err)
	}
	e.dialer.route("0000000000000002", 8080, backend(t, "bob"))

	type answer struct {
		status int
		body   string
	}
	answerOf := func(host string, hdr ...string) answer {
		resp, body := e.get(c, e.url(host, "/"), hdr...)
		return answer{resp.StatusCode, strings.ReplaceAll(strings.ReplaceAll(string(body), "bobs", "NAME"), "nosuch", "NAME")}
	}
	// Without a token: the same 401 for all of them.
	want := answerOf("8080-nosuch.localhost")
	if want.status != 401 || !strings.Contains(want.body, api.CodePortCredentials) {
		t.Errorf("a missing sandbox without a token: %+v", want)
	}
	for _, h := range []string{"8080-bobs.localhost", "9999-web.localhost"} {
		if got := answerOf(h); got != want {
			t.Errorf("%s without a token: %+v, want %+v as for a missing sandbox", h, got, want)
		}
	}
	// With it: 404 S01 for the missing and the other account's sandbox
	// alike, P01 for a port not published.
	want = answerOf("8080-nosuch.localhost", auth...)
	if got := answerOf("8080-bobs.localhost", auth...); got != want || want.status != 404 || !strings.Contains(want.body, `"S01"`) {
		t.Errorf("another account's sandbox: %+v; a missing one: %+v; want the same 404 S01", got, want)
	}
	resp, body := e.get(c, e.url("9999-web.localhost", "/"), auth...)
	wantError(t, "a port not published", resp, body, 404, api.CodePortNotPublished)

	// Published, but nothing listens: 502 P04.
	if _, err := e.svc.Publish(ctx, metadata.DefaultAccount, "web", api.PublishPortRequest{Port: 7000, Public: true}); err != nil {
		t.Fatal(err)
	}
	resp, body = e.get(c, e.url("7000-web.localhost", "/"))
	wantError(t, "nothing listening", resp, body, 502, api.CodePortUnreachable)

	// Stopped: 503 P03, and the dialer is not asked.
	if err := e.store.SetSandboxState(ctx, webID, metadata.SandboxStopped); err != nil {
		t.Fatal(err)
	}
	before := e.dialer.count()
	resp, body = e.get(c, e.url("8080-web.localhost", "/"))
	wantError(t, "stopped", resp, body, 503, api.CodePortNotRunning)
	if e.dialer.count() != before {
		t.Errorf("the dialer was asked for a stopped sandbox")
	}
}

// rawStatus sends a request with Host host, byte for byte, and returns the
// status of the answer.
func rawStatus(t *testing.T, addr, host string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("Host %q: %v", host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMalformedHostRefused(t *testing.T) {
	e := newEnv(t)
	e.publish(8080, true, "public")
	for _, host := range []string{
		"a.8080-web.localhost", "8080-web.x.localhost", "8080.localhost", "web.localhost", "-web.localhost",
		"08080-web.localhost", "0-web.localhost", "65536-web.localhost", "8080-.localhost", "8080--web.localhost",
		"8080-web_1.localhost", "8080-web.localhost:0", "8080-web.localhost:99999", "8080-web.localhost:",
		"8080-web.localhost:80:80", "8080-web..localhost", "[::1", "[fe80::1%eth0]:80", "[1.2.3.4]", "ex ample",
		"8080-" + strings.Repeat("a", 64) + ".localhost",
	} {
		status, body := rawStatus(t, e.addr, host)
		if status != http.StatusBadRequest {
			t.Errorf("Host %q: %d %s, want 400", host, status, body)
		}
	}
	if n := e.dialer.count(); n != 0 {
		t.Errorf("malformed hosts reached the dialer %d times", n)
	}
	// Well-formed: upper case and a trailing dot are the same host.
	for _, host := range []string{"8080-WEB.LocalHost", "8080-web.localhost.", "8080-web.localhost:8800"} {
		if status, body := rawStatus(t, e.addr, host); status != 200 {
			t.Errorf("Host %q: %d %s, want 200", host, status, body)
		}
	}
}

// Headers past MaxHeaderBytes are refused before they reach the handler.
func TestHeaderBound(t *testing.T) {
	e := newEnv(t)
	e.publish(8080, true, "public")
	c := e.client(false)
	req, _ := http.NewRequest("GET", e.url("8080-web.localhost", "/"), nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2*MaxHeaderBytes))
	// The server answers 431 and closes, possibly while the client still
	// writes (then the client sees the connection reset).
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("a %d KiB header: %s, want 431", 2*MaxHeaderBytes>>10, resp.Status)
		}
	}
	if n := e.dialer.count(); n != 0 {
		t.Errorf("a request with headers past the bound reached the dialer")
	}
	resp, body := e.get(c, e.url("8080-web.localhost", "/"), "X-Big", strings.Repeat("a", MaxHeaderBytes/2))
	wantSeen(t, "a header under the bound", resp, body)
}
