package sandbox

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/catalog"
)

// Instances is what runs on this host now: the sandboxes whose container
// cairnd runs or has adopted, with their agent connections, and why their
// last automatic checkpoint was skipped. It is process state, not shared:
// the manager changes it, the catalog reads it (catalog.Live).
type Instances struct {
	mu          sync.Mutex
	live        map[string]*instance // by sandbox id
	autoSkipped map[string]string    // by sandbox id; shown by status
	changed     chan struct{}        // closed and replaced at each change, and when a sandbox lease is released
}

var _ catalog.Live = (*Instances)(nil)

// NewInstances returns an empty set.
func NewInstances() *Instances {
	return &Instances{live: map[string]*instance{}, autoSkipped: map[string]string{}, changed: make(chan struct{})}
}

// instance is a sandbox whose container cairnd runs or has adopted.
type instance struct {
	agent     *agent.Host
	api       *http.Server // the management socket, /.cairn/api.sock
	pid       int          // host pid of the runsc sandbox process
	container string       // runsc container name (see container.go)
	// network is the container's network: what a memory image of it
	// needs again at a resume (see imageNetwork).
	network string // metadata.NetworkNone or NetworkEgress
	// unwatch ends the watch of its processes and events (watch.go); nil
	// when not watched.
	unwatch  context.CancelFunc
	selfExit atomic.Bool // cairn-init said it ends by itself
}

// Live implements catalog.Live.
func (s *Instances) Live(id string) catalog.LiveState {
	s.mu.Lock()
	inst := s.live[id]
	st := catalog.LiveState{AutoCheckpointNote: s.autoSkipped[id]}
	s.mu.Unlock()
	if inst != nil {
		st.Running, st.Pid, st.Container, st.AgentConnected = true, inst.pid, inst.container, inst.agent.Connected()
		st.Network = inst.network
	}
	return st
}

// get returns sandbox id's instance, nil if it has none.
func (s *Instances) get(id string) *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id]
}

// put makes inst sandbox id's instance, closing the one it replaces.
func (s *Instances) put(id string, inst *instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.live[id]; old != nil && old != inst {
		old.close()
	}
	s.live[id] = inst
	s.notifyLocked()
}

// take removes sandbox id's instance and returns it (nil if none).
func (s *Instances) take(id string) *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst := s.live[id]
	delete(s.live, id)
	s.notifyLocked()
	return inst
}

// ids returns the ids of the sandboxes that run here.
func (s *Instances) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.live))
	for id := range s.live {
		out = append(out, id)
	}
	return out
}

// closeAll closes every instance's host sockets and forgets them.
func (s *Instances) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, inst := range s.live {
		inst.close()
		delete(s.live, id)
	}
}

// watch returns sandbox id's instance and a channel closed at the next
// change.
func (s *Instances) watch(id string) (*instance, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id], s.changed
}

// notify wakes those waiting in watch.
func (s *Instances) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifyLocked()
}

func (s *Instances) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// note records why sandbox id's last automatic checkpoint was skipped; ""
// clears it.
func (s *Instances) note(id, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if why == "" {
		delete(s.autoSkipped, id)
		return
	}
	s.autoSkipped[id] = why
}
