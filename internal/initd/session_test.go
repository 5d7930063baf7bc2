package initd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// proxy stands between cairn-init and the Host: it forwards each
// connection cairn-init makes to the Host's socket, and breaks them on
// demand, as a memory checkpoint does.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	pairs   []*pair
	refuse  bool // close new connections at once
	count   int  // connections forwarded so far
	changed chan struct{}
}

// pair is one forwarded connection.
type pair struct {
	in, out net.Conn    // from cairn-init; to the Host
	drop    atomic.Bool // discard what cairn-init sends
	broken  atomic.Bool // closed by breakConns: do not pass the close on
}

func startProxy(t *testing.T, path, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, changed: make(chan struct{})}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.breakConns(true, 0)
	})
	return p
}

func (p *proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			in.Close()
			continue
		}
		out, err := net.Dial("unix", p.target)
		if err != nil {
			in.Close()
			continue
		}
		c := &pair{in: in, out: out}
		p.mu.Lock()
		p.pairs = append(p.pairs, c)
		p.count++
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		go func() { // cairn-init → Host
			buf := make([]byte, 32<<10)
			for {
				n, err := in.Read(buf)
				if n > 0 && !c.drop.Load() {
					if _, err := out.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			if !c.broken.Load() {
				out.Close()
			}
		}()
		go func() { // Host → cairn-init
			_, _ = io.Copy(in, out)
			if !c.broken.Load() {
				in.Close()
			}
		}()
	}
}

// breakConns breaks every connection: what cairn-init sends is lost from
// now on, and after lose it is closed, on the Host's side too if both.
// Otherwise the Host's side stays open, as in the parent of a memory
// checkpoint, until cairn-init's next connection replaces it.
func (p *proxy) breakConns(both bool, lose time.Duration) {
	p.mu.Lock()
	pairs := p.pairs
	p.pairs = nil
	p.mu.Unlock()
	for _, c := range pairs {
		c.drop.Store(true)
	}
	time.Sleep(lose)
	for _, c := range pairs {
		c.broken.Store(true)
		c.in.Close()
		if both {
			c.out.Close()
		}
	}
}

// setRefuse makes the proxy refuse new connections, or accept them again.
func (p *proxy) setRefuse(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
}

// waitConnections waits until n connections have been forwarded, then a
// little more, for the Host and the exec streams to take the new one.
func (p *proxy) waitConnections(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		p.mu.Lock()
		count, changed := p.count, p.changed
		p.mu.Unlock()
		if count >= n {
			time.Sleep(100 * time.Millisecond)
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("cairn-init made %d connections, want %d", count, n)
		}
	}
}

// startProxied runs cairn-init with cfg and a Host with lc, connected
// through a proxy.
func startProxied(t *testing.T, cfg initd.Config, lc agent.ListenConfig) (*agent.Host, *proxy) {
	t.Helper()
	dir := filepath.Dir(socketPath(t))
	hostSock, initSock := filepath.Join(dir, "host.sock"), filepath.Join(dir, "init.sock")
	if lc.Log == nil {
		lc.Log = slog.New(slog.NewTextHandler(t.Output(), nil)).With("component", "cairnd")
	}
	lc.KeyFile = keyFile(t, hostSock)
	// A connection the proxy broke stays open on the Host's side and
	// never answers: the Host gives up on it after this.
	lc.PingTimeout = 50 * time.Millisecond
	h, err := lc.Listen(hostSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	p := startProxy(t, initSock, hostSock)
	cfg.SocketPath = initSock
	cfg.Key = keyOf(t, hostSock)
	startInit(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return h, p
}

// bgReader reads an exec stream in the background until the Exit frame.
type bgReader struct {
	mu     sync.Mutex
	stdout bytes.Buffer
	done   chan struct{}
	exit   api.ExitStatus
	err    error
}

func readInBackground(st io.Reader) *bgReader {
	r := &bgReader{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			typ, payload, err := api.ReadFrame(st)
			if err != nil {
				r.err = err
				return
			}
			switch typ {
			case api.FrameStdout, api.FrameStderr:
				r.mu.Lock()
				r.stdout.Write(payload)
				r.mu.Unlock()
			case api.FrameExit:
				r.err = json.Unmarshal(payload, &r.exit)
				if _, _, err := api.ReadFrame(st); !errors.Is(err, io.EOF) && r.err == nil {
					r.err = fmt.Errorf("after the exit frame: %v, want EOF", err)
				}
				return
			}
		}
	}()
	return r
}

// waitFor waits until the output contains s.
func (r *bgReader) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		out := r.stdout.String()
		r.mu.Unlock()
		if strings.Contains(out, s) {
			return
		}
		select {
		case <-r.done:
			t.Fatalf("waiting for %q: stream ended (%v) with %q", s, r.err, out)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %q: got %q", s, out)
		}
	}
}

// waitLen waits until the output is at least n bytes.
func (r *bgReader) waitLen(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		have := r.stdout.Len()
		r.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-r.done:
			t.Fatalf("waiting for %d bytes: stream ended (%v) with %d", n, r.err, have)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %d bytes: got %d", n, have)
		}
	}
}

