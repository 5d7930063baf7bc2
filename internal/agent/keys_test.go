package agent_test

import (
	"testing"

	"github.com/cairn-sandbox/cairn/internal/agent/agenttest"
	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// keyFile and keyOf give a test socket its agent key (package agenttest).
func keyFile(t *testing.T, sock string) string { return agenttest.KeyFile(t, sock) }

func keyOf(t *testing.T, sock string) agentauth.Key { return agenttest.Key(t, sock) }
