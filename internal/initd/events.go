package initd

import (
	"io"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
)

// serveEvents is the events op: it replies {"ok":true}, then writes one
// api.AgentEvent line per thing cairnd should know as it happens: the
// last OOM kill at once if there was one (cairnd drops what it has seen),
// each new one, and "exiting" when cairn-init ends by itself (SIGTERM from
// inside the sandbox), after which the stream closes. It ends when cairnd
// closes the stream or cairn-init stops.
func (s *server) serveEvents(st *yamux.Stream) {
	s.reply(st, api.AgentResult{OK: true})
	hungUp := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, st) // cairnd sends nothing more
		close(hungUp)
	}()
	var sent *api.OOMKill
	for {
		last, changed := s.oom.latest()
		if last != nil && last != sent {
			if err := api.WriteMessage(st, api.AgentEvent{Kind: api.AgentEventOOMKill, OOMKill: last}); err != nil {
				return
			}
			sent = last
		}
		select {
		case <-changed:
		case <-hungUp:
			return
		case <-s.exiting:
			if s.selfExit.Load() {
				_ = api.WriteMessage(st, api.AgentEvent{Kind: api.AgentEventExiting})
			}
			return
		}
	}
}

// exit marks cairn-init as ending; self says it ends by itself (not at
// cairnd's request). The events streams say so and end.
func (s *server) exit(self bool) {
	s.exitOnce.Do(func() {
		s.selfExit.Store(self)
		close(s.exiting)
	})
}
