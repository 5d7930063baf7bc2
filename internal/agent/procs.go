package agent

import (
	"context"
	"errors"
	"io"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Background processes (api/process.go): cairn-init keeps them; a Host
// lists, attaches, writes to, signals and waits for them by pid, and
// answers cairn-init's failures with the API's codes (processError).

// processError is the API error of a process op (or a background exec)
// that cairn-init answered with code and msg.
func processError(code, msg string) error {
	switch code {
	case api.AgentErrNotFound:
		return errdefs.New(api.CodeNoProcess, "%s", msg)
	case api.AgentErrInvalid:
		return errdefs.New(api.CodeInvalidArgument, "%s", msg)
	case api.AgentErrExited:
		return errdefs.New(api.CodeProcessExited, "%s", msg)
	case api.AgentErrNotBackground:
		return errdefs.New(api.CodeNotBackground, "%s", msg)
	case api.AgentErrStdinClosed:
		return errdefs.New(api.CodeStdinClosed, "%s", msg)
	case api.AgentErrStdinFull:
		return errdefs.New(api.CodeStdinFull, "%s", msg)
	case api.AgentErrTooMany:
		return errdefs.New(api.CodeTooManyProcesses, "%s", msg)
	}
	return errdefs.New(api.CodeAgentUnreachable, "%s", msg)
}

// process makes the process op op on pid and returns the stream after its
// reply line, decoded into reply.
func (h *Host) process(ctx context.Context, op string, req api.ProcessRequest, reply any) (*yamux.Stream, error) {
	st, err := h.do(ctx, api.AgentRequest{Op: op, Process: &req}, reply)
	if re, ok := errors.AsType[*replyError](err); ok {
		return nil, processError(re.code, re.msg)
	}
	return st, err
}

// Processes lists the background processes cairn-init keeps (running, or
// exited and not yet dropped), then the attached execs that run, each
// with its command cut to api.ProcessCommandCut bytes.
func (h *Host) Processes(ctx context.Context) ([]api.Process, error) {
	var reply api.ProcessesReply
	st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpProcesses}, &reply)
	if err != nil {
		return nil, err
	}
	st.Close()
	return reply.Processes, nil
}

// Process describes the process pid. S12.
func (h *Host) Process(ctx context.Context, pid int) (api.Process, error) {
	var p api.Process
	st, err := h.process(ctx, api.AgentOpProcess, api.ProcessRequest{PID: pid}, &p)
	if err != nil {
		return p, err
	}
	st.Close()
	return p, nil
}

// SignalProcess sends signal sig to the process group of pid (a
// background process or an attached exec). S12, S13.
func (h *Host) SignalProcess(ctx context.Context, pid, sig int) error {
	var res api.AgentResult
	st, err := h.process(ctx, api.AgentOpProcessSignal, api.ProcessRequest{PID: pid, Signal: sig}, &res)
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// WriteStdin writes data to the stdin of background process pid, in
// chunks of api.MaxStdinChunk, and closes it after if closeAfter. Each
// chunk waits at most api.StdinWait for the process to read. S12, S13,
// S14, S15, S16.
func (h *Host) WriteStdin(ctx context.Context, pid int, data []byte, closeAfter bool) error {
	for {
		n := min(len(data), api.MaxStdinChunk)
		last := n == len(data)
		var res api.AgentResult
		st, err := h.process(ctx, api.AgentOpProcessStdin, api.ProcessRequest{PID: pid, Data: data[:n], Close: last && closeAfter}, &res)
		if err != nil {
			return err
		}
		st.Close()
		if last {
			return nil
		}
		data = data[n:]
	}
}

// WaitProcess waits until background process pid has exited, then returns
// it with its exit status (its end counts as read). S12, S14.
func (h *Host) WaitProcess(ctx context.Context, pid int) (api.Process, error) {
	var p api.Process
	st, err := h.process(ctx, api.AgentOpProcessWait, api.ProcessRequest{PID: pid}, &p)
	if err != nil {
		return p, err
	}
	st.Close()
	return p, nil
}

// AttachProcess attaches to background process pid: it returns the
// process (its Offset says where the output starts) and a stream that
// carries its output from offset on as exec frames (a Dropped frame
// where bytes were dropped), then its Exit frame (Read then returns
// io.EOF); Stdin, StdinClose and Signal frames written to it go to the
// process. Closing it leaves the process running. The end of ctx aborts
// the stream. A connection to cairn-init that breaks ends the stream
// without an Exit frame: attach again from the offset reached. S12, S14,
// V02 (an offset past the output's end).
func (h *Host) AttachProcess(ctx context.Context, pid int, offset int64) (api.Process, io.ReadWriteCloser, error) {
	var p api.Process
	st, err := h.process(ctx, api.AgentOpProcessAttach, api.ProcessRequest{PID: pid, Offset: offset}, &p)
	if err != nil {
		return p, nil, err
	}
	stop := context.AfterFunc(ctx, func() { abort(st) })
	return p, &attachStream{Stream: st, stop: stop}, nil
}

// attachStream is an attach's stream; Close also drops its ctx's watch.
type attachStream struct {
	*yamux.Stream
	stop func() bool
}

func (a *attachStream) Close() error {
	a.stop()
	return a.Stream.Close()
}
