package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ExecRequest asks to run a command inside a sandbox. It is the body of
// POST /v1/sandboxes/{name}/exec and, unchanged, the header cairnd sends to
// cairn-init on a new exec stream.
type ExecRequest struct {
	Command []string `json:"command"`          // argv; Command[0] is looked up in PATH
	Env     []string `json:"env,omitempty"`    // extra KEY=VALUE pairs
	Dir     string   `json:"dir,omitempty"`    // working directory; default the image's, else "/"
	User    string   `json:"user,omitempty"`   // user[:group] or uid[:gid] inside; default the image's, else root
	TTY     bool     `json:"tty,omitempty"`    // run on a pseudo-terminal (stdout and stderr merged)
	Stdin   bool     `json:"stdin,omitempty"`  // the client sends stdin frames; without it stdin is /dev/null
	Detach  bool     `json:"detach,omitempty"` // start, answer with the pid, leave it running; stdio is /dev/null
	// Background: start, answer with the pid (its id in the processes
	// API), keep its output (the last MaxProcessOutput bytes) and its
	// stdin open for writes; it outlives every client. Not with TTY or
	// Detach. See docs/exec-protocol.md#background-processes.
	Background bool   `json:"background,omitempty"`
	Rows       uint16 `json:"rows,omitempty"` // initial terminal size when TTY
	Cols       uint16 `json:"cols,omitempty"`
	// TimeoutSeconds, if positive, is how long the command may run: then
	// its process group is killed (SIGKILL) and it exits with code
	// ExitTimedOut and TimedOut set (MaxExecTimeout at most).
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// ExitTimedOut is the exit code of a command killed at its timeout (as
// coreutils timeout(1) gives).
const ExitTimedOut = 124

// MaxExecTimeout bounds ExecRequest.TimeoutSeconds.
const MaxExecTimeout = 30 * 24 * 60 * 60

// ExecStarted answers an exec request once the process runs.
type ExecStarted struct {
	PID int `json:"pid"` // pid inside the sandbox
	// Session identifies an attached exec's session inside cairn-init (32
	// hex digits), for cairnd to re-attach it after its connection broke.
	// Empty for a detached exec, and in the REST API.
	Session string `json:"session,omitempty"`
	// Buffer is how many bytes of output cairn-init keeps for the session
	// until cairnd acknowledges them (op ack); when they are that many,
	// the command blocks on its output. cairnd acknowledges well before.
	Buffer int `json:"buffer,omitempty"`
}

// SessionOffset names an attached exec session and a byte offset in its
// output: the bytes of the Stdout, Stderr and Exit frames cairn-init sent
// on it, counted from the first frame after the exec reply.
type SessionOffset struct {
	ID     string `json:"id"`     // ExecStarted.Session
	Offset int64  `json:"offset"` // bytes of output
}

// ExitStatus is the payload of a FrameExit frame.
type ExitStatus struct {
	Code   int    `json:"code"`             // exit code; 128+N when killed by signal N
	Signal string `json:"signal,omitempty"` // name of the signal that killed it, if any
	// TimedOut: it ran past ExecRequest.TimeoutSeconds and was killed;
	// Code is then ExitTimedOut.
	TimedOut bool `json:"timed_out,omitempty"`
}

// Resize is the payload of a FrameResize frame.
type Resize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// FrameType says what a frame of an exec stream carries.
//
// After an exec is accepted, client and cairn-init exchange frames on one
// byte stream (cairnd only pipes them through): one type byte, a big-endian
// uint32 payload length, the payload. See docs/exec-protocol.md.
type FrameType byte

// Frame types. Client → sandbox: Stdin, StdinClose, Resize, Signal.
// Sandbox → client: Stdout, Stderr, Exit (always last). cairnd → cairn-init
// only: Hangup (cairnd drops Hangup frames that a client sends). cairnd →
// client only: Error, last instead of Exit when cairnd ended the session
// (its API token was revoked or expired; the command is hung up).
const (
	FrameStdin      FrameType = 1 // payload: bytes for the process's stdin
	FrameStdout     FrameType = 2 // payload: bytes the process wrote to stdout (or the tty)
	FrameStderr     FrameType = 3 // payload: bytes the process wrote to stderr
	FrameStdinClose FrameType = 4 // no payload: close the process's stdin
	FrameResize     FrameType = 5 // payload: JSON Resize
	FrameSignal     FrameType = 6 // payload: signal number as one byte
	FrameExit       FrameType = 7 // payload: JSON ExitStatus; the last frame
	FrameHangup     FrameType = 8 // no payload: the client is gone; hang the process up now
	FrameError      FrameType = 9 // payload: JSON ErrorInfo; cairnd ended the session; the last frame
	// FrameDropped, on the stream of an attached background process only:
	// output was dropped from its ring (the reader started before, or fell
	// behind, the bytes it keeps); payload JSON Dropped.
	FrameDropped FrameType = 10
)

// MaxFramePayload bounds one frame's payload.
const MaxFramePayload = 1 << 20

// ErrFrameTooLarge is returned by ReadFrame for a payload over MaxFramePayload.
var ErrFrameTooLarge = errors.New("exec frame too large")

// WriteFrame writes one frame. It is not safe for concurrent use on one writer.
func WriteFrame(w io.Writer, t FrameType, payload []byte) error {
	if len(payload) > MaxFramePayload {
		return ErrFrameTooLarge
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = byte(t)
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame. It returns io.EOF only when the stream ends
// cleanly between frames.
func ReadFrame(r io.Reader) (FrameType, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("exec frame header: %w", err)
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:5])
	if n > MaxFramePayload {
		return 0, nil, ErrFrameTooLarge
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // a header without its payload is a torn frame, not a clean end
		}
		return 0, nil, fmt.Errorf("exec frame payload: %w", err)
	}
	return FrameType(hdr[0]), payload, nil
}
