package sandbox

import (
	"context"
	"io"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Background processes live in the sandbox's cairn-init (api/process.go):
// these calls reach them through its agent.Host. Each is a use of the
// sandbox (a sleeping one is woken first, as by an exec) for as long as
// the call lasts: an attach until its stream closes, a wait until the
// process exits. A background process that runs holds the sandbox awake
// too (see sleepIfIdle). A restart, or a restore that does not resume
// memory, ends them: the list is empty after.

// usedHost returns the agent of the running sandbox called name, waking
// it if it sleeps; the sandbox counts as used until release is called.
func (m *Manager) usedHost(ctx context.Context, account, name string) (_ *agent.Host, release func(), err error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, nil, err
	}
	release = m.hold(sb.ID)
	defer func() {
		if err != nil {
			release()
		}
	}()
	if sb, err = m.cfg.Store.SandboxByID(ctx, sb.ID); err != nil {
		return nil, nil, err
	}
	if err := m.wakeIfAsleep(ctx, account, sb); err != nil {
		return nil, nil, err
	}
	host, err := m.run.waitReady(ctx, sb)
	if err != nil {
		return nil, nil, err
	}
	return host, release, nil
}

// agentFailed gives an error of the agent without a code S07.
func agentFailed(err error, format string, args ...any) error {
	if err == nil || errdefs.HasCode(err) {
		return err
	}
	return errdefs.Wrap(api.CodeAgentUnreachable, err, format, args...)
}

// Processes lists the background processes of the sandbox called name
// (running, or exited and kept), then its attached execs that run. S01,
// S04, S07.
func (m *Manager) Processes(ctx context.Context, account, name string) ([]api.Process, error) {
	host, release, err := m.usedHost(ctx, account, name)
	if err != nil {
		return nil, err
	}
	defer release()
	list, err := host.Processes(ctx)
	return list, agentFailed(err, "processes of %s", name)
}

// Process describes process pid of the sandbox called name. S12.
func (m *Manager) Process(ctx context.Context, account, name string, pid int) (api.Process, error) {
	host, release, err := m.usedHost(ctx, account, name)
	if err != nil {
		return api.Process{}, err
	}
	defer release()
	p, err := host.Process(ctx, pid)
	return p, agentFailed(err, "process %d of %s", pid, name)
}

// SignalProcess sends signal sig to the process group of pid. S12, S13.
func (m *Manager) SignalProcess(ctx context.Context, account, name string, pid, sig int) error {
	host, release, err := m.usedHost(ctx, account, name)
	if err != nil {
		return err
	}
	defer release()
	return agentFailed(host.SignalProcess(ctx, pid, sig), "signal process %d of %s", pid, name)
}

// WriteStdin writes data to the stdin of background process pid, then
// closes it if closeAfter. S12, S13, S14, S15, S16.
func (m *Manager) WriteStdin(ctx context.Context, account, name string, pid int, data []byte, closeAfter bool) error {
	host, release, err := m.usedHost(ctx, account, name)
	if err != nil {
		return err
	}
	defer release()
	return agentFailed(host.WriteStdin(ctx, pid, data, closeAfter), "stdin of process %d of %s", pid, name)
}

// WaitProcess waits until background process pid exits (or ctx ends) and
// returns it with its exit status. S12, S14.
func (m *Manager) WaitProcess(ctx context.Context, account, name string, pid int) (api.Process, error) {
	host, release, err := m.usedHost(ctx, account, name)
	if err != nil {
		return api.Process{}, err
	}
	defer release()
	p, err := host.WaitProcess(ctx, pid)
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	return p, agentFailed(err, "wait for process %d of %s", pid, name)
}

// AttachProcess attaches to background process pid from output offset
// offset: the stream carries its output, then its Exit frame; the caller
// closes it, which leaves the process running. S12, S14, V02.
func (m *Manager) AttachProcess(ctx context.Context, account, name string, pid int, offset int64) (api.Process, io.ReadWriteCloser, error) {
	host, release, err := m.usedHost(ctx, account, name)
	if err != nil {
		return api.Process{}, nil, err
	}
	p, st, err := host.AttachProcess(ctx, pid, offset)
	if err != nil {
		release()
		return p, nil, agentFailed(err, "attach to process %d of %s", pid, name)
	}
	return p, heldStream{st, release}, nil
}
