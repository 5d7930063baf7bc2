package activity

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Recording returns store with every change that makes an event published
// to hub once store has made it: a sandbox created, its state set (a
// change only), crashed, its memory limit's kill, a checkpoint created,
// the sandbox deleted.
func Recording(store metadata.Store, hub *Hub) metadata.Store {
	return &recording{Store: store, hub: hub}
}

var _ metadata.Store = (*recording)(nil)

type recording struct {
	metadata.Store
	hub *Hub
	// locks holds a *sync.Mutex per sandbox id, held across a change
	// and its publication: two changes of one sandbox are published in
	// the order the store made them.
	locks sync.Map
}

// lock serializes the recorded changes of sandbox id; call the returned
// function to release.
func (r *recording) lock(id string) func() {
	mu, _ := r.locks.LoadOrStore(id, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

func (r *recording) CreateSandbox(ctx context.Context, sb metadata.Sandbox) error {
	defer r.lock(sb.ID)()
	if err := r.Store.CreateSandbox(ctx, sb); err != nil {
		return err
	}
	r.hub.Publish(api.SandboxActivity{Sandbox: sb.ID, Type: api.ActivityCreated, What: "image " + sb.Image})
	if sb.State != "" {
		r.hub.Publish(api.SandboxActivity{Sandbox: sb.ID, Type: api.ActivityState, State: string(sb.State)})
	}
	return nil
}

func (r *recording) SetSandboxState(ctx context.Context, id string, st metadata.SandboxState) error {
	defer r.lock(id)()
	if err := r.Store.SetSandboxState(ctx, id, st); err != nil {
		return err
	}
	r.hub.Publish(api.SandboxActivity{Sandbox: id, Type: api.ActivityState, State: string(st)})
	return nil
}

func (r *recording) SetSandboxCrashed(ctx context.Context, id, reason string, at time.Time) error {
	defer r.lock(id)()
	if err := r.Store.SetSandboxCrashed(ctx, id, reason, at); err != nil {
		return err
	}
	r.hub.Publish(api.SandboxActivity{Sandbox: id, Type: api.ActivityCrashed, What: reason, Time: at.UTC()})
	r.hub.Publish(api.SandboxActivity{Sandbox: id, Type: api.ActivityState, State: string(metadata.SandboxCrashed), Time: at.UTC()})
	return nil
}

func (r *recording) SetLastOOMKill(ctx context.Context, id, process string, at time.Time) error {
	defer r.lock(id)()
	if err := r.Store.SetLastOOMKill(ctx, id, process, at); err != nil {
		return err
	}
	r.hub.Publish(api.SandboxActivity{Sandbox: id, Type: api.ActivityOOMKill, What: process, Time: at.UTC()})
	return nil
}

func (r *recording) CreateCheckpoint(ctx context.Context, ck metadata.Checkpoint) (metadata.Checkpoint, error) {
	defer r.lock(ck.SandboxID)()
	ck, err := r.Store.CreateCheckpoint(ctx, ck)
	if err != nil {
		return ck, err
	}
	what := ck.Trigger
	if ck.HasMemory {
		what += ", with memory"
	}
	r.hub.Publish(api.SandboxActivity{Sandbox: ck.SandboxID, Type: api.ActivityCheckpoint, Checkpoint: ck.Seq, What: what})
	return ck, nil
}

func (r *recording) DeleteSandbox(ctx context.Context, id string) error {
	defer r.lock(id)()
	if err := r.Store.DeleteSandbox(ctx, id); err != nil {
		return err
	}
	r.hub.Publish(api.SandboxActivity{Sandbox: id, Type: api.ActivityDeleted})
	r.hub.Forget(id)
	r.locks.Delete(id)
	return nil
}
