package integration

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// listenAddr is a free loopback address for cairnd --listen.
func listenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe to write and read at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Over the real TLS listener: revoking a token ends its attached exec
// (an Error frame, A01; the command is hung up) and its followed event
// stream (the error shape as the last line, A01) within a second or two;
// another token's stream goes on. A token that expires has its stream
// ended at its expiry.
func TestRevokedAndExpiredTokensEndTheirSessions(t *testing.T) {
	listen := listenAddr(t)
	d := startDaemon(t, "--listen", listen)
	info, err := d.client.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI("account", "create", "team")
	// The short-lived token first: its minute runs while the rest is set up.
	short := d.token("team", "short", "member", "--expires", "1m")
	shortMade := time.Now()
	tok, other := d.token("team", "laptop", "member"), d.token("team", "ci", "member")
	remote := func(token string) *client.Client {
		c, err := client.NewRemote(client.Remote{URL: info.Listen, Token: token, Fingerprint: info.TLSFingerprint})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	laptop, ci, shortAPI := remote(tok.Token), remote(other.Token), remote(short.Token)
	user := d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+other.Token, "CAIRN_TLS_FINGERPRINT="+info.TLSFingerprint)
	user.must("create", "web", "--image", "busybox", "--network", "none")

	type ended struct {
		err error
		at  time.Time
	}
	follow := func(c *client.Client) chan ended {
		ch := make(chan ended, 1)
		go func() {
			err := c.SandboxEvents(context.Background(), "web", 0, true, func(api.SandboxActivity) error { return nil })
			ch <- ended{err, time.Now()}
		}()
		return ch
	}
	laptopEvents, ciEvents, shortEvents := follow(laptop), follow(ci), follow(shortAPI)
	var out syncBuffer
	execEnd := make(chan ended, 1)
	go func() {
		_, err := laptop.Exec(context.Background(), "web", api.ExecRequest{Command: []string{"sh", "-c", "echo started; exec sleep 600"}},
			client.ExecIO{Stdout: &out, Stderr: &out})
		execEnd <- ended{err, time.Now()}
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "started"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the exec did not start: %q", out.String())
		}
	}
	time.Sleep(200 * time.Millisecond) // the event streams are open by now

	revoked := time.Now()
	d.mustCLI("token", "revoke", tok.Info.ID)
	for what, ch := range map[string]chan ended{"exec": execEnd, "events": laptopEvents} {
		select {
		case e := <-ch:
			if client.CodeOf(e.err) != api.CodeUnauthenticated || !strings.Contains(e.err.Error(), "revoked") {
				t.Errorf("%s ended with %v, want A01 saying the token was revoked", what, e.err)
			}
			if took := e.at.Sub(revoked); took > 2*time.Second {
				t.Errorf("%s ended %v after the revocation", what, took)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s goes on after its token was revoked", what)
		}
	}
	// The command was hung up with its session.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ps := user.must("exec", "web", "--", "ps")
		if !strings.Contains(ps, "sleep 600") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked session's command still runs:\n%s", ps)
		}
	}
	select {
	case e := <-ciEvents:
		t.Errorf("another token's stream ended: %v", e.err)
	default:
	}

	// The short-lived token's stream ends at its expiry, not before.
	expiry := shortMade.Add(time.Minute)
	select {
	case e := <-shortEvents:
		if client.CodeOf(e.err) != api.CodeUnauthenticated || !strings.Contains(e.err.Error(), "expired") {
			t.Errorf("the expiring token's stream ended with %v, want A01 saying it expired", e.err)
		}
		if early := expiry.Sub(e.at); early > 2*time.Second {
			t.Errorf("the expiring token's stream ended %v before its expiry", early)
		}
		if late := e.at.Sub(expiry); late > 3*time.Second {
			t.Errorf("the expiring token's stream ended %v after its expiry", late)
		}
	case <-time.After(time.Until(expiry) + 10*time.Second):
		t.Error("the expiring token's stream goes on past its expiry")
	}
	select {
	case e := <-ciEvents:
		t.Errorf("another token's stream ended: %v", e.err)
	default:
	}
}
