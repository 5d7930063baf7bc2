package sandbox

import (
	_ "embed"
)

// llmText is /.cairn/llm.txt: the reference for agents working inside.
//
//go:embed llm.txt
var llmText []byte

// close closes the instance's host sockets. Requests in flight on the
// management socket (a restore asked from inside) run on in cairnd.
func (inst *instance) close() {
	if inst.unwatch != nil {
		inst.unwatch()
	}
	inst.agent.Close()
	if inst.api != nil {
		inst.api.Close()
	}
}
