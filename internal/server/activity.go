package server

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Activity is the sandboxes' event streams (package activity's Hub), by
// sandbox id.
type Activity interface {
	// Since returns the events of sandbox id kept after sequence number
	// seq, oldest first.
	Since(id string, seq int64) ([]api.SandboxActivity, <-chan struct{})
	// Follow calls fn with the events after seq and each new one, until
	// ctx ends, fn fails or the sandbox's deleted event was passed.
	Follow(ctx context.Context, id string, seq int64, fn func(api.SandboxActivity) error) error
}

// sandboxEvents answers a sandbox's event stream as NDJSON, one
// api.SandboxActivity a line: those kept after ?since=SEQ (default: all
// kept), and with ?follow=true each new one as it comes, with a blank line
// now and then while nothing happens, until the client goes, cairnd stops
// or the sandbox is deleted.
func (s *Server) sandboxEvents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var since int64
	if v := q.Get("since"); v != "" {
		n, err := bounds.ParseInt("since", v, 0, math.MaxInt64)
		if err != nil {
			return err
		}
		since = n
	}
	follow := false
	switch q.Get("follow") {
	case "", "false":
	case "true":
		follow = true
	default:
		return errdefs.New(api.CodeInvalidArgument, "invalid follow %q: want true or false", q.Get("follow"))
	}
	sb, err := s.views.Get(r.Context(), s.account(r), r.PathValue("name"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", ndjson)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	send := func(ev api.SandboxActivity) error {
		if err := enc.Encode(ev); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	if !follow {
		evs, _ := s.activity.Since(sb.ID, since)
		for _, ev := range evs {
			if send(ev) != nil {
				break
			}
		}
		return nil
	}
	// A follower waits for events that may never come: a blank line
	// every keepaliveEvery finds a client that went (its write fails),
	// and cairnd's shutdown ends every follow at once, as the end of its
	// token (revoked, expired: a long session) does, said in the last
	// line.
	if flusher != nil {
		flusher.Flush() // the client knows the stream is open before any event
	}
	session, done := s.openSession(r)
	defer done()
	s.followActivity(session, w, sb.ID, since, send)
	endStream(session, w, enc)
	return nil
}

// followActivity sends sandbox id's events after since and each new one
// until ctx ends, cairnd stops, the client goes or the sandbox's stream
// ends, with a keepalive line now and then; nothing writes once it
// returns.
func (s *Server) followActivity(ctx context.Context, w http.ResponseWriter, id string, since int64, send func(api.SandboxActivity) error) {
	flusher, _ := w.(http.Flusher)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: nothing writes once this returns
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	var mu sync.Mutex
	locked := func(ev api.SandboxActivity) error {
		mu.Lock()
		defer mu.Unlock()
		return send(ev)
	}
	wg.Go(func() {
		t := time.NewTicker(keepaliveEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			mu.Lock()
			_, err := w.Write([]byte("\n"))
			if err == nil && flusher != nil {
				flusher.Flush()
			}
			mu.Unlock()
			if err != nil {
				cancel()
				return
			}
		}
	})
	// Once the header is sent, an error can only end the stream early.
	s.activity.Follow(ctx, id, since, locked)
}

// keepaliveEvery is how often a followed event stream that has nothing
// to say sends a blank line.
var keepaliveEvery = 15 * time.Second

// StopFollowers ends every followed event stream; for the HTTP server's
// RegisterOnShutdown, so that a shutdown does not wait for them.
func (s *Server) StopFollowers() { s.stopFollowers() }
