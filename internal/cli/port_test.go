package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

var webPort = api.Port{Port: 8080, URL: "http://8080-web.localhost:8800/", PathURL: "http://localhost:8800/sandboxes/web/ports/8080/"}

func TestPortPublish(t *testing.T) {
	var got []map[string]any
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/web/ports", func(w http.ResponseWriter, r *http.Request) {
		body := jsonBody(r)
		got = append(got, body)
		p := webPort
		p.Public = body["public"] == true
		writeJSON(w, 200, p)
	})
	sock := fakeDaemon(t, mux)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "port", "publish", "web", "8080")
	if code != 0 || stdout != "Port 8080 of web is published (private):\n  http://8080-web.localhost:8800/\n  http://localhost:8800/sandboxes/web/ports/8080/\n"+
		"It needs the port token: `cairn port token`.\n" {
		t.Errorf("publish: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "port", "publish", "web", "8080", "--public")
	var p api.Port
	if code != 0 || json.Unmarshal([]byte(stdout), &p) != nil || !p.Public || p.URL != webPort.URL {
		t.Errorf("publish --public --json: exit %d, %s", code, stdout)
	}
	if len(got) != 2 || fmt.Sprint(got[0]) != "map[port:8080]" || fmt.Sprint(got[1]) != "map[port:8080 public:true]" {
		t.Errorf("bodies sent: %v", got)
	}

	// Bad ports never reach cairnd: exit 2, V02.
	for _, bad := range []string{"0", "65536", "http", "8080.5", "1e3"} {
		code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "port", "publish", "web", bad)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "error V02: invalid port") {
			t.Errorf("publish web %s: exit %d, stdout %q, stderr %q", bad, code, stdout, stderr)
		}
	}
	if len(got) != 2 {
		t.Errorf("bad ports reached cairnd: %v", got)
	}
}

func TestPortListUnpublishToken(t *testing.T) {
	var calls []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web/ports", func(w http.ResponseWriter, r *http.Request) {
		pub := api.Port{Port: 3000, Public: true, URL: "http://3000-web.localhost:8800/", PathURL: "http://localhost:8800/sandboxes/web/ports/3000/"}
		writeJSON(w, 200, []api.Port{pub, webPort})
	})
	mux.HandleFunc("GET /v1/sandboxes/empty/ports", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []api.Port{})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/web/ports/{port}", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, "DELETE "+r.PathValue("port"))
		if r.PathValue("port") == "9" {
			writeAPIError(w, 404, api.CodePortNotPublished, "sandbox web has not published port 9")
			return
		}
		writeJSON(w, 200, map[string]string{"unpublished": "web/" + r.PathValue("port")})
	})
	mux.HandleFunc("GET /v1/account/port-token", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, "token")
		writeJSON(w, 200, api.PortToken{Token: "tok-1"})
	})
	mux.HandleFunc("POST /v1/account/port-token/rotate", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, "rotate")
		writeJSON(w, 200, api.PortToken{Token: "tok-2"})
	})
	sock := fakeDaemon(t, mux)
	cli := func(args ...string) (int, string, string) {
		return runCLI(t, context.Background(), append([]string{"--socket", sock}, args...)...)
	}

	code, stdout, _ := cli("port", "list", "web")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "PORT") || !strings.Contains(lines[1], "public") ||
		!strings.Contains(lines[2], "private") || !strings.Contains(lines[2], webPort.PathURL) {
		t.Errorf("list: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = cli("--json", "port", "list", "web")
	var ps []api.Port
	if code != 0 || json.Unmarshal([]byte(stdout), &ps) != nil || len(ps) != 2 {
		t.Errorf("list --json: exit %d, %s", code, stdout)
	}
	if code, stdout, _ = cli("port", "ls", "empty"); code != 0 || !strings.Contains(stdout, "publishes no ports") {
		t.Errorf("list of none: exit %d, %q", code, stdout)
	}
	if code, stdout, _ = cli("--json", "port", "list", "empty"); code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list --json of none: exit %d, %q", code, stdout)
	}

	if code, stdout, _ = cli("port", "unpublish", "web", "8080"); code != 0 || stdout != "Port 8080 of web is no longer published\n" {
		t.Errorf("unpublish: exit %d, %q", code, stdout)
	}
	code, stdout, stderr := cli("port", "unpublish", "web", "9")
	if code != exitFailure || stdout != "" || stderr != "error P01: sandbox web has not published port 9\n" {
		t.Errorf("unpublish of a port not published: exit %d, %q, %q", code, stdout, stderr)
	}

	if code, stdout, _ = cli("port", "token"); code != 0 || stdout != "tok-1\n" {
		t.Errorf("token: exit %d, %q", code, stdout)
	}
	code, stdout, stderr = cli("port", "token", "--rotate")
	if code != 0 || stdout != "tok-2\n" || !strings.Contains(stderr, "replaced") {
		t.Errorf("token --rotate: exit %d, %q, %q", code, stdout, stderr)
	}
	if code, stdout, _ = cli("--json", "port", "token"); code != 0 || strings.TrimSpace(stdout) != "{\n  \"token\": \"tok-1\"\n}" {
		t.Errorf("token --json: exit %d, %q", code, stdout)
	}
	if want := "[DELETE 8080 DELETE 9 token rotate token]"; fmt.Sprint(calls) != want {
		t.Errorf("calls %v, want %s", calls, want)
	}
}

