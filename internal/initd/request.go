package initd

import (
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/cairn-sandbox/cairn/api"
)

// maxGraceMS bounds AgentRequest.GraceMS: no stop waits an hour for its
// processes, and a larger number would overflow into a negative grace.
const maxGraceMS = 3600 * 1000

// maxHostname is the longest hostname Linux takes (HOST_NAME_MAX).
const maxHostname = 64

// errBadHeader marks a header line that could not be read or decoded, as
// opposed to one that decoded but asks for something invalid.
var errBadHeader = errors.New("bad request header")

// readRequest reads the header line of a stream opened by cairnd and
// checks it (checkRequest). A line that cannot be read or decoded is an
// error wrapping errBadHeader; one that asks for something invalid is an
// error that says what, an *opError when it has a code.
func readRequest(r io.Reader) (api.AgentRequest, error) {
	var req api.AgentRequest
	if err := api.ReadMessage(r, &req); err != nil {
		return req, fmt.Errorf("%w: %w", errBadHeader, err)
	}
	return req, checkRequest(req)
}

// checkRequest checks what the op of req needs is there and within
// bounds, so that the handler of each op gets a request it can serve.
func checkRequest(req api.AgentRequest) error {
	switch req.Op {
	case api.AgentOpPing, api.AgentOpSync, api.AgentOpServices, api.AgentOpEvents, api.AgentOpProcesses:
	case api.AgentOpExec:
		if req.Exec == nil {
			return errors.New("exec: no exec request")
		}
		if req.Exec.Background && (req.Exec.TTY || req.Exec.Detach) {
			return &opError{api.AgentErrInvalid, "exec: a background process has no terminal and is not detached"}
		}
	case api.AgentOpAttach, api.AgentOpAck:
		if req.Session == nil {
			return &opError{api.AgentErrInvalid, req.Op + ": no session"}
		}
	case api.AgentOpLogs:
		if req.Logs == nil {
			return &opError{api.AgentErrInvalid, "logs: no logs request"}
		}
	case api.AgentOpHostname:
		if len(req.Hostname) == 0 || len(req.Hostname) > maxHostname {
			return &opError{api.AgentErrInvalid, fmt.Sprintf("hostname: %d bytes, want 1 to %d", len(req.Hostname), maxHostname)}
		}
	case api.AgentOpRekey:
		if req.Key == "" {
			return &opError{api.AgentErrInvalid, "rekey: no key"}
		}
	case api.AgentOpFiles:
		if req.Files == nil {
			return &opError{api.AgentErrInvalid, "files: no files request"}
		}
		return checkFileRequest(req.Files)
	case api.AgentOpProcess, api.AgentOpProcessAttach, api.AgentOpProcessStdin, api.AgentOpProcessSignal, api.AgentOpProcessWait:
		return checkProcessRequest(req.Op, req.Process)
	case api.AgentOpShutdown:
		if req.GraceMS < 0 || req.GraceMS > maxGraceMS {
			return &opError{api.AgentErrInvalid, fmt.Sprintf("shutdown: grace_ms %d, want 0 to %d", req.GraceMS, maxGraceMS)}
		}
	default:
		return fmt.Errorf("unknown op %q", req.Op)
	}
	return nil
}

// maxErrorText bounds the error text of a reply: even with every byte
// escaped as JSON's \u00XX the reply stays far below api.MaxMessage, so
// cairnd can read why an op failed whatever the request quoted into it
// (an op name, a service name of 60 KiB…).
const maxErrorText = 4 << 10

// errorReply is the reply saying an op failed with err: its text, cut to
// maxErrorText bytes, and the code of an *opError.
func errorReply(err error) api.AgentResult {
	msg := err.Error()
	if len(msg) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	res := api.AgentResult{Error: msg}
	if oe, ok := errors.AsType[*opError](err); ok {
		res.Code = oe.code
	}
	return res
}

// maxSignal is the highest signal number Linux has (SIGRTMAX).
const maxSignal = 64

// checkProcessRequest checks the part of a process op.
func checkProcessRequest(op string, req *api.ProcessRequest) error {
	switch {
	case req == nil:
		return &opError{api.AgentErrInvalid, op + ": no process request"}
	case req.PID <= 0:
		return &opError{api.AgentErrInvalid, fmt.Sprintf("%s: pid %d", op, req.PID)}
	case op == api.AgentOpProcessSignal && (req.Signal <= 0 || req.Signal > maxSignal):
		return &opError{api.AgentErrInvalid, fmt.Sprintf("%s: signal %d, want 1 to %d", op, req.Signal, maxSignal)}
	case op == api.AgentOpProcessStdin && len(req.Data) > api.MaxStdinChunk:
		return &opError{api.AgentErrInvalid, fmt.Sprintf("%s: %d bytes, at most %d", op, len(req.Data), api.MaxStdinChunk)}
	case op == api.AgentOpProcessAttach && req.Offset < 0:
		return &opError{api.AgentErrInvalid, fmt.Sprintf("%s: offset %d", op, req.Offset)}
	}
	return nil
}
