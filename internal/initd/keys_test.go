package initd_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// Each test socket has an agent key, made on first use: its key file for
// the Host listening there, its key for the cairn-init dialling it.
var testKeys = struct {
	sync.Mutex
	m map[string]agentauth.Key
}{m: map[string]agentauth.Key{}}

// keyFile returns the key file of the Host listening on sock.
func keyFile(t *testing.T, sock string) string {
	t.Helper()
	keyOf(t, sock)
	return sock + ".key"
}

// keyOf returns the key a cairn-init dialling sock proves itself with.
func keyOf(t *testing.T, sock string) agentauth.Key {
	t.Helper()
	testKeys.Lock()
	defer testKeys.Unlock()
	if k, ok := testKeys.m[sock]; ok {
		return k
	}
	k, err := agent.NewKeyFile(sock + ".key")
	if err != nil {
		t.Fatal(err)
	}
	testKeys.m[sock] = k
	return k
}

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
