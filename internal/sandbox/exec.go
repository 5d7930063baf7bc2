package sandbox

import (
	"context"
	"io"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Exec runs a command in the sandbox called name through its cairn-init.
// While the sandbox is starting (or otherwise busy) it waits, then runs the
// command once the sandbox is ready. For a detached command stream is nil;
// otherwise it carries the exec frames of package api until the Exit frame.
func (m *Manager) Exec(ctx context.Context, account, name string, req api.ExecRequest) (pid int, stream io.ReadWriteCloser, err error) {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return 0, nil, errdefs.New(api.CodeInvalidArgument, "no command given: cairn exec NAME -- COMMAND [ARG…]")
	}
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return 0, nil, err
	}
	host, err := m.waitReady(ctx, sb)
	if err != nil {
		return 0, nil, err
	}
	pid, stream, err = host.Exec(ctx, req)
	if se, ok := err.(*agent.StartError); ok {
		return 0, nil, errdefs.New(api.CodeExecFailed, "%s", se.Msg)
	}
	if err != nil {
		return 0, nil, errdefs.Wrap(api.CodeAgentUnreachable, err, "exec in sandbox %s", name)
	}
	return pid, stream, nil
}