// upgradeToUpper answers a connect as cairnd does (101 cairn-tcp) and
// then sends back what it read, upper-cased, once the client half-closed.
func upgradeToUpper(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != api.ConnectUpgrade {
		writeAPIError(w, 400, api.CodeInvalidRequest, "no upgrade")
		return
	}
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", api.ConnectUpgrade)
	buf.Flush()
	b, _ := io.ReadAll(buf.Reader)
	conn.Write([]byte(strings.ToUpper(string(b))))
}

// freePort returns a loopback port nothing listens on (just now).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// dialRetry connects to addr, waiting up to 10 s for it to listen.
func dialRetry(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			return c.(*net.TCPConn)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPortForward(t *testing.T) {
	var mu sync.Mutex
	connects := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.Sandbox{Name: "web"})
	})
	mux.HandleFunc("POST /v1/sandboxes/web/ports/5432/connect", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		connects++
		n := connects
		mu.Unlock()
		if n == 3 {
			writeAPIError(w, 503, api.CodePortNotRunning, "sandbox web is not running")
			return
		}
		upgradeToUpper(w, r)
	})
	mux.HandleFunc("GET /v1/sandboxes/nosuch", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, 404, api.CodeNoSandbox, `no sandbox named "nosuch"`)
	})
	sock := fakeDaemon(t, mux)
	local := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := runCLI(t, ctx, "--socket", sock, "port", "forward", "web", "5432", "--local", strconv.Itoa(local))
		done <- result{code, stdout, stderr}
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(local))
	// Two connections at once, each its own stream.
	a, b := dialRetry(t, addr), dialRetry(t, addr)
	for i, c := range []*net.TCPConn{a, b} {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "hello %d", i)
	}
	for i, c := range []*net.TCPConn{b, a} {
		c.CloseWrite()
		got, err := io.ReadAll(bufio.NewReader(c))
		if want := fmt.Sprintf("HELLO %d", 1-i); err != nil || string(got) != want {
			t.Errorf("through the forward: %q, %v; want %q", got, err, want)
		}
		c.Close()
	}
	// One cairnd refuses: closed at once, and the reason printed.
	c := dialRetry(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if got, _ := io.ReadAll(c); len(got) != 0 {
		t.Errorf("a refused connection read %q", got)
	}
	c.Close()

	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("forward did not end at Ctrl-C")
	}
	if r.code != 0 || r.stdout != fmt.Sprintf("Forwarding %s to port 5432 of web; Ctrl-C to stop\n", addr) ||
		r.stderr != "error P03: sandbox web is not running\n" {
		t.Errorf("forward: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// A sandbox that does not exist fails before listening; bad ports are
	// usage errors.
	code, _, stderr := runCLI(t, context.Background(), "--socket", sock, "port", "forward", "nosuch", "5432", "--local", "0")
	if code != exitFailure || !strings.HasPrefix(stderr, "error S01") {
		t.Errorf("forward of a missing sandbox: exit %d, %q", code, stderr)
	}
	for _, args := range [][]string{{"web", "0"}, {"web", "80", "--local", "70000"}, {"web", "80", "--local", "x"}} {
		code, _, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock, "port", "forward"}, args...)...)
		if code != exitUsage || !strings.HasPrefix(stderr, "error V02") {
			t.Errorf("forward %q: exit %d, %q", args, code, stderr)
		}
	}
}

// A local port that is taken is refused with V02 and a hint, not a raw
// listen error.
func TestPortForwardLocalPortTaken(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.Sandbox{Name: "web"})
	})
	sock := fakeDaemon(t, mux)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	code, stdout, _ := runCLI(t, context.Background(), "--socket", sock, "--json", "port", "forward", "web", "5432", "--local", port)
	if code != 2 || !strings.Contains(stdout, api.CodeInvalidArgument) || !strings.Contains(stdout, "taken") {
		t.Fatalf("forward to a taken local port: exit %d, %s", code, stdout)
	}
}
