package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/httpedge"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// The tests of the connection edge: the server behind a real unix socket,
// as cairnd serves its API socket and each sandbox's /.cairn/api.sock
// (package httpedge).

// serveUnix serves h on a new unix socket under lim and returns its path.
func serveUnix(t *testing.T, h http.Handler, lim httpedge.Limits) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httpedge.NewServer(h, lim)
	go srv.Serve(httpedge.Listen(ln, lim))
	t.Cleanup(func() { srv.Close() })
	return path
}

func dialUnix(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testLimits are short limits, for tests that wait for them.
func testLimits(maxConns int) httpedge.Limits {
	return httpedge.Limits{Name: "test", MaxConns: maxConns, HeaderTimeout: time.Second, RequestTimeout: 700 * time.Millisecond, IdleTimeout: 5 * time.Second}
}

// slowWork is an operation that reports progress every 50 ms for d.
func slowWork(d time.Duration) operation.Func {
	return func(ctx context.Context, op *operation.Op) (any, error) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			op.Progress("still working")
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return "done", nil
	}
}

// A client that shuts down its write side once its request is sent (as
// `nc -N` does) still gets the whole answer, streamed progress included,
// on both sockets; the connection then ends.
func TestHalfClosingClientIsServed(t *testing.T) {
	f := newFake(t)
	f.work = slowWork(400 * time.Millisecond)
	s := f.server()
	for _, c := range []struct {
		socket, request string
	}{
		{"api socket", "POST /v1/sandboxes/web/checkpoint HTTP/1.1\r\nHost: cairn\r\nContent-Length: 2\r\n\r\n{}"},
		{"api socket", "GET /v1/sandboxes/web HTTP/1.1\r\nHost: cairn\r\n\r\n"},
		{"api.sock", "POST /v1/checkpoint HTTP/1.1\r\nHost: cairn\r\nContent-Length: 0\r\n\r\n"},
		{"api.sock", "POST /v1/checkpoint HTTP/1.1\r\nHost: cairn\r\nContent-Length: 17\r\n\r\n{\"comment\":\"hi\"}\n"},
	} {
		h := http.Handler(s)
		if c.socket == "api.sock" {
			h = s.SandboxHandler("sb-1")
		}
		conn := dialUnix(t, serveUnix(t, h, testLimits(4)))
		if _, err := io.WriteString(conn, c.request); err != nil {
			t.Fatal(err)
		}
		if err := conn.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %q: %v", c.socket, c.request, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", c.socket, err)
		}
		if resp.StatusCode != http.StatusOK || (strings.HasPrefix(c.request, "POST") && !strings.Contains(string(body), `"type":"complete"`)) {
			t.Errorf("%s: half-closed %q: %d %s, want 200 and the whole stream", c.socket, strings.SplitN(c.request, "\r\n", 2)[0], resp.StatusCode, body)
		}
	}
}

// A client that goes away entirely during a streamed answer is noticed at
// the next write: its handler ends (freeing its connection under the cap)
// long before the operation does.
func TestGoneClientEndsItsStream(t *testing.T) {
	f := newFake(t)
	f.work = slowWork(5 * time.Second)
	path := serveUnix(t, f.server().SandboxHandler("sb-1"), testLimits(1))
	conn := dialUnix(t, path)
	io.WriteString(conn, "POST /v1/checkpoint HTTP/1.1\r\nHost: cairn\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	// The cap is one connection: a new one is served once the first is
	// let go.
	start := time.Now()
	for {
		c := dialUnix(t, path)
		io.WriteString(c, "GET /v1 HTTP/1.1\r\nHost: cairn\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("the connection of a client gone mid-stream was not let go in %v (%v)", time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A body sent a byte at a time fails at the request's read deadline with
// a clear error, 408 V03, instead of being accepted whenever it ends; so
// do headers, whose connection is closed.
func TestTrickledRequestFails(t *testing.T) {
	f := newFake(t)
	s := f.server()
	for _, c := range []struct {
		socket, head, body string
	}{
		{"api socket", "POST /v1/sandboxes HTTP/1.1\r\nHost: cairn\r\nContent-Length: 40\r\n\r\n", `{"name":"web","image":"busybox","cpus":1}`},
		{"api.sock", "POST /v1/checkpoint HTTP/1.1\r\nHost: cairn\r\nContent-Length: 40\r\n\r\n", `{"comment":"slow as can be, and slower"}`},
	} {
		h := http.Handler(s)
		if c.socket == "api.sock" {
			h = s.SandboxHandler("sb-1")
		}
		conn := dialUnix(t, serveUnix(t, h, testLimits(4)))
		io.WriteString(conn, c.head)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < len(c.body); i++ {
				if _, err := io.WriteString(conn, c.body[i:i+1]); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond) // 4 s in all
			}
		}()
		start := time.Now()
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.socket, err)
		}
		var eb api.ErrorBody
		json.NewDecoder(resp.Body).Decode(&eb)
		if took := time.Since(start); resp.StatusCode != http.StatusRequestTimeout || eb.Error.Code != api.CodeInvalidRequest ||
			!strings.Contains(eb.Error.Message, "not received in time") || took > 2*time.Second {
			t.Errorf("%s: trickled body: %d %+v after %v, want 408 V03 within the 700 ms deadline", c.socket, resp.StatusCode, eb.Error, took)
		}
		conn.Close()
		<-done
	}
	if calls := f.takeCalls(); len(calls) != 1 || calls[0].Method != "Whoami" {
		t.Errorf("calls %+v: a trickled body reached a role", calls)
	}

	// Headers: the connection is closed at the header deadline.
	conn := dialUnix(t, serveUnix(t, s, testLimits(4)))
	go func() {
		for _, b := range "GET /v1 HTTP/1.1\r\nHost: cairn\r\nX-Slow: " + strings.Repeat("x", 40) {
			if _, err := io.WriteString(conn, string(b)); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.ReadAll(conn)
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("trickled headers: the connection stayed open %v, want about the 1 s header deadline", took)
	}
}

// Connections past the cap are accepted and closed at once; closing one
// makes room for the next.
func TestConnectionCap(t *testing.T) {
	f := newFake(t)
	const max = 3
	path := serveUnix(t, f.server().SandboxHandler("sb-1"), testLimits(max))
	var held []*net.UnixConn
	for i := range max {
		c := dialUnix(t, path)
		held = append(held, c)
		// Each is served (and so counted) before the next comes.
		fmt.Fprintf(c, "GET /v1 HTTP/1.1\r\nHost: cairn\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d under the cap: %v", i, err)
		}
		resp.Body.Close()
	}
	for i := range 5 {
		c := dialUnix(t, path)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		start := time.Now()
		fmt.Fprintf(c, "GET /v1 HTTP/1.1\r\nHost: cairn\r\n\r\n")
		n, err := c.Read(make([]byte, 1))
		if n != 0 || err == nil || isTimeout(err) || time.Since(start) > time.Second {
			t.Fatalf("connection %d past the cap: read %d, %v after %v; want it closed at once", max+i, n, err, time.Since(start))
		}
	}
	held[0].Close()
	start := time.Now()
	for {
		c := dialUnix(t, path)
		fmt.Fprintf(c, "GET /v1 HTTP/1.1\r\nHost: cairn\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		c.Close()
		if time.Since(start) > 2*time.Second {
			t.Fatalf("no room after closing a connection: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
