package agent_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// keyFileContent is the key file as docs/exec-protocol.md describes it.
type keyFileContent struct {
	Version   int    `json:"version"`
	Key       string `json:"key"`
	Next      string `json:"next,omitempty"`
	Inherited bool   `json:"inherited,omitempty"`
}

func readKeyFile(t *testing.T, path string) keyFileContent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c keyFileContent
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func writeKeyFile(t *testing.T, path string, c keyFileContent) {
	t.Helper()
	b, _ := json.Marshal(c)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// dialWith dials sock and answers the handshake with key, as an impostor
// or a second copy would; it returns the connection and the verdict.
func dialWith(t *testing.T, sock string, key agentauth.Key) (net.Conn, error) {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	return conn, agentauth.Answer(conn, key)
}

func refusedFor(err error, reason string) bool {
	var re *agentauth.RefusedError
	return errors.As(err, &re) && re.Reason == reason
}

// A connection whose proof is made with another key, or that sends
// something else than a proof, is refused and never becomes the agent.
func TestHandshakeRefusesBadOrNoProof(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)

	if _, err := dialWith(t, sock, agentauth.NewKey()); !refusedFor(err, agentauth.ReasonBadProof) {
		t.Errorf("wrong key: %v, want refused (bad proof)", err)
	}
	for _, garbage := range []string{"hello\n", "proof 1234\n", "proof " + keyOf(t, sock).String() + "\n", "\n"} {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := agentauth.ReadLine(conn); err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte(garbage))
		line, err := agentauth.ReadLine(conn)
		if err != nil || !refusedFor(agentauth.ParseVerdict(line), agentauth.ReasonBadProof) {
			t.Errorf("after %q: %q, %v", garbage, line, err)
		}
		if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("after %q the connection stays open: %v", garbage, err)
		}
		conn.Close()
	}
	// Yamux straight away, as an agent from before the handshake would.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, _ := yamux.Server(conn, nil)
	defer sess.Close()
	time.Sleep(100 * time.Millisecond)
	if h.Connected() {
		t.Fatal("a connection without a valid proof became the agent")
	}
	// Silence: the handshake's deadline ends it.
	silent, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	_ = silent.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(silent); err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("a silent connection was closed after %s (%v)", time.Since(start), err)
	}
	if h.Connected() {
		t.Fatal("connected")
	}
	// The real agent still gets in.
	startInit(t, sock)
	echo(t, h)
}

