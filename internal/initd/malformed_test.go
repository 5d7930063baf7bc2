package initd_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// rawHost accepts cairn-init's connection without package agent, to send
// what agent never would.
func rawHost(t *testing.T) *yamux.Session {
	t.Helper()
	sock := socketPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	startInit(t, initd.Config{SocketPath: sock})
	conn := acceptProven(t, ln, keyOf(t, sock))
	sess, err := yamux.Client(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// exchange opens a stream, writes raw, and returns the reply line.
func exchange(t *testing.T, sess *yamux.Session, raw string) string {
	t.Helper()
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_ = st.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := st.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	var res api.AgentResult
	if err := api.ReadMessage(st, &res); err != nil {
		t.Fatalf("%.40q: %v", raw, err)
	}
	return res.Error
}

func TestMalformedRequests(t *testing.T) {
	sess := rawHost(t)
	for _, tc := range []struct{ raw, want string }{
		{"not json\n", "bad request header: decode agent message: invalid character"},
		{"[1,2]\n", "bad request header: decode agent message: json: cannot unmarshal"},
		{strings.Repeat("x", api.MaxMessage+10), "bad request header: agent message too large"},
		{`{"op":"nope"}` + "\n", `unknown op "nope"`},
		{`{}` + "\n", `unknown op ""`},
		{`{"op":"exec"}` + "\n", "exec: no exec request"},
		{`{"op":"exec","exec":{"command":[]}}` + "\n", "exec: no command"},
		{`{"op":"exec","exec":{"command":"ls"}}` + "\n", "bad request header: decode agent message: json: cannot unmarshal"},
		{`{"op":"logs"}` + "\n", "logs: no logs request"},
		{`{"op":"logs","logs":{"service":"../x"}}` + "\n", `invalid service name "../x"`},
		{`{"op":"logs","logs":{"service":""}}` + "\n", `invalid service name ""`},
		{`{"op":"logs","logs":{"service":"x","tail_bytes":-1}}` + "\n", `no service "x"`},
		{`{"op":"logs","logs":{"service":"x","tail_bytes":"a"}}` + "\n", "bad request header: decode agent message: json: cannot unmarshal"},
	} {
		if got := exchange(t, sess, tc.raw); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%.40q: error %q, want %q…", tc.raw, got, tc.want)
		}
	}

	// A stream closed before its header, and bad frames on an exec stream.
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	req := api.AgentRequest{Op: api.AgentOpExec, Exec: &api.ExecRequest{Command: []string{"cat"}, Stdin: true}}
	if err := api.WriteMessage(st, req); err != nil {
		t.Fatal(err)
	}
	var started api.ExecStarted
	if err := api.ReadMessage(st, &started); err != nil || started.PID == 0 {
		t.Fatalf("exec: %+v, %v", started, err)
	}
	for _, f := range []struct {
		t api.FrameType
		p string
	}{{api.FrameResize, "{"}, {api.FrameSignal, ""}, {api.FrameSignal, "\xff\xff"}, {99, "x"}, {api.FrameStdin, "ok\n"}} {
		if err := api.WriteFrame(st, f.t, []byte(f.p)); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.SetReadDeadline(time.Now().Add(5 * time.Second))
	readUntil(t, st, "ok\n")
	// A frame too large is a broken stream: the session hangs up.
	if _, err := st.Write([]byte{byte(api.FrameStdin), 0xff, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, st); r.exit != (api.ExitStatus{Code: 129, Signal: "SIGHUP"}) {
		t.Errorf("after a bad frame: %+v", r)
	}
	st.Close()

	// cairn-init still answers.
	if got := exchange(t, sess, `{"op":"sync"}`+"\n"); got != "" {
		t.Errorf("sync after malformed requests: %q", got)
	}
}