// wait waits for the end of the stream.
func (r *bgReader) wait(t *testing.T) (string, api.ExitStatus, error) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("exec stream did not end")
	}
	return r.stdout.String(), r.exit, r.err
}

func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintln(&b, i)
	}
	return b.String()
}

// A client streaming output across broken connections gets every line
// once, in order, and the exit code: what cairn-init sent into the broken
// connection is sent again from its buffer.
func TestExecSurvivesBrokenConnections(t *testing.T) {
	h, p := startProxied(t, initd.Config{}, agent.ListenConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c",
		`i=1; while [ $i -le 200 ]; do echo $i; i=$((i+1)); sleep 0.01; done; exit 7`}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := readInBackground(st)
	r.waitFor(t, "\n10\n")
	for i := range 6 {
		// Both ends close, or only cairn-init's: cairnd's side stays open
		// (as in the parent of a memory checkpoint) until cairn-init's next
		// connection replaces it. Either way 50 ms of output are lost in
		// the connection.
		p.breakConns(i%2 == 0, 50*time.Millisecond)
		p.waitConnections(t, i+2)
		time.Sleep(50 * time.Millisecond)
	}
	out, exit, err := r.wait(t)
	if err != nil || out != numbered(1, 200) || exit != (api.ExitStatus{Code: 7}) {
		t.Errorf("got %q, %+v, %v; want 1..200 and code 7", out, exit, err)
	}
}

