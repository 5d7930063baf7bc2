package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Ops a stream from cairnd to cairn-init can ask for: the Op of its
// AgentRequest header. See docs/exec-protocol.md.
const (
	AgentOpPing     = "ping"     // reply: AgentInfo
	AgentOpExec     = "exec"     // reply: ExecStarted, then exec frames unless detached
	AgentOpSync     = "sync"     // reply: AgentResult; file systems are synced
	AgentOpShutdown = "shutdown" // reply: AgentResult once every process is gone; then cairn-init exits
)

// AgentRequest is the header line cairnd writes first on every stream it
// opens to cairn-init.
type AgentRequest struct {
	Op      string       `json:"op"`                 // one of the AgentOp… constants
	Exec    *ExecRequest `json:"exec,omitempty"`     // for AgentOpExec
	GraceMS int64        `json:"grace_ms,omitempty"` // for AgentOpShutdown: how long processes get between SIGTERM and SIGKILL
}

// AgentInfo answers a ping.
type AgentInfo struct {
	Version string `json:"version"` // cairn-init's build version
	PID     int    `json:"pid"`     // cairn-init's pid: 1 in a sandbox
	BootID  string `json:"boot_id"` // random hex chosen when cairn-init started (kept by a memory checkpoint)
}

// AgentResult is the reply of ops that return no data. A reply line of any
// op that carries a non-empty Error means the op failed.
type AgentResult struct {
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
}

// MaxMessage bounds one header or reply line, newline included.
const MaxMessage = 64 << 10

// ErrMessageTooLarge is returned by ReadMessage for a line over MaxMessage.
var ErrMessageTooLarge = errors.New("agent message too large")

// WriteMessage writes v as one line of JSON.
func WriteMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode agent message: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadMessage reads one line of JSON into v. It reads no byte past the
// newline, so exec frames that follow the line stay unread in r.
func ReadMessage(r io.Reader, v any) error {
	line := make([]byte, 0, 256)
	var c [1]byte
	for {
		if _, err := io.ReadFull(r, c[:]); err != nil {
			if len(line) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read agent message: %w", err)
		}
		if c[0] == '\n' {
			break
		}
		if len(line) >= MaxMessage-1 {
			return ErrMessageTooLarge
		}
		line = append(line, c[0])
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("decode agent message: %w", err)
	}
	return nil
}
