package sandbox

import (
	"context"
	"errors"
	"io"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Exec runs a command in the sandbox called name through its cairn-init.
// While the sandbox is starting (or otherwise busy) it waits, then runs the
// command once the sandbox is ready. For a detached or background command
// stream is nil;
// otherwise it carries the exec frames of package api until the Exit frame,
// across broken connections to cairn-init (agent.Host.Exec re-attaches the
// session). It ends with an error wrapping agent.ErrSessionLost if the
// session cannot be re-attached: cairn-init did not come back in time, or
// the sandbox's agent.Host closed meanwhile (it stopped, or was restored in
// place).
func (m *Manager) Exec(ctx context.Context, account, name string, req api.ExecRequest) (pid int, stream io.ReadWriteCloser, err error) {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return 0, nil, errdefs.New(api.CodeInvalidArgument, "no command given: cairn exec NAME -- COMMAND [ARG…]")
	}
	if !(req.TimeoutSeconds >= 0 && req.TimeoutSeconds <= api.MaxExecTimeout) {
		return 0, nil, errdefs.New(api.CodeInvalidArgument, "timeout_seconds %v: from 0 (none) to %d", req.TimeoutSeconds, api.MaxExecTimeout)
	}
	if req.Background && (req.TTY || req.Detach) {
		return 0, nil, errdefs.New(api.CodeInvalidArgument, "a background process has no terminal and is not detached: background goes without tty and detach")
	}
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return 0, nil, err
	}
	// Held before the row is read again: a sleep decided meanwhile is
	// marked in it by then, and woken from.
	release := m.hold(sb.ID)
	if sb, err = m.cfg.Store.SandboxByID(ctx, sb.ID); err == nil {
		err = m.wakeIfAsleep(ctx, account, sb)
	}
	if err != nil {
		release()
		return 0, nil, err
	}
	defer func() {
		if stream == nil {
			release() // detached, or failed: only its start was a use
		} else {
			stream = heldStream{stream, release}
		}
	}()
	req = withSettings(req, sb.Settings)
	// The agent it waited for may go before the command starts (the
	// sandbox was restored or started again meanwhile): the command did
	// not run, and waits for the next one.
	for try := 0; ; try++ {
		var host *agent.Host
		if host, err = m.run.waitReady(ctx, sb); err != nil {
			return 0, nil, err
		}
		pid, stream, err = host.Exec(ctx, req)
		if !errors.Is(err, agent.ErrClosed) || try == execRetries {
			break
		}
	}
	if se, ok := err.(*agent.StartError); ok {
		return 0, nil, errdefs.New(api.CodeExecFailed, "%s", se.Msg)
	}
	if err != nil {
		return 0, nil, errdefs.Wrap(api.CodeAgentUnreachable, err, "exec in sandbox %s", name)
	}
	return pid, stream, nil
}

// Services lists the services defined in the sandbox called name, with
// their states, as cairn-init reports them. A sandbox asleep is woken.
func (m *Manager) Services(ctx context.Context, account, name string) ([]api.ServiceStatus, error) {
	host, release, err := m.awakeAgent(ctx, account, name)
	if err != nil {
		return nil, err
	}
	defer release()
	list, err := host.Services(ctx)
	if err != nil {
		return nil, errdefs.Wrap(api.CodeAgentUnreachable, err, "services of %s", name)
	}
	return list, nil
}

// ServiceLogs returns the end of a service's log, read inside the sandbox
// by cairn-init (cairnd never follows paths inside a sandbox's root). A
// sandbox asleep is woken.
func (m *Manager) ServiceLogs(ctx context.Context, account, name, service string, tail int) ([]byte, error) {
	host, release, err := m.awakeAgent(ctx, account, name)
	if err != nil {
		return nil, err
	}
	defer release()
	b, err := host.ServiceLogs(ctx, service, tail)
	var noSvc *agent.NoServiceError
	switch {
	case errors.As(err, &noSvc):
		return nil, errdefs.New(api.CodeNoService, "sandbox %s has no service %q (see `cairn services %s`)", name, service, name)
	case errdefs.CodeOf(err) == api.CodeInvalidArgument:
		return nil, err
	case err != nil:
		return nil, errdefs.Wrap(api.CodeAgentUnreachable, err, "logs of %s in %s", service, name)
	}
	return b, nil
}

// FileHost returns the agent of the running sandbox called name, waiting
// while it starts: its file methods are the sandbox's Files API, done
// inside by cairn-init. S01, S04, S07.
//
// A sandbox asleep is woken first; the call keeps it awake until ctx ends
// (the request is done).
func (m *Manager) FileHost(ctx context.Context, account, name string) (*agent.Host, error) {
	host, release, err := m.awakeAgent(ctx, account, name)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, release)
	return host, nil
}

// awakeAgent returns the agent of the running sandbox called name, waiting
// while it starts and waking it first if it sleeps. The sandbox is held
// awake until release is called (once); on error it is not held.
func (m *Manager) awakeAgent(ctx context.Context, account, name string) (host *agent.Host, release func(), err error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, nil, err
	}
	// Held before the row is read again: see Exec.
	release = m.hold(sb.ID)
	if sb, err = m.cfg.Store.SandboxByID(ctx, sb.ID); err == nil {
		if err = m.wakeIfAsleep(ctx, account, sb); err == nil {
			host, err = m.run.waitReady(ctx, sb)
		}
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return host, release, nil
}

// execRetries bounds how many times an exec waits again for a sandbox
// whose agent went before the command started.
const execRetries = 3
