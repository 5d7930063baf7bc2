package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/testenv/testcert"
)

var (
	wsechoOnce sync.Once
	wsechoBin  []byte
	wsechoErr  error
)

// wsecho is the WebSocket echo server of testdata/wsecho, built once.
func wsecho(t *testing.T) []byte {
	t.Helper()
	wsechoOnce.Do(func() {
		out := filepath.Join(t.TempDir(), "wsecho")
		cmd := exec.Command("go", "build", "-o", out, "./testdata/wsecho")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			wsechoErr = err
			t.Logf("%s", b)
			return
		}
		wsechoBin, wsechoErr = os.ReadFile(out)
	})
	if wsechoErr != nil {
		t.Fatalf("build wsecho: %v", wsechoErr)
	}
	return wsechoBin
}

// services installs httpd on 8080 and wsecho on 8081 as services of name,
// so that they start at every boot (after a disk restore too).
func (d *daemon) services(t *testing.T, name string) {
	t.Helper()
	if _, errOut, code := d.cli(string(wsecho(t)), "exec", "-i", name, "--", "sh", "-c", "cat > /root/wsecho && chmod +x /root/wsecho"); code != 0 {
		t.Fatalf("copy wsecho in: %s", errOut)
	}
	d.sh(name, `mkdir -p /etc/cairn/services /www && echo page of `+name+` > /www/index.html &&
echo '{"name":"web","cmd":["httpd","-f","-p","8080","-h","/www"],"restart":"always"}' > /etc/cairn/services/web.json &&
echo '{"name":"ws","cmd":["/root/wsecho","-addr",":8081"],"restart":"always"}' > /etc/cairn/services/ws.json`)
	d.mustCLI("restart", name)
	d.waitServing(name)
}

// wsRoundTrip sends a message through the proxy's host-form URL u to the
// WebSocket echo server and returns the answer.
func wsRoundTrip(t *testing.T, u string) (string, error) {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	dial := "ws://127.0.0.1:" + pu.Port() + pu.Path
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, dial, &websocket.DialOptions{Host: pu.Host})
	if err != nil {
		return "", err
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		return "", err
	}
	_, msg, err := c.Read(ctx)
	return string(msg), err
}

func (d *daemon) publishPort(name, port string, flags ...string) api.Port {
	d.t.Helper()
	var p api.Port
	if err := json.Unmarshal([]byte(d.mustCLI(append([]string{"--json", "port", "publish", name, port}, flags...)...)), &p); err != nil {
		d.t.Fatalf("port publish: %v", err)
	}
	return p
}

