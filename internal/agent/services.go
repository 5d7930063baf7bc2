package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// NoServiceError is returned by ServiceLogs for a name that none of the
// sandbox's services has.
type NoServiceError struct {
	Name string
}

func (e *NoServiceError) Error() string { return fmt.Sprintf("no service %q", e.Name) }

var serviceName = regexp.MustCompile(api.ServiceNamePattern)

// Services returns the state of every service of the sandbox (those
// defined in its /etc/cairn/services when cairn-init started), sorted by
// name.
func (h *Host) Services(ctx context.Context) ([]api.ServiceStatus, error) {
	var reply api.ServicesReply
	st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpServices}, &reply)
	if err != nil {
		return nil, err
	}
	st.Close()
	return reply.Services, nil
}

// ServiceLogs returns the last tail bytes of the log of the service called
// name (api.DefaultLogTail if tail <= 0, at most api.MaxLogTail). cairn-init
// reads the log inside the sandbox; cairnd never opens paths in a sandbox's
// root, where the sandbox could plant symbolic links. A name that is not a
// service name is an error of code api.CodeInvalidArgument; a name no
// service has gives a *NoServiceError.
func (h *Host) ServiceLogs(ctx context.Context, name string, tail int) ([]byte, error) {
	if !serviceName.MatchString(name) {
		return nil, errdefs.New(api.CodeInvalidArgument, "invalid service name %q: must match %s", name, api.ServiceNamePattern)
	}
	req := api.AgentRequest{Op: api.AgentOpLogs, Logs: &api.LogsRequest{Service: name, TailBytes: max(tail, 0)}}
	var reply api.LogsReply
	st, err := h.do(ctx, req, &reply)
	if re, ok := errors.AsType[*replyError](err); ok {
		switch re.code {
		case api.AgentErrNotFound:
			return nil, &NoServiceError{Name: name}
		case api.AgentErrInvalid:
			return nil, errdefs.New(api.CodeInvalidArgument, "%s", re.msg)
		}
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if reply.Bytes < 0 || reply.Bytes > api.MaxLogTail {
		return nil, errdefs.New(api.CodeAgentUnreachable, "agent logs: reply announces %d bytes, want 0 to %d", reply.Bytes, api.MaxLogTail)
	}
	stop := context.AfterFunc(ctx, func() { abort(st) })
	defer stop()
	b := make([]byte, reply.Bytes)
	if _, err := io.ReadFull(st, b); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, errdefs.Wrap(api.CodeAgentUnreachable, err, "agent logs")
	}
	return b, nil
}
