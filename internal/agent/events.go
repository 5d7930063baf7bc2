package agent

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// Events follows cairn-init's events (the events op) until ctx ends or the
// Host closes, calling fn for each, in order, from one goroutine. Across a
// broken connection it opens the stream again on the next one; cairn-init
// then sends its last OOM kill again, which fn sees twice (compare At).
func (h *Host) Events(ctx context.Context, fn func(api.AgentEvent)) {
	for ctx.Err() == nil {
		var res api.AgentResult
		st, err := h.do(ctx, api.AgentRequest{Op: api.AgentOpEvents}, &res)
		if errors.Is(err, ErrClosed) {
			return
		}
		if err == nil {
			stop := context.AfterFunc(ctx, func() { abort(st) })
			for {
				var ev api.AgentEvent
				if err := api.ReadMessage(st, &ev); err != nil {
					break
				}
				fn(ev)
			}
			stop()
			st.Close()
		}
		// The connection broke, or an older cairn-init knows no events
		// op: look again a little later.
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
