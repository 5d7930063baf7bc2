package sandbox

import (
	"context"
	"errors"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/catalog"
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

const purposeCheckpoint = lease.PurposeCheckpoint

// exclusion takes and gives up sandbox leases for the manager, and wakes
// the execs waiting for a sandbox when one is released.
type exclusion struct {
	cfg Config
}

func sandboxResource(id string) string { return lease.SandboxResource(id) }

// lifecycleOp runs fn as an operation on sb, whose lease l the caller took
// (acquire), and releases it at the end.
func (m *Manager) lifecycleOp(kind string, sb metadata.Sandbox, l *lease.Lease, fn operation.Func) *operation.Op {
	return m.cfg.Ops.Start(kind, "sandbox/"+sb.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		defer m.ex.release(l)
		return fn(ctx, op)
	})
}

// exclusive takes sandbox sb's exclusive lease for state. A checkpoint or a
// diff in the way is waited for (they are short); a lifecycle operation is
// not: S05.
func (x *exclusion) exclusive(ctx context.Context, sb metadata.Sandbox, state string) (*lease.Lease, error) {
	l, err := x.cfg.Leases.Acquire(ctx, sandboxResource(sb.ID), lease.Options{
		Exclusive: true, Purpose: state,
		WaitFor: func(h metadata.Lease) bool { return !lease.Transient(h.Purpose) },
	})
	var held *lease.HeldError
	if errors.As(err, &held) {
		return nil, errdefs.New(api.CodeSandboxBusy, "sandbox %s is busy (%s); try again when it is done", sb.Name, held.Holder.Purpose)
	}
	if err != nil {
		return nil, err
	}
	x.cfg.Instances.notify()
	return l, nil
}

// queue takes sandbox sb's lease for a checkpoint (exclusive) or a diff
// (shared), waiting for whatever holds it.
func (x *exclusion) queue(ctx context.Context, sb metadata.Sandbox, purpose string) (*lease.Lease, error) {
	return x.cfg.Leases.QueueSandbox(ctx, sb.ID, purpose)
}

// release gives a sandbox lease up and wakes those waiting for the sandbox.
func (x *exclusion) release(l *lease.Lease) {
	l.Release()
	x.cfg.Instances.notify()
}

// acquire looks up the sandbox called name and takes its lease for state,
// returning its row as read after taking it (so no other lifecycle
// operation changed it in between). Release the lease when done.
func (x *exclusion) acquire(ctx context.Context, account, name, state string) (metadata.Sandbox, *lease.Lease, error) {
	_, sb, err := catalog.Lookup(ctx, x.cfg.Store, account, name)
	if err != nil {
		return sb, nil, err
	}
	l, err := x.exclusive(ctx, sb, state)
	if err != nil {
		return sb, nil, err
	}
	id := sb.ID
	sb, err = x.cfg.Store.SandboxByID(ctx, id)
	if err != nil {
		x.release(l)
		if errors.Is(err, metadata.ErrNotFound) {
			return sb, nil, errdefs.New(api.CodeNoSandbox, "no sandbox named %q", name)
		}
		return sb, nil, err
	}
	return sb, l, nil
}

// refuseIfBusy fails with S05 if sandbox sb is in one of states.
func (x *exclusion) refuseIfBusy(ctx context.Context, sb metadata.Sandbox, states ...string) error {
	cur, ok := x.cfg.Leases.BusyState(ctx, sb.ID)
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
func (x *exclusion) reserveName(ctx context.Context, account, name string) (metadata.Account, func(), error) {
	acct, err := x.cfg.Store.AccountByName(ctx, account)
	if err != nil {
		return acct, nil, err
	}
	l, err := x.cfg.Leases.Acquire(ctx, "name/"+account+"/"+name, lease.Options{Exclusive: true, Purpose: "creating"})
	if errors.Is(err, metadata.ErrConflict) {
		return acct, nil, errdefs.New(api.CodeNameTaken, "a sandbox named %q is being created", name)
	} else if err != nil {
		return acct, nil, err
	}
	if _, err := x.cfg.Store.SandboxByName(ctx, acct.ID, name); err == nil {
		l.Release()
		return acct, nil, errdefs.New(api.CodeNameTaken, "a sandbox named %q already exists", name)
	} else if !errors.Is(err, metadata.ErrNotFound) {
		l.Release()
		return acct, nil, err
	}
	return acct, l.Release, nil
}