// WebSocket and HTTP through the proxy, and raw TCP through cairn port
// forward, reach the servers inside; published ports and the network come
// back after a restore in place of a disk checkpoint, a saved session's
// start and in a sandbox restored as new (with its own URL).
func TestPortsWebSocketForwardAndRestores(t *testing.T) {
	d := startDaemon(t)
	d.create("web")
	d.services(t, "web")
	d.publishPort("web", "8080", "--public")
	d.publishPort("web", "8081", "--public")
	urls := func(name string) (page, ws string) {
		var ports []api.Port
		if err := json.Unmarshal([]byte(d.mustCLI("--json", "port", "list", name)), &ports); err != nil || len(ports) != 2 {
			t.Fatalf("port list %s: %v %+v", name, err, ports)
		}
		return ports[0].URL, ports[1].URL
	}
	check := func(when, name string) {
		t.Helper()
		page, ws := urls(name)
		if code, body := viaProxy(t, page, ""); code != 200 || !strings.Contains(body, "page of ") {
			t.Fatalf("%s: HTTP through the proxy: %d %q", when, code, body)
		}
		if msg, err := wsRoundTrip(t, ws); err != nil || msg != name+": ping" {
			t.Fatalf("%s: WebSocket through the proxy: %q %v", when, msg, err)
		}
		if _, err := d.execOut(30*time.Second, name, "timeout", "5", "wget", "-q", "-O", "-", "http://allowed.test/"); err != nil {
			t.Fatalf("%s: outbound: %v", when, err)
		}
	}
	check("at first", "web")

	// Raw TCP through cairn port forward.
	fwd := exec.Command(filepath.Join(binDir, "cairn"), "--socket", d.socket, "--json", "port", "forward", "web", "8080", "--local", "0")
	stdout, _ := fwd.StdoutPipe()
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { fwd.Process.Kill(); fwd.Wait() }()
	var where struct{ Local string }
	if err := json.NewDecoder(stdout).Decode(&where); err != nil || where.Local == "" {
		t.Fatalf("port forward printed %+v: %v", where, err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + where.Local + "/")
	if err != nil {
		t.Fatalf("GET through port forward: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET through port forward: %d", resp.StatusCode)
	}

	// Restore in place of a disk checkpoint: the services start again,
	// the same URLs reach them.
	ck := d.checkpoint("web")
	d.mustCLI("restore", "web", ck.ID)
	d.waitServing("web")
	check("after a restore in place", "web")

	// A saved session: stop --snapshot, start.
	d.mustCLI("stop", "web", "--snapshot")
	d.mustCLI("start", "web")
	check("after a saved session's start", "web")

	// Restored as new: its own copy of the ports, its own URLs.
	d.mustCLI("checkpoint", "restore", "web", ck.ID, "--as", "copy")
	d.waitServing("copy")
	check("in a sandbox restored as new", "copy")
	page, _ := urls("copy")
	if !strings.Contains(page, "copy") {
		t.Fatalf("the copy's URL %q does not name it", page)
	}
	d.mustCLI("delete", "copy")
	d.mustCLI("delete", "web")
	d.checkNoNetworkLeft()
}

// With a certificate, cairnd's proxy serves HTTPS: https:// URLs, the
// page and a WebSocket (wss) reach the servers inside, and a private port
// still needs its token. Given half a key pair, cairnd refuses to start.
func TestPortsOverHTTPS(t *testing.T) {
	pair := testcert.Write(t, t.TempDir(), "cairn proxy", "localhost", "*.localhost")
	d := startDaemon(t, "--proxy-tls-cert", pair.CertFile, "--proxy-tls-key", pair.KeyFile)
	d.create("web")
	d.services(t, "web")
	page := d.publishPort("web", "8080", "--public").URL
	ws := d.publishPort("web", "8081").URL
	if !strings.HasPrefix(page, "https://8080-web.localhost:") || !strings.HasPrefix(ws, "https://8081-web.localhost:") {
		t.Fatalf("URLs %q %q, want https:// ones", page, ws)
	}
	u, _ := url.Parse(page)
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pair.Roots()},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+u.Port())
		},
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	resp, err := c.Get(page)
	if err != nil {
		t.Fatalf("GET %s: %v", page, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "page of web") {
		t.Fatalf("GET %s: %s %q", page, resp.Status, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	wss := strings.Replace(ws, "https://", "wss://", 1)
	if _, resp, err := websocket.Dial(ctx, wss, &websocket.DialOptions{HTTPClient: c}); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a private wss without the token: %v %v", resp, err)
	}
	conn, _, err := websocket.Dial(ctx, wss, &websocket.DialOptions{HTTPClient: c,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + d.portToken()}}})
	if err != nil {
		t.Fatalf("wss with the token: %v", err)
	}
	defer conn.CloseNow()
	if err := conn.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := conn.Read(ctx); err != nil || string(msg) != "web: ping" {
		t.Fatalf("wss echo: %q %v", msg, err)
	}

	// Half a key pair: cairnd says so and makes nothing.
	dir := t.TempDir()
	out, err := exec.Command(filepath.Join(binDir, "cairnd"), "--data-dir", filepath.Join(dir, "data"),
		"--socket", filepath.Join(dir, "s.sock"), "--proxy-tls-cert", pair.CertFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "both a certificate file and a key file") {
		t.Fatalf("cairnd with a certificate and no key: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "pool.img")); err == nil {
		t.Error("cairnd refused to start but made a pool")
	}
}
