package sandbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// MaxForkCount bounds one fork request.
const MaxForkCount = api.MaxForkCount

// forkParallelism is how many children start at once.
const forkParallelism = 4

// Fork makes req.Count independent running copies of the sandbox called
// name, named PREFIX-1…PREFIX-N, from req.FromCheckpoint or, without it,
// from a new checkpoint of the current state (trigger "fork"). The parent
// keeps running untouched (paused only for the checkpoint instant). Either
// every child is made or none is.
func (m *Manager) Fork(ctx context.Context, account, name string, req api.ForkRequest) (*operation.Op, error) {
	acct, parent, err := m.lookup(ctx, account, name)
	if err != nil {
		return nil, err
	}
	if err := m.ex.refuseIfBusy(ctx, parent, api.StateDeleting, api.StateRestoring); err != nil {
		return nil, err
	}
	if req.Count == 0 {
		req.Count = 1
	}
	if err := bounds.Int("--count", int64(req.Count), 1, MaxForkCount); err != nil {
		return nil, err
	}
	if req.NamePrefix == "" {
		req.NamePrefix = name + "-fork"
	}
	names := make([]string, req.Count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", req.NamePrefix, i+1)
		if err := ValidateName(names[i]); err != nil {
			return nil, errdefs.New(api.CodeInvalidName, "invalid --name-prefix %q: child name %q is not a valid name", req.NamePrefix, names[i])
		}
	}
	var from metadata.Checkpoint
	if req.FromCheckpoint != "" {
		if from, err = m.cfg.Catalog.FindCheckpoint(ctx, parent, req.FromCheckpoint); err != nil {
			return nil, err
		}
		if req.Memory && !from.HasMemory {
			return nil, errdefs.New(api.CodeNoMemory, "checkpoint %s holds no memory: fork it without --memory", from.Seq)
		}
		local := m.cfg.Disks.HasLocal(ctx, from)
		if !local && m.lazyRemote(from.AccountID) == nil {
			return nil, errdefs.New(api.CodeLocalGone, "the local copy of checkpoint %s is gone and off-site copies are disabled in cairnd's config", from.Seq)
		}
		if local && from.HasMemory && !req.DiskOnly {
			if err := m.cfg.Disks.CheckMemory(from); err != nil {
				return nil, err
			}
		}
	} else if req.Memory && !m.run.isLive(parent.ID) {
		return nil, errdefs.New(api.CodeNotRunning, "sandbox %s is not running: there is no live memory to fork", name)
	}
	if err := m.cfg.Disks.CheckLimit(ctx, acct.ID); err != nil {
		return nil, err
	}
	var releases []func()
	releaseAll := func() {
		for _, r := range releases {
			r()
		}
	}
	for _, n := range names {
		_, release, err := m.ex.reserveName(ctx, account, n)
		if err != nil {
			releaseAll()
			return nil, err
		}
		releases = append(releases, release)
	}
	// The children's ids are chosen now, so that the journal says what
	// the fork will make before it makes any of it.
	children := make([]metadata.Sandbox, len(names))
	for i, n := range names {
		children[i] = metadata.Sandbox{ID: newID(), Name: n}
	}
	return m.cfg.Ops.Start("sandbox.fork", "sandbox/"+name, func(ctx context.Context, op *operation.Op) (any, error) {
		defer releaseAll()
		return m.journalled(ctx, op, acct, parent.ID, children, func() (any, error) {
			return m.fork(ctx, op, acct, parent, from, children, req)
		})
	}), nil
}

