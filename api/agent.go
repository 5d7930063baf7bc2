package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Ops a stream from cairnd to cairn-init can ask for: the Op of its
// AgentRequest header. See docs/exec-protocol.md.
const (
	AgentOpPing     = "ping"     // reply: AgentInfo
	AgentOpExec     = "exec"     // reply: ExecStarted, then exec frames unless detached
	AgentOpAttach   = "attach"   // reply: ExecStarted; then the session's output from Session.Offset on, and exec frames
	AgentOpAck      = "ack"      // reply: AgentResult; the session's output before Session.Offset is freed
	AgentOpSync     = "sync"     // reply: AgentResult; file systems are synced
	AgentOpShutdown = "shutdown" // reply: AgentResult once every process is gone; then cairn-init exits
	AgentOpServices = "services" // reply: ServicesReply
	AgentOpLogs     = "logs"     // reply: LogsReply, then that many bytes of the service's log
	AgentOpHostname = "hostname" // reply: AgentResult once the hostname is Hostname
	AgentOpRekey    = "rekey"    // reply: AgentResult once cairn-init proves itself with Key from then on
	AgentOpEvents   = "events"   // reply: AgentResult; then one AgentEvent line per event as it happens
)

// AgentEvent is one line of the events op: something cairnd should know.
type AgentEvent struct {
	Kind    string   `json:"kind"`               // one of the AgentEvent… constants
	OOMKill *OOMKill `json:"oom_kill,omitempty"` // for AgentEventOOMKill
}

// Kinds of AgentEvent.
const (
	// AgentEventOOMKill: the guest ran out of memory and cairn-init killed
	// a process (the last kill is sent again on every new events stream).
	AgentEventOOMKill = "oom_kill"
	// AgentEventExiting: cairn-init ends by itself (SIGTERM from inside the
	// sandbox), so the sandbox will stop.
	AgentEventExiting = "exiting"
)

// OOMKill is a process cairn-init killed when the guest's memory ran out.
type OOMKill struct {
	PID        int       `json:"pid"`
	Command    string    `json:"command"` // its comm, as the guest reports it: untrusted
	RSSBytes   int64     `json:"rss_bytes"`
	UsedBytes  int64     `json:"used_bytes"`  // guest memory in use when it was killed
	LimitBytes int64     `json:"limit_bytes"` // the limit it reached
	At         time.Time `json:"at"`
}

// AgentRequest is the header line cairnd writes first on every stream it
// opens to cairn-init.
type AgentRequest struct {
	Op      string       `json:"op"`                 // one of the AgentOp… constants
	Exec    *ExecRequest `json:"exec,omitempty"`     // for AgentOpExec
	GraceMS int64        `json:"grace_ms,omitempty"` // for AgentOpShutdown: how long processes get between SIGTERM and SIGKILL
	Logs    *LogsRequest `json:"logs,omitempty"`     // for AgentOpLogs
	// Session names an attached exec session and an offset in its output,
	// for AgentOpAttach and AgentOpAck.
	Session *SessionOffset `json:"session,omitempty"`
	// Hostname is the new hostname, for AgentOpHostname (a sandbox resumed
	// from another's memory gets its own name).
	Hostname string `json:"hostname,omitempty"`
	// Key is cairn-init's new key, 64 hex digits, for AgentOpRekey.
	Key string `json:"key,omitempty"`
	// Files is the op on the sandbox's files, for AgentOpFiles.
	Files *FileRequest `json:"files,omitempty"`
	// Process names a process and what to do with it, for the process
	// ops (AgentOpProcess…).
	Process *ProcessRequest `json:"process,omitempty"`
}

// AgentInfo answers a ping.
type AgentInfo struct {
	Version string `json:"version"` // cairn-init's build version
	PID     int    `json:"pid"`     // cairn-init's pid: 1 in a sandbox
	BootID  string `json:"boot_id"` // random hex chosen when cairn-init started (kept by a memory checkpoint)
}

