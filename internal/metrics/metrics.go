// Package metrics is cairnd's Prometheus instrumentation: one registry
// and the instruments in it, made once by the daemon and handed to the
// parts that observe (the sandbox manager, the off-site queue, the API
// server) through their Config or Deps, each as the small observer
// interface that part defines. Nothing registers itself: every metric is
// listed in New. Handler serves the registry in the Prometheus text
// format; cairnd mounts it at GET /metrics on its unix socket.
//
// What is measured where, and what each metric means: docs/metrics.md.
// Label values are bounded sets (a trigger, a route pattern, a status, an
// error code), never a name or a raw path.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// States counts sandboxes by the state the API shows (running, stopped,
// crashed, and the states of work in progress: creating, restoring…),
// read when Prometheus scrapes.
type States interface {
	SandboxStates(ctx context.Context) (map[string]int, error)
}

// Lags says, per account, how far its off-site copies are behind its
// checkpoints, read when Prometheus scrapes: the age of the oldest
// checkpoint not yet held by every location, 0 when all are. ok is false
// when off-site copies are off.
type Lags interface {
	OffsiteLag(ctx context.Context) (account string, lag time.Duration, ok bool, err error)
}

// Sources are what the scrape-time metrics read; a nil one is left out.
type Sources struct {
	States States
	Lags   func() []Lags // every account's, read at each scrape
}

// scrapeTimeout bounds what one scrape reads from the store.
const scrapeTimeout = 5 * time.Second

// Buckets, in seconds. A pause is a few milliseconds (a disk checkpoint)
// to seconds (a memory one); a checkpoint or a restore takes milliseconds
// to minutes (a memory image, a fetch from off-site); a request
// microseconds to seconds.
var (
	pauseBuckets   = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	workBuckets    = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	requestBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
)

// Metrics is cairnd's registry and its instruments. Its methods are safe
// for concurrent use, and do nothing on a nil *Metrics.
type Metrics struct {
	reg *prometheus.Registry

	checkpoints        *prometheus.CounterVec
	checkpointFailures *prometheus.CounterVec
	checkpointSeconds  *prometheus.HistogramVec
	pauseSeconds       *prometheus.HistogramVec
	restoreSeconds     *prometheus.HistogramVec
	restoreFailures    *prometheus.CounterVec
	uploadBytes        prometheus.Counter
	uploads            *prometheus.CounterVec
	requestSeconds     *prometheus.HistogramVec
	requests           *prometheus.CounterVec
}

// New makes the registry with every metric of cairnd (version is its
// build's), reading src at each scrape.
func New(version string, src Sources) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_checkpoints_total",
			Help: "Checkpoints taken, by trigger (manual, interval, stop, restart, fork, delete, restore) and kind (disk, memory).",
		}, []string{"trigger", "kind"}),
		checkpointFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_checkpoint_failures_total",
			Help: "Checkpoints that could not be taken, by trigger and error code (L04: the disk limit, K01: pause or snapshot failed…).",
		}, []string{"trigger", "code"}),
		checkpointSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_checkpoint_duration_seconds",
			Help:    "How long taking a checkpoint took (quiesce, pause, snapshot, memory image), by kind.",
			Buckets: workBuckets,
		}, []string{"kind"}),
		pauseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_checkpoint_pause_seconds",
			Help:    "How long a running sandbox was paused for a checkpoint, by kind.",
			Buckets: pauseBuckets,
		}, []string{"kind"}),
		restoreSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_restore_duration_seconds",
			Help:    "How long a successful restore took, by mode (in_place, new) and source of the disk (local, offsite).",
			Buckets: workBuckets,
		}, []string{"mode", "source"}),
		restoreFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_restore_failures_total",
			Help: "Restores that failed, by mode (in_place, new) and source of the disk (local, offsite).",
		}, []string{"mode", "source"}),
		uploadBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cairn_offsite_upload_bytes_total",
			Help: "Bytes checkpoint uploads stored in the off-site locations (compressed and encrypted, summed over locations).",
		}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_offsite_uploads_total",
			Help: "Checkpoint uploads to the off-site locations that ended, by outcome (ok, failed).",
		}, []string{"outcome"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_api_request_duration_seconds",
			Help:    "Time to the response's header, by API (host: cairnd's socket and listener; sandbox: a management socket) and route pattern. For streams and upgrades, the time to their start.",
			Buckets: requestBuckets,
		}, []string{"api", "route"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_api_requests_total",
			Help: "API requests answered, by API, route pattern, HTTP status and error code (\"\" for none).",
		}, []string{"api", "route", "status", "code"}),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "cairn_build_info", Help: "cairnd's version, as a label; always 1.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	build.Set(1)
	m.reg.MustRegister(
		m.checkpoints, m.checkpointFailures, m.checkpointSeconds, m.pauseSeconds,
		m.restoreSeconds, m.restoreFailures, m.uploadBytes, m.uploads,
		m.requestSeconds, m.requests, build,
		&scraped{src: src},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics, if the scraper asks). It can be mounted on any mux.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog: errorLog{}, ErrorHandling: promhttp.ContinueOnError, Timeout: 2 * scrapeTimeout,
	})
}