// fork makes children (whose ids and names are set) from checkpoint from,
// or from a new checkpoint of parent when from is the zero value. On
// failure it removes the children it made.
func (m *Manager) fork(ctx context.Context, op *operation.Op, acct metadata.Account, parent metadata.Sandbox, from metadata.Checkpoint, children []metadata.Sandbox, req api.ForkRequest) ([]api.Sandbox, error) {
	name := parent.Name
	if from.ID == "" {
		// The parent is held only for the checkpoint's instant: it
		// keeps running and changing meanwhile.
		l, err := m.ex.queue(ctx, parent, purposeCheckpoint)
		if err != nil {
			return nil, err
		}
		cur, err := m.cfg.Store.SandboxByID(ctx, parent.ID)
		if err == nil {
			op.Step(api.PhaseCheckpoint, "Checkpointing %s to fork it", name)
			from, _, err = m.checkpoint(ctx, cur, checkpointOpts{Trigger: api.TriggerFork, Comment: fmt.Sprintf("fork into %d", req.Count), Memory: req.Memory}, op)
		}
		m.ex.release(l)
		if err != nil {
			return nil, err
		}
	}
	makeRoot, mem, done, err := m.forkSource(ctx, op, from, req)
	if err != nil {
		return nil, err
	}
	defer done()
	memory := func() (string, error) { return mem, nil }
	errs := make([]error, len(children))
	sem := make(chan struct{}, forkParallelism)
	var wg sync.WaitGroup
	for i := range children {
		id := children[i].ID
		children[i] = m.childOf(acct, from, children[i].Name, parent.ID)
		children[i].ID = id
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = m.create(ctx, op, children[i], func(root string) error { return makeRoot(id, root) }, memory)
			if errs[i] != nil {
				logErr("undo: drop the lazy root", m.run.dropLazy(id), "sandbox", children[i].Name)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			// All or nothing: remove the children that were made.
			for j := range children {
				if errs[j] == nil {
					m.destroy(context.WithoutCancel(ctx), children[j])
				}
			}
			return nil, fmt.Errorf("fork child %s: %w", children[i].Name, err)
		}
	}
	out := make([]api.Sandbox, 0, len(children))
	for _, c := range children {
		sb, err := m.cfg.Catalog.Get(ctx, acct.Name, c.Name)
		if err != nil {
			m.destroyAll(ctx, children)
			return nil, err
		}
		out = append(out, sb)
	}
	op.Step(api.PhaseDone, "Forked %s into %d sandboxes from %s", name, len(out), from.Seq)
	return out, nil
}

// forkSource returns how the fork's children get their roots from
// checkpoint from, the memory image they resume from ("" to boot), and
// what to call once they are made. From the local copy, each root is a
// snapshot of it (held throughout). From off-site, when the local copy
// is gone, each child is restored lazily on a tree of its own with a
// fill of its own, or with req.Whole fetched whole; a memory image is
// fetched once for all of them.
func (m *Manager) forkSource(ctx context.Context, op *operation.Op, from metadata.Checkpoint, req api.ForkRequest) (makeRoot func(id, root string) error, mem string, done func(), err error) {
	withMemory := from.HasMemory && !req.DiskOnly
	if m.cfg.Disks.HasLocal(ctx, from) {
		held, err := m.cfg.Disks.Open(ctx, from, disks.PurposeRestore)
		if err != nil {
			return nil, "", nil, err
		}
		if withMemory {
			if mem, err = held.MemoryImage(); err != nil {
				held.Release()
				return nil, "", nil, err
			}
		}
		return func(_, root string) error { return held.Materialize(ctx, m.cfg.Pool, root) }, mem, held.Release, nil
	}
	done = func() {}
	if withMemory {
		if mem, done, err = m.fetchMemory(ctx, op, from); err != nil {
			return nil, "", nil, err
		}
	}
	if req.Whole {
		progress := fetchProgress(op, from)
		return func(_, root string) error {
			held, err := m.cfg.Disks.Materialize(ctx, from, root, disks.FromOffsite, m.remote(from.AccountID), progress)
			if held != nil {
				held.Release()
			}
			return err
		}, mem, done, nil
	}
	op.Step(api.PhaseFetch, "Laying out the tree of %s from off-site for each copy; their files' data comes as it is read, the rest in the background", from.Seq)
	return func(id, root string) error {
		return m.cfg.Disks.MaterializeLazy(ctx, from, root, m.run.lazyDir(id), m.lazyRemote(from.AccountID))
	}, mem, done, nil
}

// destroyAll removes every sandbox of children that exists (an undo).
func (m *Manager) destroyAll(ctx context.Context, children []metadata.Sandbox) {
	ctx = context.WithoutCancel(ctx)
	for _, c := range children {
		if _, err := m.cfg.Store.SandboxByID(ctx, c.ID); err == nil {
			m.destroy(ctx, c)
		}
	}
}

// destroy stops and removes a sandbox this operation made.
func (m *Manager) destroy(ctx context.Context, sb metadata.Sandbox) {
	logErr("undo: stop", m.run.stopContainer(ctx, sb), "sandbox", sb.Name)
	logErr("undo: delete row", m.cfg.Store.DeleteSandbox(ctx, sb.ID), "sandbox", sb.Name)
	logErr("undo: remove files", m.removeFiles(ctx, sb.ID), "sandbox", sb.Name)
}