// AgentResult is the reply of ops that return no data. A reply line of any
// op that carries a non-empty Error means the op failed; Code, if set, says
// which way (one of the AgentErr… constants).
type AgentResult struct {
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// Codes of a failed op's reply, for the failures a caller may act on.
const (
	AgentErrInvalid  = "invalid"   // a field of the request has a bad value
	AgentErrNotFound = "not_found" // the request names something that does not exist
)

// MaxMessage bounds one header or reply line, newline included, but for
// the reply of AgentOpServices (MaxServicesReply).
const MaxMessage = 64 << 10

// MaxServicesReply bounds the reply line of AgentOpServices.
const MaxServicesReply = 4 << 20

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

// ReadMessage reads one line of JSON of at most MaxMessage bytes into v.
// It reads no byte past the newline, so exec frames that follow the line
// stay unread in r.
func ReadMessage(r io.Reader, v any) error {
	return ReadMessageMax(r, v, MaxMessage)
}

// ReadMessageMax is ReadMessage for a line of at most limit bytes.
func ReadMessageMax(r io.Reader, v any, limit int) error {
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
		if len(line) >= limit-1 {
			return ErrMessageTooLarge
		}
		line = append(line, c[0])
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("decode agent message: %w", err)
	}
	return nil
}

// Services: long-running processes cairn-init starts at every boot from the
// definitions in /etc/cairn/services/*.json and restarts per policy. See
// docs/services.md.

// ServiceNamePattern is what a service name must match. It is also the
// name of its log file, /var/log/cairn/NAME.log.
const ServiceNamePattern = `^[a-z0-9][a-z0-9._-]{0,62}$`

// Restart policies of a service.
const (
	ServiceRestartAlways    = "always"     // restart whenever it exits
	ServiceRestartOnFailure = "on-failure" // restart unless it exits with code 0 (the default)
	ServiceRestartNo        = "no"         // never restart
)

// ServiceDefinition is one file of /etc/cairn/services, NAME.json.
type ServiceDefinition struct {
	Name    string            `json:"name"`              // matches ServiceNamePattern
	Cmd     []string          `json:"cmd"`               // argv; Cmd[0] is looked up in PATH
	Env     map[string]string `json:"env,omitempty"`     // added to the default environment
	Dir     string            `json:"dir,omitempty"`     // absolute working directory; default "/"
	Restart string            `json:"restart,omitempty"` // a ServiceRestart… policy; default on-failure
}

// States of a service.
const (
	ServiceRunning = "running" // its process runs
	ServiceBackoff = "backoff" // it exited or could not start, and waits to be restarted
	ServiceExited  = "exited"  // it exited with code 0, or cairn-init stopped it, and is not restarted
	ServiceFailed  = "failed"  // it failed (non-zero code, signal, could not start) and is not restarted
)

// ServiceStatus is the state of one service.
type ServiceStatus struct {
	Name     string    `json:"name"`
	State    string    `json:"state"`               // a Service… state
	PID      int       `json:"pid,omitempty"`       // while running
	Restarts int       `json:"restarts"`            // how many times it was restarted since boot
	ExitCode *int      `json:"exit_code,omitempty"` // of its last exit (128+N for signal N); nil before one
	Since    time.Time `json:"since"`               // when it entered State
	Restart  string    `json:"restart"`             // its restart policy
	Cmd      []string  `json:"cmd"`
	Error    string    `json:"error,omitempty"` // why its last start failed, if it did
}

// ServicesReply answers AgentOpServices: every service, sorted by name.
type ServicesReply struct {
	Services []ServiceStatus `json:"services"`
}

// Tail sizes of AgentOpLogs.
const (
	DefaultLogTail = 64 << 10 // when LogsRequest.TailBytes is 0
	MaxLogTail     = 1 << 20  // a larger TailBytes is taken as this
)

// LogsRequest asks for the end of a service's log.
type LogsRequest struct {
	Service   string `json:"service"`              // service name
	TailBytes int    `json:"tail_bytes,omitempty"` // how many bytes from the end; 0: DefaultLogTail
}

// LogsReply answers AgentOpLogs. The Bytes bytes of the log follow the
// reply line on the stream, which then closes.
type LogsReply struct {
	Bytes int   `json:"bytes"` // bytes that follow: the last ones of the log
	Size  int64 `json:"size"`  // size of the whole log file
}