// Registry is the registry itself (for tests, and to gather in process).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func kind(memory bool) string {
	if memory {
		return "memory"
	}
	return "disk"
}

// CheckpointTaken counts a checkpoint with trigger, and observes how long
// it took and, for a running sandbox, how long it was paused.
func (m *Metrics) CheckpointTaken(trigger string, memory, running bool, took, paused time.Duration) {
	if m == nil {
		return
	}
	k := kind(memory)
	m.checkpoints.WithLabelValues(trigger, k).Inc()
	m.checkpointSeconds.WithLabelValues(k).Observe(took.Seconds())
	if running {
		m.pauseSeconds.WithLabelValues(k).Observe(paused.Seconds())
	}
}

// CheckpointFailed counts a checkpoint with trigger that failed with the
// error code code.
func (m *Metrics) CheckpointFailed(trigger, code string) {
	if m == nil {
		return
	}
	m.checkpointFailures.WithLabelValues(trigger, code).Inc()
}

// Restored observes a restore (mode in_place or new, its disk from source
// local or offsite) that took took; failed ones are only counted.
func (m *Metrics) Restored(mode, source string, took time.Duration, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.restoreFailures.WithLabelValues(mode, source).Inc()
		return
	}
	m.restoreSeconds.WithLabelValues(mode, source).Observe(took.Seconds())
}

// Uploaded counts an upload that ended and the bytes it stored (a failed
// upload may have stored some).
func (m *Metrics) Uploaded(bytes int64, err error) {
	if m == nil {
		return
	}
	if bytes > 0 {
		m.uploadBytes.Add(float64(bytes))
	}
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	m.uploads.WithLabelValues(outcome).Inc()
}

// Request observes one API request: which API, its route pattern
// ("GET /v1/sandboxes/{name}"), its HTTP status, its error code ("" for
// none) and the time to its response's header.
func (m *Metrics) Request(api, route string, status int, code string, took time.Duration) {
	if m == nil {
		return
	}
	m.requestSeconds.WithLabelValues(api, route).Observe(took.Seconds())
	m.requests.WithLabelValues(api, route, strconv.Itoa(status), code).Inc()
}

// scraped is the collector of what is read at scrape time.
type scraped struct{ src Sources }

var (
	sandboxesDesc = prometheus.NewDesc("cairn_sandboxes",
		"Sandboxes by the state the API shows (running, stopped, crashed, creating, restoring…).", []string{"state"}, nil)
	lagDesc = prometheus.NewDesc("cairn_offsite_lag_seconds",
		"How far an account's off-site copies are behind its checkpoints: the age of the oldest checkpoint not yet held by every location; 0 when all are.",
		[]string{"account"}, nil)
)

func (c *scraped) Describe(ch chan<- *prometheus.Desc) {
	ch <- sandboxesDesc
	ch <- lagDesc
}

func (c *scraped) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if c.src.States != nil {
		states, err := c.src.States.SandboxStates(ctx)
		if err != nil {
			slog.Warn("metrics: count sandboxes by state", "err", err)
			ch <- prometheus.NewInvalidMetric(sandboxesDesc, err)
		}
		for state, n := range states {
			ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), state)
		}
	}
	var lags []Lags
	if c.src.Lags != nil {
		lags = c.src.Lags()
	}
	for _, l := range lags {
		account, lag, ok, err := l.OffsiteLag(ctx)
		if err != nil {
			slog.Warn("metrics: off-site lag", "err", err)
			ch <- prometheus.NewInvalidMetric(lagDesc, err)
			continue
		}
		if ok {
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, lag.Seconds(), account)
		}
	}
}

// errorLog sends promhttp's errors to slog.
type errorLog struct{}

func (errorLog) Println(v ...any) { slog.Warn("metrics: serve", "err", v) }
