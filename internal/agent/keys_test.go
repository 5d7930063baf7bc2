package agent_test

import (
	"sync"
	"testing"

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
