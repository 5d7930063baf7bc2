package portproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if !errdefs.Is(err, code) {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

func TestPublishListUnpublish(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	def := metadata.DefaultAccount
	_, port, _ := net.SplitHostPort(e.addr)

	p, err := e.svc.Publish(ctx, def, "web", api.PublishPortRequest{Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	if p.Port != 8080 || p.Public || p.URL != "http://8080-web.localhost:"+port+"/" ||
		p.PathURL != "http://localhost:"+port+"/sandboxes/web/ports/8080/" || p.CreatedAt.IsZero() {
		t.Errorf("Publish = %+v", p)
	}
	// Again: changes public/private.
	if p, err = e.svc.Publish(ctx, def, "web", api.PublishPortRequest{Port: 8080, Public: true}); err != nil || !p.Public {
		t.Errorf("Publish again = %+v, %v; want public", p, err)
	}
	if _, err := e.svc.Publish(ctx, def, "web", api.PublishPortRequest{Port: 22}); err != nil {
		t.Fatal(err)
	}
	ps, err := e.svc.Ports(ctx, def, "web")
	if err != nil || len(ps) != 2 || ps[0].Port != 22 || ps[1].Port != 8080 || !ps[1].Public || ps[0].Public {
		t.Errorf("Ports = %+v, %v", ps, err)
	}

	for _, bad := range []int{0, -1, 65536, 1 << 20} {
		_, err := e.svc.Publish(ctx, def, "web", api.PublishPortRequest{Port: bad})
		wantCode(t, "Publish of a bad port", err, api.CodeInvalidArgument)
		wantCode(t, "Unpublish of a bad port", e.svc.Unpublish(ctx, def, "web", bad), api.CodeInvalidArgument)
	}
	_, err = e.svc.Publish(ctx, def, "nosuch", api.PublishPortRequest{Port: 80})
	wantCode(t, "Publish on a missing sandbox", err, api.CodeNoSandbox)
	_, err = e.svc.Ports(ctx, def, "nosuch")
	wantCode(t, "Ports of a missing sandbox", err, api.CodeNoSandbox)
	_, err = e.svc.Ports(ctx, "bob", "web")
	wantCode(t, "Ports in an account that does not exist", err, api.CodeNoSandbox)

	if err := e.svc.Unpublish(ctx, def, "web", 22); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Unpublish again", e.svc.Unpublish(ctx, def, "web", 22), api.CodePortNotPublished)
	wantCode(t, "Unpublish on a missing sandbox", e.svc.Unpublish(ctx, def, "nosuch", 22), api.CodeNoSandbox)
	if ps, _ := e.svc.Ports(ctx, def, "web"); len(ps) != 1 {
		t.Errorf("after unpublish: %+v", ps)
	}
}

func TestURLsOnPort80(t *testing.T) {
	svc, err := New(Config{Domain: "Sandboxes.Example.COM.", Addr: "0.0.0.0:80"})
	if err != nil {
		t.Fatal(err)
	}
	host, path := svc.URLs("web", 3000)
	if host != "http://3000-web.sandboxes.example.com/" || path != "http://sandboxes.example.com/sandboxes/web/ports/3000/" {
		t.Errorf("URLs = %s, %s", host, path)
	}
	for _, bad := range []Config{{Domain: "bad_domain"}, {Domain: "a..b"}, {Addr: "no-port"}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) succeeded", bad)
		}
	}
}

func TestTokenStableUntilRotated(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, err := e.svc.Token(ctx, metadata.DefaultAccount, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Token) != 43 || strings.ContainsAny(a.Token, "+/=") {
		t.Errorf("token %q is not 32 bytes of base64url", a.Token)
	}
	if b, err := e.svc.Token(ctx, metadata.DefaultAccount, false); err != nil || b != a {
		t.Errorf("token again = %+v, %v; want %+v", b, err, a)
	}
	c, err := e.svc.Token(ctx, metadata.DefaultAccount, true)
	if err != nil || c == a {
		t.Errorf("rotated = %+v, %v", c, err)
	}
	if d, _ := e.svc.Token(ctx, metadata.DefaultAccount, false); d != c {
		t.Errorf("after rotation: %+v, want %+v", d, c)
	}
}

// Connect reaches a port, published or not, of a running sandbox.
func TestConnect(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hello from 5432"))
			c.Close()
		}
	}()
	e.dialer.route(webID, 5432, ln.Addr().String())
	c, err := e.svc.Connect(ctx, metadata.DefaultAccount, "web", 5432)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "hello from 5432" {
		t.Errorf("read %q", b)
	}

	_, err = e.svc.Connect(ctx, metadata.DefaultAccount, "web", 5433)
	wantCode(t, "Connect where nothing listens", err, api.CodePortUnreachable)
	_, err = e.svc.Connect(ctx, metadata.DefaultAccount, "web", 0)
	wantCode(t, "Connect to port 0", err, api.CodeInvalidArgument)
	_, err = e.svc.Connect(ctx, metadata.DefaultAccount, "nosuch", 5432)
	wantCode(t, "Connect to a missing sandbox", err, api.CodeNoSandbox)
	if err := e.store.SetSandboxState(ctx, webID, metadata.SandboxCrashed); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Connect(ctx, metadata.DefaultAccount, "web", 5432)
	wantCode(t, "Connect to a crashed sandbox", err, api.CodePortNotRunning)

	// A dialer's own code comes through; the unwired one fails plainly.
	e.svc.cfg.Dialer = codedDialer{}
	if err := e.store.SetSandboxState(ctx, webID, metadata.SandboxRunning); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Connect(ctx, metadata.DefaultAccount, "web", 5432)
	wantCode(t, "Connect with a dialer's code", err, api.CodeSandboxDown)
	e.svc.cfg.Dialer = Unwired{}
	_, err = e.svc.Connect(ctx, metadata.DefaultAccount, "web", 5432)
	if wantCode(t, "Connect unwired", err, api.CodePortUnreachable); err == nil || !strings.Contains(err.Error(), "networking not wired") {
		t.Errorf("unwired: %v", err)
	}
}

type codedDialer struct{}

func (codedDialer) DialSandbox(context.Context, string, int) (net.Conn, error) {
	return nil, errdefs.Wrap(api.CodeSandboxDown, errors.New("init gone"), "sandbox is down")
}
