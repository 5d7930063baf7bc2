// Package operation runs long work (creating, starting, stopping a sandbox;
// building an image) in the background and keeps its events so that a client
// can wait for it or stream its progress as NDJSON, from the start, however
// late it asks.
package operation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// keep is how many finished operations stay queryable.
const keep = 256

// Registry holds the operations of one daemon.
type Registry struct {
	now func() time.Time
	ctx context.Context // parent of every operation; cancelled at shutdown

	mu  sync.Mutex
	ops map[string]*Op
}

// NewRegistry returns an empty registry whose operations run under ctx.
func NewRegistry(ctx context.Context, now func() time.Time) *Registry {
	return &Registry{now: now, ctx: ctx, ops: map[string]*Op{}}
}

// Func is the work of an operation. It reports progress on op and returns
// the result sent with the complete event.
type Func func(ctx context.Context, op *Op) (any, error)

// Op is one operation.
type Op struct {
	now  func() time.Time
	done chan struct{}

	mu      sync.Mutex
	info    api.Operation
	events  []api.Event
	changed chan struct{} // closed and replaced at each new event
	result  any
	err     error
}

// Start runs fn in the background as a new operation.
func (r *Registry) Start(kind, resource string, fn Func) *Op {
	now := r.now().UTC()
	op := &Op{
		now:     r.now,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		info: api.Operation{
			ID: newID(), Kind: kind, Resource: resource, Status: api.OpRunning,
			CreatedAt: now, UpdatedAt: now,
		},
	}
	r.mu.Lock()
	r.ops[op.info.ID] = op
	r.prune()
	r.mu.Unlock()
	go func() {
		res, err := fn(r.ctx, op)
		op.finish(res, err)
	}()
	return op
}

// Get returns the operation with id.
func (r *Registry) Get(id string) (*Op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op, ok := r.ops[id]
	if !ok {
		return nil, errdefs.New(api.CodeNoOperation, "no operation %q", id)
	}
	return op, nil
}

// List returns every known operation, newest first.
func (r *Registry) List() []api.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]api.Operation, 0, len(r.ops))
	for _, op := range r.ops {
		out = append(out, op.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out
}

// prune forgets the oldest finished operations beyond keep. r.mu is held.
func (r *Registry) prune() {
	if len(r.ops) <= keep {
		return
	}
	var finished []*Op
	for _, op := range r.ops {
		select {
		case <-op.done:
			finished = append(finished, op)
		default:
		}
	}
	sort.Slice(finished, func(i, j int) bool { return finished[i].Info().UpdatedAt.Before(finished[j].Info().UpdatedAt) })
	for i := 0; i < len(finished) && len(r.ops) > keep; i++ {
		delete(r.ops, finished[i].Info().ID)
	}
}

// Info returns the operation's current description.
func (op *Op) Info() api.Operation {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.info
}

// Progress records a progress event.
func (op *Op) Progress(format string, args ...any) {
	op.emit(api.EventProgress, fmt.Sprintf(format, args...))
}

// Infof records an info event.
func (op *Op) Infof(format string, args ...any) {
	op.emit(api.EventInfo, fmt.Sprintf(format, args...))
}

func (op *Op) emit(typ string, data any) {
	op.mu.Lock()
	defer op.mu.Unlock()
	now := op.now().UTC()
	op.events = append(op.events, api.Event{Type: typ, Data: data, Time: now})
	op.info.UpdatedAt = now
	close(op.changed)
	op.changed = make(chan struct{})
}

func (op *Op) finish(res any, err error) {
	op.mu.Lock()
	op.result, op.err = res, err
	if err != nil {
		op.info.Status = api.OpFailure
		op.info.Error = &api.ErrorInfo{Code: errdefs.CodeOf(err), Message: err.Error()}
	} else {
		op.info.Status = api.OpSuccess
	}
	op.mu.Unlock()
	if err != nil {
		op.emit(api.EventError, op.Info().Error)
	} else {
		op.emit(api.EventComplete, res)
	}
	close(op.done)
}

// Wait blocks until the operation ends and returns its result and error.
func (op *Op) Wait(ctx context.Context) (any, error) {
	select {
	case <-op.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.result, op.err
}

// Follow calls fn for every event from the first, in order, waiting for new
// ones until the operation ends (after its final event) or ctx ends.
func (op *Op) Follow(ctx context.Context, fn func(api.Event) error) error {
	next := 0
	for {
		op.mu.Lock()
		pending := op.events[next:]
		changed := op.changed
		op.mu.Unlock()
		for _, ev := range pending {
			if err := fn(ev); err != nil {
				return err
			}
			next++
			if ev.Type == api.EventComplete || ev.Type == api.EventError {
				return nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
