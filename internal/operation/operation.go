// Package operation runs long work (creating, starting, stopping a sandbox;
// building an image) in the background and keeps its events so that a client
// can wait for it or stream its progress as NDJSON, from the start, however
// late it asks.
//
// Events carry text for people and, when recorded with Step, Report, Notef
// or Record, an api.Progress for programs (the phase, counts, per-location
// state). Reports of one phase in a row replace each other in the list, so
// an operation's events stay few however often it reports.
package operation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
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

	mu      sync.Mutex
	ops     map[string]*Op
	archive Archive // nil: none
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
	events  []entry
	rev     uint64        // counts the writes to events
	changed chan struct{} // closed and replaced at each write to events
	result  any
	err     error
}

// entry is a recorded event.
type entry struct {
	ev     api.Event
	rev    uint64 // op.rev when the entry was written (or last replaced)
	report bool   // written by Report: the next Report of its phase replaces it
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

// Archive finds an operation this registry does not know: one an earlier
// cairnd ran (see SetArchive). It returns the operation as it ended
// (Status success or failure, with Error), or false.
type Archive func(id string) (api.Operation, bool)

// SetArchive makes Get (and so the operation's events) answer for the
// operations archive knows when the registry does not: those of an
// earlier cairnd, which a journal kept. Call it before serving.
func (r *Registry) SetArchive(archive Archive) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archive = archive
}

// ended returns a finished operation as info says it ended: its one event
// is the error (or the complete event, without a result), at
// info.UpdatedAt.
func (r *Registry) ended(info api.Operation) *Op {
	op := &Op{now: r.now, done: make(chan struct{}), changed: make(chan struct{}), info: info}
	ev := api.Event{Type: api.EventComplete, Time: info.UpdatedAt}
	if info.Status != api.OpSuccess {
		op.info.Status = api.OpFailure
		if op.info.Error == nil {
			op.info.Error = &api.ErrorInfo{Code: api.CodeInternal, Message: "failed"}
		}
		e := *op.info.Error
		op.err = errdefs.New(e.Code, "%s", e.Message)
		ev = api.Event{Type: api.EventError, Data: &e, Time: info.UpdatedAt}
	}
	op.rev = 1
	op.events = []entry{{ev: ev, rev: 1}}
	close(op.done)
	return op
}

// Get returns the operation with id, from the archive if the registry
// does not know it (O01 if neither does).
func (r *Registry) Get(id string) (*Op, error) {
	r.mu.Lock()
	op, ok := r.ops[id]
	archive := r.archive
	r.mu.Unlock()
	if ok {
		return op, nil
	}
	if archive != nil {
		if info, found := archive(id); found && info.ID == id {
			op = r.ended(info)
			r.mu.Lock()
			defer r.mu.Unlock()
			if known, ok := r.ops[id]; ok {
				return known, nil
			}
			r.ops[id] = op
			r.prune()
			return op, nil
		}
	}
	return nil, errdefs.New(api.CodeNoOperation, "no operation %q", id)
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

// Progress records a progress event of text only (no Progress field: an
// unstructured event, as before phases existed).
func (op *Op) Progress(format string, args ...any) {
	op.emit(api.EventProgress, fmt.Sprintf(format, args...), nil, false)
}

// Infof records an info event of text only, like Progress.
func (op *Op) Infof(format string, args ...any) {
	op.emit(api.EventInfo, fmt.Sprintf(format, args...), nil, false)
}

// Step records a progress event saying that phase (an api.Phase constant)
// begins, with text for people.
func (op *Op) Step(phase, format string, args ...any) {
	op.emit(api.EventProgress, fmt.Sprintf(format, args...), &api.Progress{Phase: phase}, false)
}

// Notef records an info event about phase: something people should know
// (a fallback taken, how to undo) that is not a step.
func (op *Op) Notef(phase, format string, args ...any) {
	op.emit(api.EventInfo, fmt.Sprintf(format, args...), &api.Progress{Phase: phase}, false)
}

// Report records how far phase p.Phase is, with text for people. It is
// cheap to call often: a Report that follows a Report of the same phase
// replaces it in the event list, so an operation keeps one event per run
// of reports whatever their number. Followers are woken by each and see
// the last one of a run, however late they follow.
func (op *Op) Report(p api.Progress, format string, args ...any) {
	p.Locations = slices.Clone(p.Locations) // the caller may reuse its slice
	op.emit(api.EventProgress, fmt.Sprintf(format, args...), &p, true)
}

// Record records p with text: a Report when p carries counts, else a
// Step. It fits the progress callbacks of image.Catalog.EnsureWithProgress
// and offsite.Service's VerifyWithProgress and RestoreWithProgress.
func (op *Op) Record(p api.Progress, text string) {
	if p.Counted() {
		op.Report(p, "%s", text)
	} else {
		op.Step(p.Phase, "%s", text)
	}
}

func (op *Op) emit(typ string, data any, p *api.Progress, report bool) {
	op.mu.Lock()
	defer op.mu.Unlock()
	now := op.now().UTC()
	op.rev++
	e := entry{ev: api.Event{Type: typ, Data: data, Time: now, Progress: p}, rev: op.rev, report: report}
	if n := len(op.events); report && n > 0 && op.events[n-1].report && op.events[n-1].ev.Progress.Phase == p.Phase {
		op.events[n-1] = e
	} else {
		op.events = append(op.events, e)
	}
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
		op.emit(api.EventError, op.Info().Error, nil, false)
	} else {
		op.emit(api.EventComplete, res, nil, false)
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
// ones until the operation ends (after its final event) or ctx ends. When
// the last event it gave was replaced since (a Report superseded by the
// next of its phase), fn gets the replacement too, before what follows it:
// a follower always sees the final counts of a phase.
func (op *Op) Follow(ctx context.Context, fn func(api.Event) error) error {
	next := 0       // index of the next event to give
	var seen uint64 // rev of events[next-1] when it was given
	for {
		op.mu.Lock()
		from := next
		if next > 0 && op.events[next-1].rev != seen {
			from = next - 1
		}
		pending := slices.Clone(op.events[from:]) // the last may be replaced meanwhile
		changed := op.changed
		op.mu.Unlock()
		for i, e := range pending {
			if err := fn(e.ev); err != nil {
				return err
			}
			next, seen = from+i+1, e.rev
			if e.ev.Type == api.EventComplete || e.ev.Type == api.EventError {
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
