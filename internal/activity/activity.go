// Package activity keeps each sandbox's event stream: what happened to it
// (its state changed, it crashed and why, its memory limit killed a
// process, a checkpoint was taken), in order, for `cairn events` and
// GET /v1/sandboxes/{name}/events.
//
// A Hub holds the last HubSize events of each sandbox in memory and hands
// new ones to whoever follows. Recording wraps the metadata store so that
// every change of those rows, whichever part of cairnd makes it, becomes
// an event once the store has it: nothing has to remember to report.
//
// The stream is of this cairnd's run: a restart starts it again empty
// (its sequence numbers go on growing). What must outlive a restart is in
// the sandbox's row already (its state, the last crash and its reason,
// the last OOM kill).
package activity

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// HubSize is how many events a Hub keeps per sandbox.
const HubSize = 256

// Hub is the sandboxes' event streams. The zero value is not usable: use
// NewHub.
type Hub struct {
	now func() time.Time

	mu      sync.Mutex
	seq     int64
	streams map[string]*stream // by sandbox id
}

type stream struct {
	events  []api.SandboxActivity // the last HubSize, oldest first
	state   string                // the last state event's
	changed chan struct{}         // closed and replaced at every event
}

// NewHub returns an empty hub; now stamps events (time.Now if nil).
// Sequence numbers start past the start time in microseconds, so that
// they keep growing across restarts of cairnd: a follower that comes back
// with ?since=SEQ after one gets the new run's events, not nothing.
func NewHub(now func() time.Time) *Hub {
	if now == nil {
		now = time.Now
	}
	return &Hub{now: now, seq: now().UnixMicro(), streams: map[string]*stream{}}
}

func (h *Hub) streamLocked(id string) *stream {
	s := h.streams[id]
	if s == nil {
		s = &stream{changed: make(chan struct{})}
		h.streams[id] = s
	}
	return s
}

// Publish adds ev to its sandbox's stream, giving it its sequence number
// and, if it has none, its time. A state event that repeats the state
// before it is dropped.
func (h *Hub) Publish(ev api.SandboxActivity) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.streamLocked(ev.Sandbox)
	if ev.Type == api.ActivityState {
		if ev.State == s.state {
			return
		}
		s.state = ev.State
	}
	h.seq++
	ev.Seq = h.seq
	if ev.Time.IsZero() {
		ev.Time = h.now().UTC()
	}
	if len(s.events) == HubSize {
		s.events = append(s.events[:0:0], s.events[1:]...)
	}
	s.events = append(s.events, ev)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Forget drops a deleted sandbox's stream, once its followers had time to
// read its last events.
func (h *Hub) Forget(id string) {
	time.AfterFunc(time.Minute, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if s := h.streams[id]; s != nil && len(s.events) > 0 && s.events[len(s.events)-1].Type == api.ActivityDeleted {
			delete(h.streams, id)
		}
	})
}

// Since returns sandbox id's events after sequence number seq, and a
// channel closed at its next event.
func (h *Hub) Since(id string, seq int64) ([]api.SandboxActivity, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.streamLocked(id)
	var out []api.SandboxActivity
	for _, ev := range s.events {
		if ev.Seq > seq {
			out = append(out, ev)
		}
	}
	return out, s.changed
}

// Follow calls fn with sandbox id's events after seq, then with each new
// one as it comes, until ctx ends, fn fails (its error is returned) or the
// sandbox's deleted event was passed.
func (h *Hub) Follow(ctx context.Context, id string, seq int64, fn func(api.SandboxActivity) error) error {
	for {
		evs, changed := h.Since(id, seq)
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
			seq = ev.Seq
			if ev.Type == api.ActivityDeleted {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
