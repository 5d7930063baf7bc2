package client

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// serveEvents serves GET /v1/operations/{id}/events for the operations of
// reg as cairnd does (NDJSON, one event per line, flushed) and returns the
// socket.
func serveEvents(t *testing.T, reg *operation.Registry) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/operations/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		op, err := reg.Get(r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		enc := json.NewEncoder(w)
		op.Follow(r.Context(), func(ev api.Event) error {
			if err := enc.Encode(ev); err != nil {
				return err
			}
			w.(http.Flusher).Flush()
			return nil
		})
	})
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestFollowDecodesProgress: the structured side of events reaches the
// callback, and unstructured events come without it.
func TestFollowDecodesProgress(t *testing.T) {
	reg := operation.NewRegistry(t.Context(), time.Now)
	op := reg.Start("test", "sandbox/web", func(ctx context.Context, op *operation.Op) (any, error) {
		op.Progress("legacy line")
		op.Report(api.Progress{Phase: api.PhaseVerify, Done: 7, Unit: api.UnitObjects, Locations: []api.LocationProgress{
			{Name: "a", State: api.LocationDone, Done: 7},
			{Name: "b", State: api.LocationUnavailable, Error: "connection refused"},
		}}, "Verified location a")
		return map[string]string{"ok": "yes"}, nil
	})
	c := New(serveEvents(t, reg))
	var evs []api.Event
	raw, err := c.Follow(t.Context(), op.Info(), func(ev api.Event) { evs = append(evs, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"ok":"yes"}` {
		t.Errorf("result %s", raw)
	}
	if len(evs) != 2 || evs[0].Data != "legacy line" || evs[0].Progress != nil || evs[1].Data != "Verified location a" {
		t.Fatalf("events %+v", evs)
	}
	p := evs[1].Progress
	if p == nil || p.Phase != api.PhaseVerify || p.Done != 7 || p.Unit != api.UnitObjects || len(p.Locations) != 2 ||
		p.Locations[1] != (api.LocationProgress{Name: "b", State: api.LocationUnavailable, Error: "connection refused"}) {
		t.Fatalf("progress %+v", p)
	}
}
