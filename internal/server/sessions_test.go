package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// expiringAuth is fakeAuth with tokens that expire at at.
type expiringAuth struct{ at time.Time }

func (e expiringAuth) Authenticate(ctx context.Context, token, remote string) (auth.Credential, error) {
	c, err := fakeAuth{}.Authenticate(ctx, token, remote)
	c.TokenID, c.ExpiresAt = "expiringtokn", e.at
	return c, err
}

// openStream is a sandbox's followed event stream through h, read line
// by line into lines until it ends (then ended is closed).
func openStream(t *testing.T, srv *httptest.Server, token string) (lines chan string, ended chan struct{}) {
	return openStreamAt(t, srv, token, "/v1/sandboxes/web/events?follow=true")
}

// openStreamAt is openStream of the NDJSON stream at path.
func openStreamAt(t *testing.T, srv *httptest.Server, token, path string) (lines chan string, ended chan struct{}) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", resp, err)
	}
	lines, ended = make(chan string, 16), make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				lines <- sc.Text()
			}
		}
	}()
	return lines, ended
}

// endedWith waits for a stream to end and returns its last line's error.
func endedWith(t *testing.T, lines chan string, ended chan struct{}) api.ErrorInfo {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(3 * time.Second):
		t.Fatal("the stream did not end")
	}
	var last string
	for len(lines) > 0 {
		last = <-lines
	}
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(last), &eb); err != nil {
		t.Fatalf("last line %q is not the error shape", last)
	}
	return eb.Error
}

// A revoked token's followed event stream ends at once, its last line
// saying why (A01), and no session of it is left; a stream that starts
// after the revocation (let in just before) ends at once too. Another
// token's stream goes on.
func TestRevokeEndsTheTokensStreams(t *testing.T) {
	f := newFake(t)
	s := f.server()
	srv := httptest.NewServer(s.RemoteHandler(fakeAuth{}, nil))
	defer srv.Close()
	lines, ended := openStream(t, srv, "tok-read")
	for s.liveSessions("abcdefghijkl") == 0 {
		time.Sleep(time.Millisecond)
	}
	other := httptest.NewServer(s.RemoteHandler(expiringAuth{}, nil)) // another token id, never expiring
	defer other.Close()
	defer s.StopFollowers() // first: the other stream never ends by itself
	otherLines, otherEnded := openStream(t, other, "tok-read")

	rec := serve(t, s.RemoteHandler(fakeAuth{}, nil), "DELETE", "/v1/tokens/abcdefghijkl", "", "Authorization", "Bearer tok-admin")
	if rec.Code != http.StatusOK {
		t.Fatalf("revoke: %d %s", rec.Code, rec.Body)
	}
	start := time.Now()
	if e := endedWith(t, lines, ended); e.Code != api.CodeUnauthenticated || !strings.Contains(e.Message, "revoked") {
		t.Errorf("the stream ended with %+v", e)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the stream ended %v after the revocation", d)
	}
	if n := s.liveSessions("abcdefghijkl"); n != 0 {
		t.Errorf("%d sessions left of the revoked token", n)
	}
	late, lateEnded := openStream(t, srv, "tok-read")
	if e := endedWith(t, late, lateEnded); e.Code != api.CodeUnauthenticated {
		t.Errorf("a stream opened after the revocation ended with %+v", e)
	}
	select {
	case <-otherEnded:
		t.Errorf("another token's stream ended: %v", <-otherLines)
	case <-time.After(100 * time.Millisecond):
	}
}

// A revoked token's stream of an operation's events ends at once, with
// the error shape as its last line: the operation goes on.
func TestRevokeEndsTheTokensOperationStreams(t *testing.T) {
	f := newFake(t)
	s := f.server()
	release := make(chan struct{})
	defer close(release)
	op := f.ops.Start("test", "x", func(context.Context, *operation.Op) (any, error) { <-release; return "ok", nil })
	s.accountOps.add(op.Info().ID, "acct-b", s.ops)
	srv := httptest.NewServer(s.RemoteHandler(fakeAuth{}, nil))
	defer srv.Close()
	lines, ended := openStreamAt(t, srv, "tok-read", "/v1/operations/"+op.Info().ID+"/events")
	for s.liveSessions("abcdefghijkl") == 0 {
		time.Sleep(time.Millisecond)
	}
	s.endSessions("abcdefghijkl")
	if e := endedWith(t, lines, ended); e.Code != api.CodeUnauthenticated {
		t.Errorf("the stream ended with %+v", e)
	}
	if op.Info().Status != api.OpRunning {
		t.Errorf("the operation: %+v", op.Info())
	}
}