// Stdin frames flow on across re-attachments; none is doubled.
func TestExecStdinAcrossBrokenConnections(t *testing.T) {
	h, p := startProxied(t, initd.Config{}, agent.ListenConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := readInBackground(st)
	var want strings.Builder
	for i := 1; i <= 6; i++ {
		line := fmt.Sprintf("line %d\n", i)
		send(t, st, api.FrameStdin, []byte(line))
		want.WriteString(line)
		r.waitFor(t, line)
		if i%2 == 0 {
			p.breakConns(i%4 == 0, 0)
			p.waitConnections(t, i/2+1)
		}
	}
	send(t, st, api.FrameStdinClose, nil)
	out, exit, err := r.wait(t)
	if err != nil || out != want.String() || exit.Code != 0 {
		t.Errorf("got %q, %+v, %v; want %q", out, exit, err, want.String())
	}
}

// A client that goes away after a re-attachment still hangs the command
// up at once, not after the grace.
func TestExecClientGoneAfterReattachHangsUp(t *testing.T) {
	h, p := startProxied(t, initd.Config{}, agent.ListenConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pid, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	r := readInBackground(st)
	r.waitFor(t, "ready")
	p.breakConns(false, 0)
	p.waitConnections(t, 2)
	start := time.Now()
	st.Close()
	_, exit, err := r.wait(t)
	if err != nil || exit != (api.ExitStatus{Code: 129, Signal: "SIGHUP"}) {
		t.Errorf("after closing: %+v, %v", exit, err)
	}
	waitGone(t, pid)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("hung up after %s", d)
	}
}

// A session nobody re-attaches within the grace is hung up; a late
// re-attachment then finds it gone.
func TestExecNotReattachedIsHungUp(t *testing.T) {
	const grace = 300 * time.Millisecond
	h, p := startProxied(t, initd.Config{ExecGrace: grace}, agent.ListenConfig{ReattachWait: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pid, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c", "echo ready; exec sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := readInBackground(st)
	r.waitFor(t, "ready")
	p.setRefuse(true)
	start := time.Now()
	p.breakConns(true, 0)
	time.Sleep(grace / 2)
	if s := procState(t, pid); s != "S" {
		t.Fatalf("state %q during the grace, want S", s)
	}
	waitGone(t, pid)
	if d := time.Since(start); d < grace {
		t.Errorf("hung up after %s, before the grace of %s", d, grace)
	}
	p.setRefuse(false)
	_, _, err = r.wait(t)
	if !errors.Is(err, agent.ErrSessionLost) || !errdefs.Is(err, api.CodeAgentUnreachable) ||
		!strings.Contains(err.Error(), "no exec session") {
		t.Errorf("late re-attachment: %v", err)
	}
}

// With nobody reading, the command blocks on its output once the buffer
// is full: memory stays bounded and nothing is lost, across broken
// connections too.
func TestExecBackpressure(t *testing.T) {
	h, p := startProxied(t, initd.Config{ExecBuffer: 64 << 10}, agent.ListenConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const zeros = 16 << 20
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	pid, st, err := h.Exec(ctx, api.ExecRequest{Command: []string{"sh", "-c",
		fmt.Sprintf("head -c %d /dev/zero; seq 1 50000", zeros)}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	time.Sleep(500 * time.Millisecond)
	if s := procState(t, pid); s != "S" {
		t.Errorf("state %q with nobody reading, want S (blocked)", s)
	}
	if grown := int64(heap()) - int64(before); grown > 8<<20 {
		t.Errorf("heap grew by %d bytes with nobody reading", grown)
	}
	r := readInBackground(st)
	r.waitLen(t, 4<<20)
	p.breakConns(false, 20*time.Millisecond)
	p.waitConnections(t, 2)
	r.waitLen(t, 8<<20)
	p.breakConns(true, 20*time.Millisecond)
	out, exit, err := r.wait(t)
	if err != nil || exit.Code != 0 {
		t.Fatalf("exit %+v, %v", exit, err)
	}
	want := string(make([]byte, zeros)) + numbered(1, 50000)
	if out != want {
		i := 0
		for i < min(len(out), len(want)) && out[i] == want[i] {
			i++
		}
		t.Errorf("got %d bytes, want %d; first difference at %d", len(out), len(want), i)
	}
}

// The attach and ack ops as cairnd uses them, on a raw connection that is
// closed abruptly and dialled again.
func TestAttachProtocol(t *testing.T) {
	sock := socketPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	startInit(t, initd.Config{SocketPath: sock, ExecBuffer: 1 << 20})
	accept := func() *yamux.Session {
		t.Helper()
		conn := acceptProven(t, ln, keyOf(t, sock))
		sess, err := yamux.Client(conn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		return sess
	}
	// request opens a stream, sends req and reads the reply into reply.
	request := func(sess *yamux.Session, req api.AgentRequest, reply any) *yamux.Stream {
		t.Helper()
		st, err := sess.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		_ = st.SetDeadline(time.Now().Add(10 * time.Second))
		if err := api.WriteMessage(st, req); err != nil {
			t.Fatal(err)
		}
		if err := api.ReadMessage(st, reply); err != nil {
			t.Fatal(err)
		}
		return st
	}
	attach := func(sess *yamux.Session, id string, off int64) (*yamux.Stream, api.ExecStarted, api.AgentResult) {
		t.Helper()
		var raw json.RawMessage
		st := request(sess, api.AgentRequest{Op: api.AgentOpAttach, Session: &api.SessionOffset{ID: id, Offset: off}}, &raw)
		var started api.ExecStarted
		var res api.AgentResult
		_ = json.Unmarshal(raw, &started)
		_ = json.Unmarshal(raw, &res)
		return st, started, res
	}

	sess := accept()
	var started api.ExecStarted
	st := request(sess, api.AgentRequest{Op: api.AgentOpExec, Exec: &api.ExecRequest{
		Command: []string{"sh", "-c", "echo ready; read x; echo got $x; exit 3"}, Stdin: true}}, &started)
	if len(started.Session) != 32 || started.Buffer != 1<<20 || started.PID == 0 {
		t.Fatalf("exec reply: %+v", started)
	}
	id := started.Session
	readUntil(t, st, "ready\n")
	const afterReady = int64(5 + len("ready\n"))

	// The connection breaks; cairn-init dials again.
	sess.Close()
	sess = accept()

	for _, tc := range []struct {
		id   string
		off  int64
		code string
	}{{"0123456789abcdef0123456789abcdef", 0, api.AgentErrNotFound}, {id, 1000, api.AgentErrInvalid}, {id, -1, api.AgentErrInvalid}} {
		if _, _, res := attach(sess, tc.id, tc.off); res.Code != tc.code || res.Error == "" {
			t.Errorf("attach %s at %d: %+v, want code %s", tc.id, tc.off, res, tc.code)
		}
	}

	// From 0, the output is sent again.
	st2, again, res := attach(sess, id, 0)
	if res.Error != "" || again.PID != started.PID || again.Session != id {
		t.Fatalf("attach: %+v, %+v", again, res)
	}
	if typ, payload, err := api.ReadFrame(st2); typ != api.FrameStdout || string(payload) != "ready\n" || err != nil {
		t.Fatalf("replayed frame: %d %q %v", typ, payload, err)
	}
	// Acknowledged output is gone.
	var ack api.AgentResult
	request(sess, api.AgentRequest{Op: api.AgentOpAck, Session: &api.SessionOffset{ID: id, Offset: afterReady}}, &ack).Close()
	if !ack.OK {
		t.Fatalf("ack: %+v", ack)
	}
	if _, _, res := attach(sess, id, 0); res.Code != api.AgentErrInvalid {
		t.Errorf("attach at 0 after the ack: %+v", res)
	}

	// A new stream replaces the last one; stdin goes on.
	st3, _, res := attach(sess, id, afterReady)
	if res.Error != "" {
		t.Fatal(res.Error)
	}
	send(t, st3, api.FrameStdin, []byte("hi\n"))
	if r := collect(t, st3); r.stdout != "got hi\n" || r.exit.Code != 3 {
		t.Errorf("after re-attaching: %+v", r)
	}
	st3.Close()
	st2.Close()
	// cairnd ended the delivered session: it is gone.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, res := attach(sess, id, 0)
		if res.Code == api.AgentErrNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still there after its end: %+v", res)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
