package build

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

func TestParseLimits(t *testing.T) {
	host := Limits{MemoryBytes: 8 << 30, CPUs: 4, StepTimeout: 6 * time.Hour}
	for _, tc := range []struct {
		memory  string
		cpus    float64
		timeout string
		max     Limits
		want    Limits
		bad     string // the flag a V02 names
	}{
		{max: host, want: Limits{2 << 30, 4, 30 * time.Minute}},
		{memory: "512M", cpus: 1.5, timeout: "2s", max: host, want: Limits{512 << 20, 1.5, 2 * time.Second}},
		{memory: "8G", cpus: 4, timeout: "6h", max: host, want: Limits{8 << 30, 4, 6 * time.Hour}},
		// Defaults above the host's caps are the caps.
		{max: Limits{1 << 30, 1, 10 * time.Minute}, want: Limits{1 << 30, 1, 10 * time.Minute}},
		{memory: "9G", max: host, bad: "--memory"},
		{memory: "10M", max: host, bad: "--memory"},
		{memory: "lots", max: host, bad: "--memory"},
		{cpus: 5, max: host, bad: "--cpus"},
		{cpus: -1, max: host, bad: "--cpus"},
		{cpus: 0.001, max: host, bad: "--cpus"},
		{timeout: "7h", max: host, bad: "--step-timeout"},
		{timeout: "0s", max: host, bad: "--step-timeout"},
		{timeout: "1.5s", max: host, bad: "--step-timeout"},
		{timeout: "soon", max: host, bad: "--step-timeout"},
	} {
		got, err := ParseLimits(tc.memory, tc.cpus, tc.timeout, tc.max)
		if tc.bad != "" {
			if errdefs.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParseLimits(%q, %g, %q) = %v, want V02 naming %s", tc.memory, tc.cpus, tc.timeout, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseLimits(%q, %g, %q) = %+v, %v; want %+v", tc.memory, tc.cpus, tc.timeout, got, err, tc.want)
		}
	}
	if h := HostLimits(Limits{}, 16<<30); h.MemoryBytes != 16<<30 || h.CPUs < 1 || h.StepTimeout != api.MaxStepTimeout {
		t.Errorf("host limits %+v", h)
	}
	if h := HostLimits(Limits{MemoryBytes: 1 << 30, CPUs: 0.5, StepTimeout: time.Hour}, 16<<30); h != (Limits{1 << 30, 0.5, time.Hour}) {
		t.Errorf("capped host limits %+v", h)
	}
	if h := HostLimits(Limits{MemoryBytes: 64 << 30, CPUs: 4096}, 16<<30); h.MemoryBytes != 16<<30 || h.CPUs > 1024 || h.CPUs < 1 {
		t.Errorf("caps above the host's: %+v", h)
	}
}

// A RUN step gets the build's memory and CPUs; one that outlives its time
// limit is ended, I11 naming its line and the limit, quickly; one whose
// runner ended it for its memory is I12. Either way nothing of the step is
// left: no work subvolume, no cache entry (the steps before it stay
// cached).
func TestStepLimits(t *testing.T) {
	tb := newTestBuilder(t)
	lim := Limits{MemoryBytes: 256 << 20, CPUs: 0.5, StepTimeout: 300 * time.Millisecond}
	withLimits := func(r *Request) { r.Limits = lim }

	if _, err := tb.build(1, "FROM base\nRUN ok\n", nil, withLimits); err != nil {
		t.Fatal(err)
	}
	if s := tb.runner.last(); s.MemoryBytes != lim.MemoryBytes || s.CPUs != lim.CPUs {
		t.Errorf("the step ran with %d bytes and %g CPUs, want %+v", s.MemoryBytes, s.CPUs, lim)
	}
	if _, err := tb.build(1, "FROM base\nRUN other\n", nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := tb.runner.last(); s.MemoryBytes != api.DefaultBuildMemoryBytes || s.CPUs < 1 {
		t.Errorf("without limits, the step ran with %d bytes and %g CPUs", s.MemoryBytes, s.CPUs)
	}
	before, _ := tb.cache.Entries()

	tb.runner.run = func(ctx context.Context, spec RunSpec) (int, error) {
		if spec.Args[len(spec.Args)-1] == "first" {
			return 0, nil
		}
		<-ctx.Done() // a command that never ends by itself
		return 0, ctx.Err()
	}
	start := time.Now()
	out, err := tb.build(1, "FROM base\nRUN first\nRUN sleep 30\n", nil, withLimits)
	if errdefs.CodeOf(err) != api.CodeStepTimeout || !strings.Contains(err.Error(), "Dockerfile:3") || !strings.Contains(err.Error(), "300ms") {
		t.Fatalf("a step past its time: %v (%s), want I11 naming line 3 and the limit\n%s", err, errdefs.CodeOf(err), strings.Join(out, "\n"))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the step was ended after %v", d)
	}
	tb.leftovers()
	after, _ := tb.cache.Entries()
	if len(after) != len(before)+1 {
		t.Errorf("%d cache entries after the timed-out build, want %d (the first RUN's alone)", len(after), len(before)+1)
	}

	tb.runner.run = func(ctx context.Context, spec RunSpec) (int, error) {
		return 0, fmt.Errorf("%w: the host's memory cgroup reached its limit", ErrOutOfMemory)
	}
	_, err = tb.build(1, "FROM base\nRUN first\nRUN eat\n", nil, withLimits)
	if errdefs.CodeOf(err) != api.CodeStepOutOfMemory || !strings.Contains(err.Error(), "Dockerfile:3") || !strings.Contains(err.Error(), "256MiB") {
		t.Fatalf("a step out of memory: %v (%s), want I12 naming line 3 and the limit", err, errdefs.CodeOf(err))
	}
	tb.leftovers()
	if got, _ := tb.cache.Entries(); len(got) != len(after) {
		t.Errorf("%d cache entries after the out-of-memory build, want %d", len(got), len(after))
	}

	// The build's own context ending is not the step's time limit.
	ctx, cancel := context.WithCancel(context.Background())
	tb.runner.run = func(rctx context.Context, spec RunSpec) (int, error) {
		cancel()
		<-rctx.Done()
		return 0, rctx.Err()
	}
	_, err = tb.Build(ctx, Request{Account: 1, Context: t.TempDir(), Dockerfile: []byte("FROM base\nRUN x\n"), Name: "img", Network: "none", Limits: lim}, nil)
	if err != context.Canceled {
		t.Errorf("a cancelled build: %v", err)
	}
	tb.leftovers()
}
