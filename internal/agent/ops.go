package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// StartError is returned by Exec when cairn-init could not start the
// command, e.g. `exec: "nosuch": executable file not found in $PATH`.
type StartError struct {
	Msg string
}

func (e *StartError) Error() string { return e.Msg }

// Ping asks cairn-init who it is. It waits for a connection until ctx ends.
func (h *Host) Ping(ctx context.Context) (api.AgentInfo, error) {
	sess, _, err := h.session(ctx)
	if err != nil {
		return api.AgentInfo{}, err
	}
	return h.ping(ctx, sess)
}

func (h *Host) ping(ctx context.Context, sess *yamux.Session) (api.AgentInfo, error) {
	var info api.AgentInfo
	st, err := request(ctx, sess, api.AgentRequest{Op: api.AgentOpPing}, &info)
	if err != nil {
		return api.AgentInfo{}, err
	}
	st.Close()
	return info, nil
}

// Exec starts req's command in the sandbox and returns its pid. Unless
// req.Detach, it also returns the exec stream: the caller writes and reads
// the frames of api/exec.go on it, the last one it reads is FrameExit
// (Read then returns io.EOF), and it must Close it. The stream outlives a
// broken connection to cairn-init (a memory checkpoint breaks it): it waits
// for cairn-init to connect again and re-attaches the session where it
// left off, so that what it reads holds every output frame once, in order.
// If that fails, Read returns an error that wraps ErrSessionLost.
// Closing the stream before FrameExit hangs up the command (see
// docs/exec-protocol.md); what follows, the Exit frame included, can still
// be read. The end of ctx aborts the stream, which also hangs up the
// command: ctx bounds the whole session, as with exec.CommandContext.
// If the command could not start, the error is a *StartError.
func (h *Host) Exec(ctx context.Context, req api.ExecRequest) (pid int, stream io.ReadWriteCloser, err error) {
	var started api.ExecStarted
	st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpExec, Exec: &req}, &started)
	if re, ok := errors.AsType[*replyError](err); ok {
		return 0, nil, processError(re.code, re.msg)
	}
	if err != nil {
		return 0, nil, err
	}
	if req.Detach || req.Background {
		st.Close()
		return started.PID, nil, nil
	}
	return started.PID, newExecStream(ctx, h, st, started), nil
}

// Sync makes cairn-init flush every file system to disk, as before a
// snapshot.
func (h *Host) Sync(ctx context.Context) error {
	var res api.AgentResult
	st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpSync}, &res)
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// SetHostname sets the sandbox's hostname (a copy resumed from another
// sandbox's memory still carries the original's).
func (h *Host) SetHostname(ctx context.Context, name string) error {
	var res api.AgentResult
	st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpHostname, Hostname: name}, &res)
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// Shutdown makes cairn-init send SIGTERM to every process, SIGKILL to what
// is left after grace, and exit, which ends the sandbox. It returns once
// the processes are gone; ctx must allow for grace.
func (h *Host) Shutdown(ctx context.Context, grace time.Duration) error {
	var res api.AgentResult
	req := api.AgentRequest{Op: api.AgentOpShutdown, GraceMS: grace.Milliseconds()}
	st, err := h.do(ctx, req, &res)
	if err != nil {
		return err
	}
	st.Close()
	return nil
}

// do waits for a connection and makes one request on it.
func (h *Host) do(ctx context.Context, req api.AgentRequest, reply any) (*yamux.Stream, error) {
	sess, _, err := h.session(ctx)
	if err != nil {
		return nil, err
	}
	return request(ctx, sess, req, reply)
}

// request opens a stream on sess, writes req and reads the reply line into
// reply. The stream is returned open, positioned after the reply line.
func request(ctx context.Context, sess *yamux.Session, req api.AgentRequest, reply any) (*yamux.Stream, error) {
	st, err := sess.OpenStream()
	if err != nil {
		return nil, errdefs.Wrap(api.CodeAgentUnreachable, err, "agent %s", req.Op)
	}
	stop := context.AfterFunc(ctx, func() { abort(st) })
	defer stop()
	fail := func(err error) (*yamux.Stream, error) {
		abort(st)
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, errdefs.Wrap(api.CodeAgentUnreachable, err, "agent %s", req.Op)
	}
	if err := api.WriteMessage(st, req); err != nil {
		return fail(err)
	}
	limit := api.MaxMessage
	if req.Op == api.AgentOpServices || req.Op == api.AgentOpProcesses {
		limit = api.MaxServicesReply
	}
	var line json.RawMessage
	if err := api.ReadMessageMax(st, &line, limit); err != nil {
		return fail(err)
	}
	var res api.AgentResult // every reply may carry an error instead
	if err := json.Unmarshal(line, &res); err != nil {
		return fail(err)
	}
	if res.Error != "" {
		st.Close()
		if req.Op == api.AgentOpExec && res.Code == "" {
			return nil, &StartError{Msg: res.Error}
		}
		return nil, &replyError{op: req.Op, msg: res.Error, code: res.Code}
	}
	if err := json.Unmarshal(line, reply); err != nil {
		return fail(err)
	}
	return st, nil
}

// replyError is an op's failure as cairn-init replied it.
type replyError struct {
	op, msg string
	code    string // an api.AgentErr… code, or ""
}

func (e *replyError) Error() string { return fmt.Sprintf("agent %s: %s", e.op, e.msg) }

// abort ends a stream at once: pending reads and writes fail, and the
// other side sees it closed.
func abort(st net.Conn) {
	_ = st.SetDeadline(time.Now())
	st.Close()
}
