package initd_test

import (
	"net"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/agent/agenttest"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// keyFile and keyOf give a test socket its agent key (package agenttest).
func keyFile(t *testing.T, sock string) string { return agenttest.KeyFile(t, sock) }

func keyOf(t *testing.T, sock string) agentauth.Key { return agenttest.Key(t, sock) }

// acceptProven accepts a connection on ln and runs cairnd's side of the
// handshake on it by hand, for tests that speak to cairn-init without
// package agent.
func acceptProven(t *testing.T, ln net.Listener, key agentauth.Key) net.Conn {
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
	proof, err := agentauth.ParseProof(line)
	if err != nil || agentauth.Verify([]agentauth.Key{key}, nonce, proof) != 0 {
		t.Fatalf("cairn-init's proof %q: %v", line, err)
	}
	if _, err := conn.Write(agentauth.VerdictLine("")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn
}
