package sandbox

import (
	"context"
	"errors"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// One lifecycle change at a time per sandbox: each takes the exclusive
// lease of "sandbox/<id>" in the metadata store, whose purpose is the
// sandbox's transient state (starting, restoring…) while it holds it.
// Checkpoints take it too (purpose checkpoint) and queue behind whatever
// holds it; lifecycle operations wait for a checkpoint to end, and fail
// with S05 when another lifecycle operation holds it. A diff holds it
// shared. Names being created are held the same way ("name/<account>/<name>").

// Purposes of sandbox leases that are not lifecycle states.
const (
	purposeCheckpoint = "checkpoint"
	purposeDiff       = "diff"
)

func sandboxResource(id string) string { return "sandbox/" + id }

// transient reports whether a sandbox lease's purpose is a lifecycle state
// shown as the sandbox's state.
func transient(purpose string) bool {
	return purpose != purposeCheckpoint && purpose != purposeDiff
}

// exclusive takes sandbox sb's exclusive lease for state. A checkpoint or a
// diff in the way is waited for (they are short); a lifecycle operation is
// not: S05.
func (m *Manager) exclusive(ctx context.Context, sb metadata.Sandbox, state string) (*lease.Lease, error) {
	l, err := m.cfg.Leases.Acquire(ctx, sandboxResource(sb.ID), lease.Options{
		Exclusive: true, Purpose: state,
		WaitFor: func(h metadata.Lease) bool { return !transient(h.Purpose) },
	})
	var held *lease.HeldError
	if errors.As(err, &held) {
		return nil, errdefs.New(api.CodeSandboxBusy, "sandbox %s is busy (%s); try again when it is done", sb.Name, held.Holder.Purpose)
	}
	if err != nil {
		return nil, err
	}
	m.notify()
	return l, nil
}

// queue takes sandbox sb's lease for a checkpoint (exclusive) or a diff
// (shared), waiting for whatever holds it.
func (m *Manager) queue(ctx context.Context, sb metadata.Sandbox, purpose string) (*lease.Lease, error) {
	return m.cfg.Leases.Acquire(ctx, sandboxResource(sb.ID), lease.Options{
		Exclusive: purpose != purposeDiff, Purpose: purpose, WaitFor: lease.WaitAlways,
	})
}

// release gives a sandbox lease up and wakes those waiting for the sandbox.
func (m *Manager) release(l *lease.Lease) {
	l.Release()
	m.notify()
}

// acquire looks up the sandbox called name and takes its lease for state,
// returning its row as read after taking it (so no other lifecycle
// operation changed it in between). Release the lease when done.
func (m *Manager) acquire(ctx context.Context, account, name, state string) (metadata.Sandbox, *lease.Lease, error) {
	_, sb, err := m.lookup(ctx, account, name)
	if err != nil {
		return sb, nil, err
	}
	l, err := m.exclusive(ctx, sb, state)
	if err != nil {
		return sb, nil, err
	}
	id := sb.ID
	sb, err = m.cfg.Store.SandboxByID(ctx, id)
	if err != nil {
		m.release(l)
		if errors.Is(err, metadata.ErrNotFound) {
			return sb, nil, errdefs.New(api.CodeNoSandbox, "no sandbox named %q", name)
		}
		return sb, nil, err
	}
	return sb, l, nil
}

// lifecycleOp runs fn as an operation on sb, whose lease l the caller took
// (acquire), and releases it at the end.
func (m *Manager) lifecycleOp(kind string, sb metadata.Sandbox, l *lease.Lease, fn operation.Func) *operation.Op {
	return m.cfg.Ops.Start(kind, "sandbox/"+sb.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		defer m.release(l)
		return fn(ctx, op)
	})
}

// busyState returns the transient state of sandbox id while a lifecycle
// operation holds it.
func (m *Manager) busyState(ctx context.Context, id string) (string, bool) {
	holders, err := m.cfg.Leases.Holders(ctx, sandboxResource(id))
	if err != nil {
		return "", false
	}
	for _, h := range holders {
		if h.Exclusive && transient(h.Purpose) {
			return h.Purpose, true
		}
	}
	return "", false
}

// refuseIfBusy fails with S05 if sandbox sb is in one of states.
func (m *Manager) refuseIfBusy(ctx context.Context, sb metadata.Sandbox, states ...string) error {
	cur, ok := m.busyState(ctx, sb.ID)
	if !ok {
		return nil
	}
	for _, st := range states {
		if cur == st {
			return errdefs.New(api.CodeSandboxBusy, "sandbox %s is %s; try again when it is done", sb.Name, cur)
		}
	}
	return nil
}

// reserveName checks that name is free in account and holds it until
// release is called, so that two creates of one name cannot race.
func (m *Manager) reserveName(ctx context.Context, account, name string) (metadata.Account, func(), error) {
	acct, err := m.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return acct, nil, err
	}
	l, err := m.cfg.Leases.Acquire(ctx, "name/"+account+"/"+name, lease.Options{Exclusive: true, Purpose: "creating"})
	if errors.Is(err, metadata.ErrConflict) {
		return acct, nil, errdefs.New(api.CodeNameTaken, "a sandbox named %q is being created", name)
	} else if err != nil {
		return acct, nil, err
	}
	if _, err := m.cfg.Store.SandboxByName(ctx, acct.ID, name); err == nil {
		l.Release()
		return acct, nil, errdefs.New(api.CodeNameTaken, "a sandbox named %q already exists", name)
	} else if !errors.Is(err, metadata.ErrNotFound) {
		l.Release()
		return acct, nil, err
	}
	return acct, l.Release, nil
}
