package portproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/httpedge"
	"github.com/cairn-sandbox/cairn/internal/testenv/testcert"
)

// newTLSEnv is newEnv with the proxy serving HTTPS over a self-signed
// certificate; the client trusts it.
func newTLSEnv(t *testing.T) (*env, *KeyPair, *http.Client) {
	t.Helper()
	e := newEnv(t) // its store, sandbox and dialer; its plain proxy is unused
	pair := testcert.Write(t, t.TempDir(), "first", "localhost", "*.localhost")
	kp, err := LoadKeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Store: e.store, Dialer: e.dialer, Addr: ln.Addr().String(), TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(svc.Proxy())
	go srv.Serve(tls.NewListener(httpedge.Listen(ln, Limits()), kp.TLSConfig()))
	t.Cleanup(func() { srv.Close() })
	e.svc, e.addr = svc, ln.Addr().String()

	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pair.Roots()},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", e.addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return e, kp, c
}

func TestHTTPSProxy(t *testing.T) {
	e, _, c := newTLSEnv(t)
	e.publish(8080, true, "public")
	e.publish(8081, false, "private")
	ctx := context.Background()

	ports, err := e.svc.Ports(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(e.addr)
	for _, p := range ports {
		if want := "https://" + strconv.Itoa(p.Port) + "-web.localhost:" + port + "/"; p.URL != want || !strings.HasPrefix(p.PathURL, "https://localhost:"+port+"/sandboxes/web/ports/") {
			t.Errorf("URLs %q %q, want %q and the path form by https", p.URL, p.PathURL, want)
		}
	}
	url := ports[0].URL
	resp, body := e.get(c, url)
	s := wantSeen(t, "public port by HTTPS", resp, body)
	if s.Name != "public" || s.Header.Get("X-Forwarded-Proto") != "https" {
		t.Errorf("the server inside saw %+v", s)
	}
	if resp.TLS == nil || resp.ProtoMajor != 1 {
		t.Errorf("answered over %s, TLS %v: want HTTP/1.1 over TLS", resp.Proto, resp.TLS != nil)
	}

	// A private port: the token in the URL sets a cookie only HTTPS sends.
	private := ports[1].URL
	resp, _ = e.get(c, private+"?"+api.PortTokenQuery+"="+e.token())
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure || !resp.Cookies()[0].HttpOnly {
		t.Errorf("token in the URL: %s, cookies %v; want 303 and one Secure, HttpOnly cookie", resp.Status, resp.Cookies())
	}
	resp, body = e.get(c, private)
	wantError(t, "private port without credentials", resp, body, http.StatusUnauthorized, api.CodePortCredentials)

	// A WebSocket over TLS.
	ws, _, err := websocket.Dial(ctx, strings.Replace(url, "https://", "wss://", 1)+"ws", &websocket.DialOptions{HTTPClient: c})
	if err != nil {
		t.Fatalf("wss: %v", err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, got, err := ws.Read(ctx); err != nil || string(got) != "echo: hi" {
		t.Errorf("wss echo: %q %v", got, err)
	}

	// Plain HTTP to the HTTPS port gets nowhere.
	plain := e.client(false)
	if resp, err := plain.Get(strings.Replace(url, "https://", "http://", 1)); err == nil {
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the HTTPS proxy: %s", resp.Status)
		}
		resp.Body.Close()
	}
}

func TestKeyPairIsReadAgainWhenRenewed(t *testing.T) {
	dir := t.TempDir()
	pair := testcert.Write(t, dir, "first", "localhost")
	certFile, keyFile := pair.CertFile, pair.KeyFile
	kp, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cn := func() string {
		c, err := kp.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		return leaf.Subject.CommonName
	}
	if got := cn(); got != "first" {
		t.Fatalf("serves %q", got)
	}
	later := time.Now().Add(time.Minute)
	renew := func(cn string) {
		testcert.Write(t, dir, cn, "localhost")
		for _, f := range []string{certFile, keyFile} {
			os.Chtimes(f, later, later)
		}
		later = later.Add(time.Minute)
		kp.mu.Lock()
		kp.checked = time.Time{} // as if keyPairRecheck had passed
		kp.mu.Unlock()
	}
	renew("second")
	if got := cn(); got != "second" {
		t.Errorf("after a renewal serves %q, want the new certificate", got)
	}
	// A renewal that cannot be read: the last good pair stays.
	renew("third")
	os.WriteFile(keyFile, []byte("not a key"), 0o600)
	os.Chtimes(keyFile, later, later)
	if got := cn(); got != "second" {
		t.Errorf("after a broken renewal serves %q, want the last good one", got)
	}
}

func TestLoadKeyPairErrors(t *testing.T) {
	dir := t.TempDir()
	pair := testcert.Write(t, dir, "x", "localhost")
	certFile, keyFile := pair.CertFile, pair.KeyFile
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("junk"), 0o600)
	for _, tc := range []struct{ cert, key, want string }{
		{certFile, "", "both a certificate file and a key file"},
		{"", keyFile, "both a certificate file and a key file"},
		{filepath.Join(dir, "missing"), keyFile, "no such file"},
		{certFile, junk, "with key " + junk},
		{keyFile, certFile, "with key " + certFile},
	} {
		if _, err := LoadKeyPair(tc.cert, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadKeyPair(%q, %q) = %v, want an error with %q", tc.cert, tc.key, err, tc.want)
		}
	}
}
