package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type states map[string]int

func (s states) SandboxStates(context.Context) (map[string]int, error) { return s, nil }

type lag struct {
	d   time.Duration
	ok  bool
	err error
}

func (l lag) OffsiteLag(context.Context) (string, time.Duration, bool, error) {
	return "default", l.d, l.ok, l.err
}

// scrape serves m's handler once and parses what it answers as the
// Prometheus text format.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("not the Prometheus text format: %v", err)
	}
	return fams
}

// value is the value of the sample of family name whose labels include
// want (counter, gauge, or a histogram's count); -1 if there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func TestMetricsExposition(t *testing.T) {
	m := New("v-test", Sources{States: states{"running": 2, "stopped": 0, "restoring": 1}, Lags: func() []Lags { return []Lags{lag{d: 90 * time.Second, ok: true}} }})
	m.CheckpointTaken("manual", false, true, 40*time.Millisecond, 3*time.Millisecond)
	m.CheckpointTaken("manual", true, true, 900*time.Millisecond, 500*time.Millisecond)
	m.CheckpointTaken("stop", false, false, 10*time.Millisecond, 0) // stopped: no pause
	m.CheckpointFailed("interval", "L04")
	m.Restored("in_place", "local", time.Second, nil)
	m.Restored("new", "offsite", time.Second, errors.New("no"))
	m.Uploaded(1<<20, nil)
	m.Uploaded(10, errors.New("location down"))
	m.Request("host", "GET /v1/sandboxes/{name}", 404, "S01", time.Millisecond)
	m.Request("host", "GET /v1/sandboxes/{name}", 200, "", time.Millisecond)

	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cairn_checkpoints_total", map[string]string{"trigger": "manual", "kind": "disk"}, 1},
		{"cairn_checkpoints_total", map[string]string{"trigger": "manual", "kind": "memory"}, 1},
		{"cairn_checkpoints_total", map[string]string{"trigger": "stop"}, 1},
		{"cairn_checkpoint_failures_total", map[string]string{"trigger": "interval", "code": "L04"}, 1},
		{"cairn_checkpoint_duration_seconds", map[string]string{"kind": "disk"}, 2},
		{"cairn_checkpoint_pause_seconds", map[string]string{"kind": "disk"}, 1},
		{"cairn_checkpoint_pause_seconds", map[string]string{"kind": "memory"}, 1},
		{"cairn_restore_duration_seconds", map[string]string{"mode": "in_place", "source": "local"}, 1},
		{"cairn_restore_failures_total", map[string]string{"mode": "new", "source": "offsite"}, 1},
		{"cairn_offsite_upload_bytes_total", nil, 1<<20 + 10},
		{"cairn_offsite_uploads_total", map[string]string{"outcome": "failed"}, 1},
		{"cairn_api_requests_total", map[string]string{"route": "GET /v1/sandboxes/{name}", "status": "404", "code": "S01"}, 1},
		{"cairn_api_request_duration_seconds", map[string]string{"api": "host", "route": "GET /v1/sandboxes/{name}"}, 2},
		{"cairn_sandboxes", map[string]string{"state": "running"}, 2},
		{"cairn_sandboxes", map[string]string{"state": "stopped"}, 0},
		{"cairn_sandboxes", map[string]string{"state": "restoring"}, 1},
		{"cairn_offsite_lag_seconds", map[string]string{"account": "default"}, 90},
		{"cairn_build_info", map[string]string{"version": "v-test"}, 1},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if fams["go_goroutines"] == nil || fams["process_open_fds"] == nil {
		t.Error("the Go and process collectors are missing")
	}
}

// A source that fails leaves its metric out of the scrape, not the rest;
// off-site copies that are off have no lag.
func TestMetricsScrapeSurvivesASource(t *testing.T) {
	m := New("v", Sources{Lags: func() []Lags { return []Lags{lag{err: errors.New("store gone")}, lag{ok: false}} }})
	m.CheckpointTaken("manual", false, true, time.Millisecond, time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if value(fams, "cairn_checkpoints_total", nil) != 1 {
		t.Errorf("a failing source took the other metrics with it: %d", rec.Code)
	}
	if fams["cairn_offsite_lag_seconds"] != nil {
		t.Errorf("lag reported: %v", fams["cairn_offsite_lag_seconds"])
	}
}

// A nil *Metrics observes nothing, and does not panic.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.CheckpointTaken("manual", false, true, 0, 0)
	m.CheckpointFailed("manual", "K01")
	m.Restored("in_place", "local", 0, nil)
	m.Uploaded(1, nil)
	m.Request("host", "GET /v1", 200, "", 0)
}
