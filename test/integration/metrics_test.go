package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs /metrics from d's unix socket and parses it as the
// Prometheus text format.
func (d *daemon) scrape() map[string]*dto.MetricFamily {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	text, err := d.client.Metrics(ctx)
	if err != nil {
		d.t.Fatalf("GET /metrics: %v", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		d.t.Fatalf("/metrics is not the Prometheus text format: %v\n%s", err, text)
	}
	return fams
}

// sum adds up the samples of family name whose labels include want
// (counters and gauges their value, histograms their count).
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var total float64
	f := fams[name]
	if f == nil {
		return 0
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
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

// /metrics on the unix socket is the Prometheus text format; its
// checkpoint counter moves by exactly one per checkpoint (and so do the
// durations and pause windows observed), a restore in place is observed
// with the safety checkpoint it takes, uploads count their bytes, the
// sandbox shows by state, and API requests are labelled by route
// pattern, never by a sandbox's name. GET /v1/openapi.json answers the
// document.
func TestMetrics(t *testing.T) {
	d := startDaemon(t)
	d.create("metered")
	manual := map[string]string{"trigger": "manual"}

	before := d.scrape()
	if got := sum(before, "cairn_sandboxes", map[string]string{"state": "running"}); got != 1 {
		t.Errorf("cairn_sandboxes{state=running} = %v, want 1", got)
	}
	base := sum(before, "cairn_checkpoints_total", nil)
	baseManual := sum(before, "cairn_checkpoints_total", manual)
	basePause := sum(before, "cairn_checkpoint_pause_seconds", nil)
	for i := 1; i <= 3; i++ {
		d.mustCLI("checkpoint", "create", "metered")
		now := d.scrape()
		if got := sum(now, "cairn_checkpoints_total", manual) - baseManual; got != float64(i) {
			t.Fatalf("after %d checkpoints the manual counter moved by %v", i, got)
		}
		if got := sum(now, "cairn_checkpoints_total", nil) - base; got != float64(i) {
			t.Fatalf("after %d checkpoints the checkpoint counter moved by %v", i, got)
		}
		if got := sum(now, "cairn_checkpoint_pause_seconds", map[string]string{"kind": "disk"}) - basePause; got != float64(i) {
			t.Errorf("after %d checkpoints of a running sandbox, %v pause windows", i, got)
		}
	}
	after := d.scrape()
	if got := sum(after, "cairn_checkpoint_duration_seconds", map[string]string{"kind": "disk"}); got < 3 {
		t.Errorf("checkpoint durations observed: %v, want at least 3", got)
	}
	if got := sum(after, "cairn_checkpoint_failures_total", nil); got != 0 {
		t.Errorf("checkpoint failures: %v", got)
	}

	// A restore in place: its duration, and its safety checkpoint (trigger
	// restore) in the counter.
	d.mustCLI("restore", "metered", "v0", "--wait")
	restored := d.scrape()
	if got := sum(restored, "cairn_restore_duration_seconds", map[string]string{"mode": "in_place", "source": "local"}); got != 1 {
		t.Errorf("restore durations observed: %v, want 1", got)
	}
	if got := sum(restored, "cairn_checkpoints_total", map[string]string{"trigger": "restore"}); got != 1 {
		t.Errorf("safety checkpoints counted: %v, want 1", got)
	}
	if got := sum(restored, "cairn_checkpoints_total", nil) - base; got != 4 {
		t.Errorf("after 3 checkpoints and a restore the counter moved by %v, want 4", got)
	}

	// The requests, by route pattern.
	if got := sum(restored, "cairn_api_requests_total", map[string]string{"api": "host", "route": "POST /v1/sandboxes/{name}/checkpoint", "status": "202"}); got != 3 {
		t.Errorf("checkpoint requests counted: %v, want 3", got)
	}
	for _, m := range restored["cairn_api_requests_total"].GetMetric() {
		for _, l := range m.Label {
			if strings.Contains(l.GetValue(), "metered") {
				t.Errorf("a label holds the sandbox's name: %s=%q", l.GetName(), l.GetValue())
			}
		}
	}

	// Uploads go on in the background: their bytes, and a lag that goes
	// back to 0 once every checkpoint is off-site.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		now := d.scrape()
		bytes := sum(now, "cairn_offsite_upload_bytes_total", nil)
		lagFam := now["cairn_offsite_lag_seconds"]
		if lagFam == nil {
			t.Fatal("no cairn_offsite_lag_seconds with off-site copies on")
		}
		if bytes > 0 && sum(now, "cairn_offsite_lag_seconds", map[string]string{"account": "default"}) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("uploads: %v bytes, lag %v s after 2 minutes", bytes, sum(now, "cairn_offsite_lag_seconds", nil))
		}
		time.Sleep(time.Second)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	doc, err := d.client.OpenAPI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &parsed); err != nil || !strings.HasPrefix(parsed.OpenAPI, "3.") || parsed.Paths["/v1/sandboxes/{name}/checkpoint"] == nil {
		t.Errorf("GET /v1/openapi.json: %v, openapi %q, %d paths", err, parsed.OpenAPI, len(parsed.Paths))
	}
}

// make install with DESTDIR puts the binaries side by side, the systemd
// unit (KillMode=process: sandboxes outlive cairnd) and the completions
// where they belong, and systemd-analyze accepts the unit.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	dest := t.TempDir()
	// -o build: install what the run tests (binDir), without building.
	cmd := exec.Command("make", "-o", "build", "install", "DESTDIR="+dest, "INSTALL_FROM="+binDir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{
		"usr/local/bin/cairn", "usr/local/bin/cairnd", "usr/local/bin/cairn-init", "usr/local/bin/cairn-env",
		"usr/local/lib/systemd/system/cairnd.service", "etc/default/cairnd",
		"usr/share/bash-completion/completions/cairn", "usr/share/zsh/vendor-completions/_cairn",
		"usr/share/fish/vendor_completions.d/cairn.fish",
	} {
		st, err := os.Stat(filepath.Join(dest, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s not installed: %v", f, err)
		} else if strings.Contains(f, "/bin/") && st.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable: %v", f, st.Mode())
		}
	}
	unitPath := filepath.Join(dest, "usr/local/lib/systemd/system/cairnd.service")
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/local/bin/cairnd $CAIRND_OPTS", "KillMode=process", "Restart=on-failure", "LimitNOFILE=", "After=network-online.target"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %q:\n%s", want, unit)
		}
	}
	if comp, _ := os.ReadFile(filepath.Join(dest, "usr/share/bash-completion/completions/cairn")); !bytes.Contains(comp, []byte("__start_cairn")) {
		t.Errorf("the bash completion is not cobra's for cairn")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze not installed: the unit is not verified")
		return
	}
	// Verified as it would run, its ExecStart pointing at the staged cairnd.
	staged := filepath.Join(t.TempDir(), "cairnd.service")
	os.WriteFile(staged, bytes.ReplaceAll(unit, []byte("=/usr/local/bin/"), []byte("="+dest+"/usr/local/bin/")), 0o644)
	if out, err := exec.Command("systemd-analyze", "verify", staged).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	uninstall := exec.Command("make", "uninstall", "DESTDIR="+dest)
	uninstall.Dir = root
	if out, err := uninstall.CombinedOutput(); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dest, "usr/local/bin/cairnd")); err == nil {
		t.Error("make uninstall left cairnd")
	}
}
