package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// The fake's Ports role.

func (f *fake) Ports(_ context.Context, account, name string) ([]api.Port, error) {
	f.record("Ports", account, name)
	return []api.Port{{Port: 8080}}, f.err
}

func (f *fake) Publish(_ context.Context, account, name string, req api.PublishPortRequest) (api.Port, error) {
	f.record("Publish", account, name, req)
	return api.Port{Port: req.Port, Public: req.Public}, f.err
}

func (f *fake) Unpublish(_ context.Context, account, name string, port int) error {
	f.record("Unpublish", account, name, port)
	return f.err
}

func (f *fake) Token(_ context.Context, account string, rotate bool) (api.PortToken, error) {
	f.record("Token", account, rotate)
	if rotate {
		return api.PortToken{Token: "tok2"}, f.err
	}
	return api.PortToken{Token: "tok"}, f.err
}

func (f *fake) Connect(ctx context.Context, account, name string, port int) (net.Conn, error) {
	f.record("Connect", account, name, port)
	if f.err != nil {
		return nil, f.err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", f.connectTo)
}

// upperServer accepts connections on loopback and answers each with what
// it read, upper-cased, once the client half-closes; it returns its
// address.
func upperServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	return ln.Addr().String()
}

// connect sends the connect request on a new connection to srv and
// returns the connection after the answer's headers, with the answer.
func connect(t *testing.T, srv *httptest.Server, path string) (*net.TCPConn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: cairnd\r\nConnection: Upgrade\r\nUpgrade: %s\r\nContent-Length: 0\r\n\r\n", path, api.ConnectUpgrade)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn), br, resp
}

// A connect upgrades to cairn-tcp and carries bytes both ways; the
// client's half-close reaches the port, and the port's answer still comes
// back.
func TestConnectPort(t *testing.T) {
	f := newFake(t)
	f.connectTo = upperServer(t)
	srv := httptest.NewServer(f.server())
	defer srv.Close()

	c, br, resp := connect(t, srv, "/v1/sandboxes/web/ports/5432/connect")
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != api.ConnectUpgrade {
		t.Fatalf("connect answered %s, Upgrade %q", resp.Status, resp.Header.Get("Upgrade"))
	}
	if _, err := c.Write([]byte("hello, port")); err != nil {
		t.Fatal(err)
	}
	c.CloseWrite()
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "HELLO, PORT" {
		t.Errorf("through the connection: %q, %v; want HELLO, PORT", got, err)
	}
	checkCalls(t, "connect", f.takeCalls(), &call{"Connect", def, []any{"web", 5432}}, "")

	// The role's error is answered before any upgrade.
	f.err = errdefs.New(api.CodePortNotRunning, "sandbox web is not running")
	_, br, resp = connect(t, srv, "/v1/sandboxes/web/ports/5432/connect")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("connect to a stopped sandbox: %s, want 503", resp.Status)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code":"P03"`) {
		t.Errorf("connect to a stopped sandbox: body %s, want P03", body)
	}
	_ = br
}
