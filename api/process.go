package api

import "time"

// Background processes: commands started with ExecRequest.Background,
// which cairn-init keeps track of (their output in a ring, their stdin
// open, their exit status) until they have exited and that was read. See
// docs/exec-protocol.md#background-processes and docs/api.md#processes.

// Agent ops on processes. Each takes AgentRequest.Process, but for the list.
const (
	AgentOpProcesses     = "processes"      // reply: ProcessesReply
	AgentOpProcess       = "process"        // reply: Process
	AgentOpProcessAttach = "process_attach" // reply: Process; then its output from Process.Offset on, and exec frames
	AgentOpProcessStdin  = "process_stdin"  // reply: AgentResult once Data is written (and stdin closed with Close)
	AgentOpProcessSignal = "process_signal" // reply: AgentResult once Signal is sent to its process group
	AgentOpProcessWait   = "process_wait"   // reply: Process once it has exited
)

// Codes of a failed process op, beside AgentErrInvalid and AgentErrNotFound.
const (
	AgentErrExited        = "exited"         // the process has exited: it cannot be signalled or written to
	AgentErrNotBackground = "not_background" // an attached exec: its output and stdin are its client's
	AgentErrStdinClosed   = "stdin_closed"   // its stdin was closed
	AgentErrStdinFull     = "stdin_full"     // it did not read its stdin for StdinWait
	AgentErrTooMany       = "too_many"       // MaxProcesses background processes are kept already
)

// Bounds of background processes.
const (
	// MaxProcessOutput is how many bytes of output (stdout and stderr
	// together) cairn-init keeps per background process: the last ones;
	// older bytes are dropped, and Process.OutputStart says how many.
	MaxProcessOutput = 1 << 20
	// MaxProcesses bounds the background processes cairn-init keeps,
	// running or exited and not yet dropped.
	MaxProcesses = 256
	// MaxExitedProcesses bounds the exited background processes kept
	// (their output and status, until read): beyond, the one that exited
	// first is dropped, read or not.
	MaxExitedProcesses = 32
	// ProcessKeep is how long an exited background process stays after
	// its end was read (an attach saw its Exit frame, or a wait returned).
	ProcessKeep = time.Minute
	// MaxStdinChunk bounds ProcessRequest.Data of one process_stdin op.
	MaxStdinChunk = 32 << 10
	// MaxStdinWrite bounds the body of one write to a process's stdin
	// through the API.
	MaxStdinWrite = 1 << 20
	// StdinWait is how long a write to a process's stdin waits for the
	// process to read (a pipe holds 64 KiB).
	StdinWait = 10 * time.Second
	// ProcessCommandCut bounds the bytes of a process's command in the
	// list (the arguments are cut past it).
	ProcessCommandCut = 4 << 10
)

// States of a process.
const (
	ProcessRunning = "running"
	ProcessExited  = "exited"
)

// ProcessRequest names a process and what to do with it, for the process
// ops (AgentRequest.Process).
type ProcessRequest struct {
	PID    int    `json:"pid"`
	Offset int64  `json:"offset,omitempty"` // process_attach: output offset to start at
	Data   []byte `json:"data,omitempty"`   // process_stdin: bytes to write (at most MaxStdinChunk)
	Close  bool   `json:"close,omitempty"`  // process_stdin: then close stdin
	Signal int    `json:"signal,omitempty"` // process_signal: the signal number
}

// Process is one process started through the API: a background process
// (running, or exited and kept), or an attached exec that runs.
type Process struct {
	// PID is its pid inside the sandbox, and its id in the processes API.
	PID        int       `json:"pid"`
	Command    []string  `json:"command"` // argv, cut past ProcessCommandCut bytes in a list
	Started    time.Time `json:"started"`
	State      string    `json:"state"`      // ProcessRunning or ProcessExited
	Background bool      `json:"background"` // started with background; else an attached exec
	TTY        bool      `json:"tty,omitempty"`
	// Exit is its exit status, once exited.
	Exit   *ExitStatus `json:"exit,omitempty"`
	Exited *time.Time  `json:"exited,omitempty"` // when
	// OutputBytes counts the bytes of output it wrote (stdout and stderr),
	// OutputStart the offset of the first byte still kept: the bytes
	// before were dropped (MaxProcessOutput). Background processes only.
	OutputBytes int64 `json:"output_bytes"`
	OutputStart int64 `json:"output_start"`
	StdinOpen   bool  `json:"stdin_open"` // its stdin can be written to
	// Offset, in the reply of an attach, is where its output starts: the
	// offset asked for, or OutputStart if that is later.
	Offset int64 `json:"offset,omitempty"`
}

// ProcessesReply answers AgentOpProcesses: background processes then
// running attached execs, each by pid.
type ProcessesReply struct {
	Processes []Process `json:"processes"`
}

// Dropped is the payload of a FrameDropped frame: the output goes on at
// Offset; the bytes before it, from the reader's offset on, are gone.
type Dropped struct {
	Offset int64 `json:"offset"`
}

// AttachRequest is the body of POST …/processes/{pid}/attach.
type AttachRequest struct {
	Offset int64 `json:"offset,omitempty"` // output offset to start at: 0 for all that is kept
}

// SignalRequest is the body of POST …/processes/{pid}/signal.
type SignalRequest struct {
	// Signal is a name (TERM, SIGTERM, kill) or a number; default TERM.
	Signal string `json:"signal,omitempty"`
}
