package initd_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
	"github.com/cairn-sandbox/cairn/internal/initd"
)

// proofOf accepts a connection on ln, challenges it and returns its proof
// line and the nonce; the connection is left for the caller.
func proofOf(t *testing.T, ln net.Listener) (net.Conn, agentauth.Nonce, []byte) {
	t.Helper()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	nonce := agentauth.NewNonce()
	if _, err := conn.Write(agentauth.ChallengeLine(nonce)); err != nil {
		t.Fatal(err)
	}
	line, err := agentauth.ReadLine(conn)
	if err != nil {
		t.Fatal(err)
	}
	return conn, nonce, line
}

// cairn-init answers the challenge with a proof of its key (never the key
// itself), dials again after a refusal, and proves itself with the key
// cairnd gives it with the op rekey from then on.
func TestHandshakeAndRekey(t *testing.T) {
	sock := socketPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	key := agentauth.NewKey()
	startInit(t, initd.Config{SocketPath: sock, Key: key})

	conn, nonce, line := proofOf(t, ln)
	if strings.Contains(string(line), key.String()) {
		t.Fatalf("cairn-init sent its key: %q", line)
	}
	proof, err := agentauth.ParseProof(line)
	if err != nil || agentauth.Verify([]agentauth.Key{key}, nonce, proof) != 0 {
		t.Fatalf("proof %q: %v", line, err)
	}
	// Refused: cairn-init closes and dials again, with a fresh challenge.
	conn.Write(agentauth.VerdictLine(agentauth.ReasonConnected))
	conn.Close()
	conn, nonce2, line := proofOf(t, ln)
	if proof2, err := agentauth.ParseProof(line); err != nil || nonce2 == nonce || agentauth.Verify([]agentauth.Key{key}, nonce2, proof2) != 0 {
		t.Fatalf("second proof %q: %v", line, err)
	}
	conn.Write(agentauth.VerdictLine(""))
	_ = conn.SetDeadline(time.Time{})
	sess, err := yamux.Client(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := exchange(t, sess, `{"op":"rekey","key":"xyz"}`+"\n"); !strings.HasPrefix(got, "rekey: ") {
		t.Errorf("rekey with a bad key: %q", got)
	}
	next := agentauth.NewKey()
	if got := exchange(t, sess, `{"op":"rekey","key":"`+next.String()+`"}`+"\n"); got != "" {
		t.Fatalf("rekey: %q", got)
	}
	sess.Close()

	conn, nonce, line = proofOf(t, ln)
	defer conn.Close()
	proof, err = agentauth.ParseProof(line)
	if err != nil || agentauth.Verify([]agentauth.Key{key, next}, nonce, proof) != 1 {
		t.Fatalf("after the re-key the proof %q is not of the new key (%v)", line, err)
	}
}

// A host that does not speak the handshake gets nothing from cairn-init:
// it waits for a challenge and sends nothing else.
func TestNoYamuxWithoutVerdict(t *testing.T) {
	sock := socketPath(t)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	startInit(t, initd.Config{SocketPath: sock, Key: agentauth.NewKey()})
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sess, err := yamux.Client(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	st, err := sess.OpenStream()
	if err == nil {
		_ = st.SetDeadline(time.Now().Add(time.Second))
		api.WriteMessage(st, api.AgentRequest{Op: api.AgentOpPing})
		var info api.AgentInfo
		if err := api.ReadMessage(st, &info); err == nil {
			t.Fatalf("cairn-init answered a ping without a handshake: %+v", info)
		}
	}
}
