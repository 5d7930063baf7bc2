package sandbox

import (
	"context"
	"log/slog"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// watch follows a running instance of sandbox sb until inst.close: the
// runtime's watch of its processes (pidfds of the runsc sandbox and gofer
// processes, so a death is seen the moment it happens, not by polling) and
// cairn-init's events (OOM kills; its own exit). A death goes to r.died,
// which decides whether it was a crash: the instance may have been taken
// out of Instances on purpose first (stop, restore in place), and then it
// is not.
func (r *runner) watch(sb metadata.Sandbox, inst *instance) {
	ctx, cancel := context.WithCancel(context.Background())
	inst.unwatch = cancel
	dead, err := r.cfg.Runtime.Watch(ctx, inst.container)
	if err != nil {
		// Without a watch the sandbox still runs; a death is then found
		// by the next exec (S10 once cairn-init stays away) or restart.
		slog.Warn("cannot watch the sandbox's processes", "sandbox", sb.Name, "container", inst.container, "err", err)
	} else {
		go func() {
			if reason, ok := <-dead; ok && r.died != nil {
				r.died(sb, inst, reason)
			}
		}()
	}
	go inst.agent.Events(ctx, func(ev api.AgentEvent) {
		switch ev.Kind {
		case api.AgentEventOOMKill:
			if ev.OOMKill != nil && r.oomKilled != nil {
				r.oomKilled(sb, *ev.OOMKill)
			}
		case api.AgentEventExiting:
			inst.selfExit.Store(true)
		}
	})
}