// A token's stream ends at its expiry, saying so.
func TestExpiryEndsTheTokensStreams(t *testing.T) {
	f := newFake(t)
	s := f.server()
	at := time.Now().Add(300 * time.Millisecond)
	srv := httptest.NewServer(s.RemoteHandler(expiringAuth{at: at}, nil))
	defer srv.Close()
	lines, ended := openStream(t, srv, "tok-read")
	e := endedWith(t, lines, ended)
	if e.Code != api.CodeUnauthenticated || !strings.Contains(e.Message, "expired") {
		t.Errorf("the stream ended with %+v", e)
	}
	if late := time.Since(at); late < 0 || late > time.Second {
		t.Errorf("the stream ended %v after the expiry", late)
	}
}

// blockingStream is an exec stream that sends one Stdout frame and then
// nothing until it is closed.
type blockingStream struct {
	first  []byte
	once   sync.Once
	closed chan struct{}
}

func newBlockingStream() *blockingStream {
	var b bytes.Buffer
	api.WriteFrame(&b, api.FrameStdout, []byte("running\n"))
	return &blockingStream{first: b.Bytes(), closed: make(chan struct{})}
}

func (b *blockingStream) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	<-b.closed
	return 0, io.ErrClosedPipe
}

func (b *blockingStream) Write(p []byte) (int, error) { return len(p), nil }

func (b *blockingStream) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// An attached exec of a revoked token ends at once with an Error frame
// (A01) after the output it had, and its stream to the sandbox is closed
// (cairn-init hangs the command up).
func TestRevokeEndsTheTokensExec(t *testing.T) {
	f := newFake(t)
	s := f.server()
	stream := newBlockingStream()
	srv := httptest.NewServer(s.RemoteHandler(fakeAuth{}, nil))
	defer srv.Close()
	conn, br := upgradeExec(t, srv, f, stream)
	defer conn.Close()
	if typ, p, err := api.ReadFrame(br); err != nil || typ != api.FrameStdout || string(p) != "running\n" {
		t.Fatalf("first frame: %d %q %v", typ, p, err)
	}
	s.endSessions("abcdefghijkl")
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	typ, p, err := api.ReadFrame(br)
	if err != nil || typ != api.FrameError {
		t.Fatalf("after the revocation: frame %d %q %v, want an Error frame", typ, p, err)
	}
	var info api.ErrorInfo
	if json.Unmarshal(p, &info); info.Code != api.CodeUnauthenticated || !strings.Contains(info.Message, "revoked") {
		t.Errorf("error frame %+v", info)
	}
	if _, _, err := api.ReadFrame(br); err != io.EOF {
		t.Errorf("after the Error frame: %v, want the end", err)
	}
	select {
	case <-stream.closed:
	case <-time.After(time.Second):
		t.Error("the stream to the sandbox stayed open")
	}
}

// upgradeExec starts an attached exec through srv whose Processes'
// stream is stream, and returns the upgraded connection.
func upgradeExec(t *testing.T, srv *httptest.Server, f *fake, stream io.ReadWriteCloser) (net.Conn, *bufio.Reader) {
	t.Helper()
	f.execStream = stream
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"command":["sleep","600"]}`
	fmt.Fprintf(conn, "POST /v1/sandboxes/web/exec HTTP/1.1\r\nHost: cairn\r\nAuthorization: Bearer tok-member\r\nUpgrade: %s\r\nConnection: Upgrade\r\nContent-Length: %d\r\n\r\n%s",
		ExecUpgrade, len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("exec: %v %v", resp, err)
	}
	return conn, br
}

// A port connection of a revoked token is closed at once, both sides.
func TestRevokeEndsTheTokensConnections(t *testing.T) {
	f := newFake(t)
	s := f.server()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	backendGone := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("hello\n"))
		io.Copy(io.Discard, c) // until cairnd closes it
		close(backendGone)
	}()
	f.connectTo = ln.Addr().String()
	srv := httptest.NewServer(s.RemoteHandler(fakeAuth{}, nil))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/sandboxes/web/ports/8080/connect HTTP/1.1\r\nHost: cairn\r\nAuthorization: Bearer tok-member\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", api.ConnectUpgrade)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("connect: %v %v", resp, err)
	}
	if line, err := br.ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("read %q %v", line, err)
	}
	s.endSessions("abcdefghijkl")
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the revocation: %v, want the connection closed", err)
	}
	select {
	case <-backendGone:
	case <-time.After(2 * time.Second):
		t.Error("the connection to the port stayed open")
	}
}