// A second connection with a valid proof is refused while the connected
// agent answers, and the agent keeps working.
func TestHandshakeRefusesSecondAgentWhileFirstAnswers(t *testing.T) {
	sock := socketPath(t)
	h := listen(t, sock)
	startInit(t, sock)
	echo(t, h)
	before, err := h.Ping(timeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialWith(t, sock, keyOf(t, sock)); !refusedFor(err, agentauth.ReasonConnected) {
		t.Fatalf("second agent: %v, want refused (another agent is connected)", err)
	}
	echo(t, h)
	if after, err := h.Ping(timeout(t, 5*time.Second)); err != nil || after != before {
		t.Errorf("after the refusal: %+v, %v", after, err)
	}
}

// A connection with a valid proof replaces one that no longer answers
// (as after a memory checkpoint, which breaks it silently).
func TestHandshakeReplacesDeadAgent(t *testing.T) {
	sock := socketPath(t)
	h, err := agent.ListenConfig{KeyFile: keyFile(t, sock), PingTimeout: 200 * time.Millisecond}.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	// An agent that proves itself and then never answers a stream.
	conn, err := dialWith(t, sock, keyOf(t, sock))
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Time{})
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive, cfg.LogOutput = false, io.Discard
	dead, err := yamux.Server(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	for !h.Connected() {
		time.Sleep(10 * time.Millisecond)
	}
	startInit(t, sock)
	select {
	case <-dead.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection that does not answer was not replaced")
	}
	echo(t, h)
}

// Past maxHandshakes connections in their handshake, new ones are closed
// at once, without a challenge.
func TestHandshakeCapsConnectionsInHandshake(t *testing.T) {
	sock := socketPath(t)
	listen(t, sock)
	for range 8 {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := agentauth.ReadLine(conn); err != nil { // its challenge: it is in its handshake
			t.Fatal(err)
		}
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if b, err := io.ReadAll(conn); err != nil || len(b) != 0 {
		t.Errorf("ninth connection: %q, %v; want closed at once", b, err)
	}
}

// A cairn-init resumed from a memory image proves itself with the
// image's key and is re-keyed: the key file then holds a key of its own,
// which its next connection uses, and the image's key is refused.
func TestRekeyAfterResume(t *testing.T) {
	// The "image": the keys of another sandbox's Host.
	parentSock := socketPath(t)
	parent := listen(t, parentSock)
	image := t.TempDir()
	if err := parent.SaveKeys(image); err != nil {
		t.Fatal(err)
	}
	imageKey := keyOf(t, parentSock)
	if fi, err := os.Stat(filepath.Join(image, agent.ImageKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("image key file: %v, %v", fi, err)
	}

	sock := socketPath(t)
	kf := sock + ".key"
	if err := agent.InheritKeyFile(image, kf); err != nil {
		t.Fatal(err)
	}
	if c := readKeyFile(t, kf); c.Key != imageKey.String() || !c.Inherited {
		t.Fatalf("inherited key file: %+v", c)
	}
	h, err := agent.Listen(sock, kf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	startInitWith(t, initd.Config{SocketPath: sock, Key: imageKey})
	echo(t, h)
	c := readKeyFile(t, kf)
	if c.Key == imageKey.String() || c.Next != "" || c.Inherited {
		t.Fatalf("after the first connection the key file is %+v; want a new key alone", c)
	}
	if fi, _ := os.Stat(kf); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", fi.Mode())
	}
	newKey, err := agentauth.ParseKey([]byte(c.Key))
	if err != nil {
		t.Fatal(err)
	}

	// cairnd restarts: cairn-init proves itself with its new key.
	h.Close()
	h, err = agent.Listen(sock, kf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	echo(t, h)
	if got := readKeyFile(t, kf); got != c {
		t.Errorf("a connection with the current key changed the key file: %+v, was %+v", got, c)
	}
	// Neither the image's key nor anything else is accepted any more;
	// the new one would be, if the agent did not answer.
	h.Close()
	h2, err := agent.ListenConfig{KeyFile: kf}.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h2.Close() })
	echo(t, h2)
	if _, err := dialWith(t, sock, imageKey); !refusedFor(err, agentauth.ReasonBadProof) {
		t.Errorf("the image's key after the re-key: %v, want refused (bad proof)", err)
	}
	if _, err := dialWith(t, sock, newKey); !refusedFor(err, agentauth.ReasonConnected) {
		t.Errorf("the new key while the agent answers: %v, want refused (connected)", err)
	}
}

// A crash between recording a new key and cairn-init's ack leaves both
// in the key file: whichever cairn-init holds is accepted, and it ends up
// with one key it alone holds.
func TestRekeyCrashBetweenRecordAndAck(t *testing.T) {
	old, next := agentauth.NewKey(), agentauth.NewKey()
	for _, tc := range []struct {
		name string
		held agentauth.Key // what cairn-init holds: the ack was lost, or the op
	}{{"reached cairn-init", next}, {"never reached it", old}} {
		t.Run(tc.name, func(t *testing.T) {
			sock := socketPath(t)
			kf := sock + ".key"
			writeKeyFile(t, kf, keyFileContent{Version: 1, Key: old.String(), Next: next.String()})
			h, err := agent.Listen(sock, kf)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			startInitWith(t, initd.Config{SocketPath: sock, Key: tc.held})
			echo(t, h)
			c := readKeyFile(t, kf)
			if c.Next != "" || c.Inherited {
				t.Fatalf("key file after the connection: %+v; want one key", c)
			}
			if tc.held == next && c.Key != next.String() {
				t.Errorf("the key cairn-init acknowledged was not kept: %+v", c)
			}
			if tc.held == old && (c.Key == old.String() || c.Key == next.String()) {
				t.Errorf("cairn-init with the old key was not re-keyed: %+v", c)
			}
		})
	}
}

// A Host whose key file is missing (a sandbox from before agents proved
// themselves) refuses every connection.
func TestNoKeyFileRefusesAll(t *testing.T) {
	sock := socketPath(t)
	h, err := agent.Listen(sock, filepath.Join(t.TempDir(), "none.key"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v, %v; want 0600", fi, err)
	}
	if _, err := dialWith(t, sock, agentauth.Key{}); !refusedFor(err, agentauth.ReasonBadProof) {
		t.Errorf("zero key: %v", err)
	}
	if h.Connected() {
		t.Error("connected")
	}
	if _, err := h.Ping(timeout(t, 100*time.Millisecond)); err == nil {
		t.Error("ping answered")
	}
}
