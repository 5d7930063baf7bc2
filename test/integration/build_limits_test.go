package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// Each RUN step of a build runs within its memory, CPUs and time: the
// guest sees the step's memory as its total and its CPUs; a step past
// its --step-timeout is ended at once with I11; one that allocates past
// its --memory is ended with I12 instead of taking the host's memory or
// hanging; cairnd's caps bound what a build may ask, and the defaults.
// A failed step leaves no work subvolume, container, network, cgroup,
// cache entry or image; the steps before it stay cached.
func TestImageBuildStepLimits(t *testing.T) {
	d := startDaemon(t, "--build-max-memory", "1G", "--build-max-step-timeout", "10m")

	// Within its limits: the guest's total memory is the step's, and its
	// host cgroup has the step's CPU quota (the default memory is 2G, at
	// most the cap).
	dir := t.TempDir()
	writeContext(t, dir, map[string]string{"Dockerfile": "FROM busybox\nRUN grep MemTotal /proc/meminfo; sleep 3\n"})
	var errOut string
	var code int
	quotas := map[string]string{}
	ids := d.buildContainersDuring(func() {
		_, errOut, code = d.cli("", "image", "build", dir, "-t", "limited", "--network", "none", "--memory", "128M", "--cpus", "0.5")
	}, func(id string) {
		q, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", id, "cpu.cfs_quota_us"))
		quotas[id] = strings.TrimSpace(string(q))
		if err != nil {
			quotas[id] = err.Error()
		}
	})
	if code != 0 {
		t.Fatalf("build within its limits: exit %d\n%s", code, errOut)
	}
	for id, q := range quotas {
		if q != "50000" {
			t.Errorf("the step %s's CPU quota: %s, want 50000 µs a period (0.5 CPUs)", id, q)
		}
	}
	if len(ids) != 1 {
		t.Errorf("saw build containers %q, want one", ids)
	}
	if !strings.Contains(errOut, "131072 kB") || !strings.Contains(errOut, "at most 128MiB of memory, 0.5 CPUs and 10m0s each") {
		t.Errorf("the step did not see 128 MiB, or the build did not say its limits:\n%s", errOut)
	}
	writeContext(t, dir, map[string]string{"Dockerfile": "FROM busybox\nRUN grep MemTotal /proc/meminfo\n"})
	if _, errOut, code := d.cli("", "image", "build", dir, "-t", "capped", "--network", "none"); code != 0 || !strings.Contains(errOut, "1048576 kB") {
		t.Errorf("a build asking nothing, under a 1G cap: exit %d, want a step of 1 GiB\n%s", code, errOut)
	}
	for _, args := range [][]string{{"--memory", "2G"}, {"--step-timeout", "11m"}, {"--cpus", "1000"}} {
		out, _, code := d.cli("", append([]string{"--json", "image", "build", dir, "-t", "toomuch", "--network", "none"}, args...)...)
		var eb api.ErrorBody
		if code == 0 || json.Unmarshal([]byte(out), &eb) != nil || eb.Error.Code != api.CodeInvalidArgument || !strings.Contains(eb.Error.Message, args[0]) {
			t.Errorf("build %v over the cap: exit %d, %s", args, code, out)
		}
	}

	cacheEntries := func() int {
		es, _ := os.ReadDir(filepath.Join(d.dataDir, "pool", "cache"))
		return len(es)
	}
	failed := func(name, dockerfile string, wantCode string, within time.Duration, says []string, args ...string) {
		t.Helper()
		dir := t.TempDir()
		writeContext(t, dir, map[string]string{"Dockerfile": dockerfile})
		before := cacheEntries()
		start := time.Now()
		var out, errOut string
		var code int
		ids := d.buildContainersDuring(func() {
			out, errOut, code = d.cli("", append([]string{"--json", "image", "build", dir, "-t", name, "--network", "none"}, args...)...)
		}, nil)
		took := time.Since(start)
		var eb api.ErrorBody
		if code == 0 || json.Unmarshal([]byte(out), &eb) != nil || eb.Error.Code != wantCode {
			t.Fatalf("%s: exit %d, %s, want %s\n%s", name, code, out, wantCode, errOut)
		}
		for _, s := range says {
			if !strings.Contains(eb.Error.Message, s) {
				t.Errorf("%s: the message %q does not say %q", name, eb.Error.Message, s)
			}
		}
		if took > within {
			t.Errorf("%s: the build failed after %v, want within %v", name, took, within)
		}
		if code := d.errorCode("image", "info", name); code != api.CodeNoImage {
			t.Errorf("%s: image after the failed build: %s", name, code)
		}
		if n := cacheEntries(); n != before+1 {
			t.Errorf("%s: %d cache entries, was %d: want one more (the step before the failed one)", name, n, before)
		}
		assertNoBuildLeftovers(t, d)
		if nets, _ := os.ReadDir(filepath.Join(d.dataDir, "net")); slices.ContainsFunc(nets, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), "build-") }) {
			t.Errorf("%s: a build step's network is left: %v", name, nets)
		}
		for _, id := range ids {
			for _, c := range []string{"memory", "cpu"} {
				if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, id)); err == nil {
					t.Errorf("%s: the step's %s cgroup %s is left", name, c, id)
				}
			}
		}
	}

	failed("slow", "FROM busybox\nRUN echo slow > /first\nRUN echo started; sleep 30\n", api.CodeStepTimeout, 20*time.Second,
		[]string{"Dockerfile:3", "time limit of 2s", "--step-timeout"}, "--step-timeout", "2s")
	// awk doubles a string until it holds 400 MiB (and its copy).
	failed("hungry", "FROM busybox\nRUN echo hungry > /first\nRUN awk 'BEGIN{s=\"xxxxxxxxxxxxxxxx\"; while(length(s)<400000000) s=s s; print length(s)}'\n",
		api.CodeStepOutOfMemory, 90*time.Second, []string{"Dockerfile:3", "memory limit of 128MiB", "--memory"}, "--memory", "128M")

	// The steps before the failed ones were cached: with the failing
	// step fixed, they are hits.
	dir = t.TempDir()
	writeContext(t, dir, map[string]string{"Dockerfile": "FROM busybox\nRUN echo slow > /first\nRUN echo quick\n"})
	_, errOut, code = d.cli("", "image", "build", dir, "-t", "fixed", "--network", "none", "--step-timeout", "2s")
	if steps := fsSteps(errOut); code != 0 || len(steps) != 2 || !strings.Contains(steps[0], "(cached)") || strings.Contains(steps[1], "(cached)") {
		t.Errorf("after the failures: exit %d, steps %q\n%s", code, steps, errOut)
	}
}

// buildContainersDuring runs fn and returns the build steps' containers
// of d seen meanwhile, calling each (if not nil) once with each new one
// while it runs.
func (d *daemon) buildContainersDuring(fn func(), each func(id string)) []string {
	done := make(chan struct{})
	var seen []string
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			for _, c := range d.containers() {
				if strings.HasPrefix(c, "build-") && !slices.Contains(seen, c) {
					seen = append(seen, c)
					if each != nil {
						each(c)
					}
				}
			}
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	fn()
	close(done)
	<-watched
	return seen
}
