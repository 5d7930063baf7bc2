// Package agenttest gives tests of cairnd's agent connection and of
// cairn-init the agent key of a test socket: the key file a Host listening
// there reads, and the key a cairn-init dialling it proves itself with.
package agenttest

import (
	"sync"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// Each test socket has an agent key, made on first use.
var keys = struct {
	sync.Mutex
	m map[string]agentauth.Key
}{m: map[string]agentauth.Key{}}

// KeyFile returns the key file of the Host listening on sock.
func KeyFile(t testing.TB, sock string) string {
	t.Helper()
	Key(t, sock)
	return sock + ".key"
}

// Key returns the key a cairn-init dialling sock proves itself with.
func Key(t testing.TB, sock string) agentauth.Key {
	t.Helper()
	keys.Lock()
	defer keys.Unlock()
	if k, ok := keys.m[sock]; ok {
		return k
	}
	k, err := agent.NewKeyFile(sock + ".key")
	if err != nil {
		t.Fatal(err)
	}
	keys.m[sock] = k
	return k
}
