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
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// readEvent reads one NDJSON line as an event.
func readEvent(t *testing.T, br *bufio.Reader) api.Event {
	t.Helper()
	line, err := br.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading an event: %v (read %q)", err, line)
	}
	var ev api.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatalf("event %q: %v", line, err)
	}
	return ev
}

// request sends a request to srv with the Accept header accept ("" for
// none).
func request(t *testing.T, srv *httptest.Server, method, path, accept string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	// Headers that are not flushed (they wait for the end of the work) are
	// an error, not a hang.
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 5 * time.Second
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// With Accept: application/x-ndjson, long work streams its events as they
// happen (each flushed at once), ending with complete; otherwise it answers
// 202 with the operation and its Location, whose events replay from the
// first.
func TestOperationsStreamAsNDJSON(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	f.work = func(ctx context.Context, op *operation.Op) (any, error) {
		op.Progress("one")
		<-release
		op.Progress("two")
		return map[string]string{"name": "web"}, nil
	}
	srv := httptest.NewServer(f.server())
	defer srv.Close()
	defer releaseOnce.Do(func() { close(release) }) // before Close waits for the handler

	resp := request(t, srv, "POST", "/v1/sandboxes/web/start", ndjson)
	id := resp.Header.Get("Cairn-Operation")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ndjson || id == "" {
		t.Fatalf("NDJSON start: %d %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	// The first event arrives while the work is still blocked: it was
	// flushed, not buffered to the end.
	first := make(chan []byte, 1)
	go func() {
		line, _ := br.ReadBytes('\n')
		first <- line
	}()
	select {
	case line := <-first:
		var ev api.Event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Type != api.EventProgress || ev.Data != "one" {
			t.Fatalf("first event %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event was not sent while the work went on (not flushed)")
	}
	releaseOnce.Do(func() { close(release) })
	if ev := readEvent(t, br); ev.Type != api.EventProgress || ev.Data != "two" {
		t.Fatalf("second event %+v", ev)
	}
	if ev := readEvent(t, br); ev.Type != api.EventComplete || fmt.Sprint(ev.Data) != "map[name:web]" {
		t.Fatalf("last event %+v", ev)
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("after complete: %q", rest)
	}

	// The same operation, asked for late, replays every event.
	resp = request(t, srv, "GET", "/v1/operations/"+id+"/events", "")
	br = bufio.NewReader(resp.Body)
	for _, want := range []string{api.EventProgress, api.EventProgress, api.EventComplete} {
		if ev := readEvent(t, br); ev.Type != want {
			t.Fatalf("replayed event %+v, want %s", ev, want)
		}
	}

	// Without the Accept header: 202, the operation and its Location.
	resp = request(t, srv, "POST", "/v1/sandboxes/web/start", "")
	var info api.Operation
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || info.ID == "" || info.Kind != "fake.Start" || resp.Header.Get("Location") != "/v1/operations/"+info.ID {
		t.Fatalf("start: %d %v %+v", resp.StatusCode, resp.Header, info)
	}
}

// A failed operation's stream ends with an error event carrying the code
// and message; the operation then says failure with that error.
func TestAFailedOperationStreamsItsError(t *testing.T) {
	f := newFake(t)
	f.work = func(ctx context.Context, op *operation.Op) (any, error) {
		op.Progress("trying")
		return nil, errdefs.New(api.CodeRuntimeFailed, "runsc said no")
	}
	srv := httptest.NewServer(f.server())
	defer srv.Close()

	resp := request(t, srv, "POST", "/v1/sandboxes/web/restart", ndjson)
	br := bufio.NewReader(resp.Body)
	readEvent(t, br)
	ev := readEvent(t, br)
	b, _ := json.Marshal(ev.Data)
	if ev.Type != api.EventError || string(b) != `{"code":"S06","message":"runsc said no"}` {
		t.Fatalf("error event %+v (%s)", ev, b)
	}
	resp = request(t, srv, "GET", "/v1/operations/"+resp.Header.Get("Cairn-Operation"), "")
	var info api.Operation
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.Status != api.OpFailure || info.Error == nil || info.Error.Code != api.CodeRuntimeFailed {
		t.Fatalf("operation %+v", info)
	}
}

// Creating a checkpoint streams NDJSON unless the client asks for JSON.
func TestCheckpointCreateStreamsByDefault(t *testing.T) {
	f := newFake(t)
	srv := httptest.NewServer(f.server())
	defer srv.Close()
	for _, c := range []struct {
		accept, contentType string
		status              int
	}{
		{"", ndjson, 200},
		{ndjson, ndjson, 200},
		{"application/json", "application/json", 202},
	} {
		resp := request(t, srv, "POST", "/v1/sandboxes/web/checkpoint", c.accept)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.contentType {
			t.Errorf("Accept %q: %d %s %s, want %d %s", c.accept, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.status, c.contentType)
		}
		if c.status == 200 && !strings.Contains(string(body), `"type":"complete"`) {
			t.Errorf("Accept %q: stream %s ends without complete", c.accept, body)
		}
	}
}

// An attached exec upgrades the connection to cairn-exec, names the pid,
// and pipes bytes both ways between the client and the Processes' stream
// until the stream ends; an exec the role refuses is answered in the error
// shape, not upgraded.
func TestAttachedExecUpgradesAndPipes(t *testing.T) {
	f := newFake(t)
	srv := httptest.NewServer(f.server())
	defer srv.Close()
	exec := func(clientSends string) (*bufio.Reader, net.Conn) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		body := `{"command":["sh"],"stdin":true}`
		fmt.Fprintf(conn, "POST /v1/sandboxes/web/exec HTTP/1.1\r\nHost: cairn\r\nUpgrade: %s\r\nConnection: Upgrade\r\nContent-Length: %d\r\n\r\n%s%s",
			ExecUpgrade, len(body), body, clientSends)
		return bufio.NewReader(conn), conn
	}

	var frames bytes.Buffer
	api.WriteFrame(&frames, api.FrameStdout, []byte("from the sandbox"))
	api.WriteFrame(&frames, api.FrameStderr, bytes.Repeat([]byte("e"), 70<<10)) // past the copy's buffer
	api.WriteFrame(&frames, api.FrameExit, []byte(`{"code":0}`))
	f.stream = newFakeStream(frames.String(), "frames from the client")
	br, conn := exec("frames from the client")
	defer conn.Close()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != ExecUpgrade || resp.Header.Get("Cairn-Exec-Pid") != "42" {
		t.Fatalf("exec: %d %v", resp.StatusCode, resp.Header)
	}
	out, err := io.ReadAll(br)
	if err != nil || !bytes.Equal(out, frames.Bytes()) {
		t.Fatalf("client read %.100q, %v; want the sandbox's frames as sent", out, err)
	}
	if got := f.stream.input(); got != "frames from the client" {
		t.Fatalf("sandbox read %q", got)
	}
	for deadline := time.Now().Add(5 * time.Second); !f.stream.isClosed(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // closed as the handler returns, after the client's EOF
			t.Fatal("the stream was not closed")
		}
	}
	checkCalls(t, "attached exec", f.takeCalls(), &call{"Exec", def, []any{"web", api.ExecRequest{Command: []string{"sh"}, Stdin: true}}}, "")

	f.err = errdefs.New(api.CodeNotRunning, "sandbox web is not running")
	br, conn = exec("")
	defer conn.Close()
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	var eb api.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil || resp.StatusCode != http.StatusConflict || eb.Error.Code != api.CodeNotRunning {
		t.Fatalf("refused exec: %d %+v %v", resp.StatusCode, eb, err)
	}
}

// An attach to a background process upgrades to cairn-exec, names the
// pid and the offset the output starts at, pipes the process's frames to
// the client and the client's frames to the process but for Hangup
// frames (a client cannot hang a background process up); an attach the
// role refuses is answered in the error shape.
func TestProcessAttachUpgradesAndPipes(t *testing.T) {
	f := newFake(t)
	srv := httptest.NewServer(f.server())
	defer srv.Close()
	attach := func(clientSends []byte) (*bufio.Reader, net.Conn) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		body := `{"offset":5}`
		fmt.Fprintf(conn, "POST /v1/sandboxes/web/processes/42/attach HTTP/1.1\r\nHost: cairn\r\nUpgrade: %s\r\nConnection: Upgrade\r\nContent-Length: %d\r\n\r\n%s%s",
			ExecUpgrade, len(body), body, clientSends)
		return bufio.NewReader(conn), conn
	}
	var frames, in, wantIn bytes.Buffer
	api.WriteFrame(&frames, api.FrameDropped, []byte(`{"offset":9}`))
	api.WriteFrame(&frames, api.FrameStdout, []byte("output"))
	api.WriteFrame(&frames, api.FrameExit, []byte(`{"code":143,"signal":"SIGTERM"}`))
	api.WriteFrame(&in, api.FrameHangup, nil)
	api.WriteFrame(&in, api.FrameStdin, []byte("typed"))
	api.WriteFrame(&wantIn, api.FrameStdin, []byte("typed"))
	f.stream = newFakeStream(frames.String(), wantIn.String())
	br, conn := attach(in.Bytes())
	defer conn.Close()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Cairn-Exec-Pid") != "42" || resp.Header.Get("Cairn-Output-Offset") != "0" {
		t.Fatalf("attach: %d %v", resp.StatusCode, resp.Header)
	}
	out, err := io.ReadAll(br)
	if err != nil || !bytes.Equal(out, frames.Bytes()) {
		t.Fatalf("client read %.100q, %v; want the process's frames as sent", out, err)
	}
	if got := f.stream.input(); got != wantIn.String() {
		t.Fatalf("process read %q, want the Stdin frame alone", got)
	}
	checkCalls(t, "attach", f.takeCalls(), &call{"AttachProcess", def, []any{"web", 42, int64(5)}}, "")

	f.err = errdefs.New(api.CodeNoProcess, "no process 42")
	br, conn = attach(nil)
	defer conn.Close()
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	var eb api.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil || resp.StatusCode != http.StatusNotFound || eb.Error.Code != api.CodeNoProcess {
		t.Fatalf("refused attach: %d %+v %v", resp.StatusCode, eb, err)
	}
}
