package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// The load trial (docs/reliability.md#load): many sandboxes, each with a
// writer appending numbered lines to a file, each checkpointed by a client
// every few seconds for minutes, with the oldest manual checkpoints deleted
// as a user would. It checks that no checkpoint or delete fails, that every
// sandbox answers at the end and its last checkpoint holds the writer's file
// as it was (a whole prefix of numbered lines), and that cairnd's resident
// memory and open descriptors stay flat. `make test` runs a short count;
// `make load-trial` the full one (50 sandboxes, 5 minutes).
const (
	loadDefaultSandboxes = 6
	loadDefaultDuration  = 40 * time.Second
	loadDefaultInterval  = 4 * time.Second
	loadKeep             = 3                // manual checkpoints kept per sandbox
	loadSampleEvery      = 2 * time.Second  // cairnd's RSS and fds
	loadMaxWarmUp        = time.Minute      // the plateau the end is compared with
	loadFDSlack          = 10               // fds the end may hold above the warm-up (plus one a sandbox for the maximum)
	loadRSSSlack         = 32 << 20         // bytes the end's median RSS may hold above the warm-up's…
	loadRSSRatio         = 1.25             // …or this ratio of it, whichever is larger
	loadDeletedFDSlack   = 8                // fds above the start figure once every sandbox is gone
	loadRestoreSamples   = 3                // last checkpoints restored as new sandboxes
	loadExecDeadline     = 30 * time.Second // a sandbox answers exec within this under load
)

// loadWriter appends numbered lines to /root/w.log, five a second,
// carrying on from the file's last line after a restart or a restore, so
// that a whole file is always the lines 1…n with nothing missing. It waits
// with the shell's read on a FIFO nobody writes, not with sleep: fifty
// sandboxes forking sleep five times a second take both cores of the test
// machine on their own (the first full run's lesson).
const loadWriter = `{"name":"writer","cmd":["sh","-c","touch /root/w.log; i=$(wc -l < /root/w.log); rm -f /tmp/tick; mkfifo /tmp/tick; exec 3<>/tmp/tick; while true; do i=$((i+1)); echo \"$i ........................................................................\" >> /root/w.log; read -t 0.2 -u 3 x; done"],"restart":"always"}`

// loadSample is one reading of cairnd's /proc.
type loadSample struct {
	at      time.Duration // since the load started (negative: before)
	rss     int64         // bytes
	fds     int
	threads int
}

// loadCk is one checkpoint create of the run.
type loadCk struct {
	sandbox string
	start   time.Duration // since the load started
	took    time.Duration
	gap     time.Duration // since the start of the sandbox's previous one (0: the first)
	prune   time.Duration // listing and deleting the old ones after it
	paused  float64       // ms
	crash   bool          // crash-consistent: the quiesce did not finish
	err     error
}

func loadEnvInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// loadEnvDuration reads a duration ("5m", "4s") or a number of seconds.
func loadEnvDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration (5m) or seconds", name, v)
	}
	return d
}

// procStatus reads cairnd's RSS and thread count and counts its fds.
func procStatus(pid int) (loadSample, error) {
	var s loadSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			s.rss = kb << 10
		case "Threads:":
			s.threads, _ = strconv.Atoi(f[1])
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(ents)
	return s, nil
}

func TestLoadTrial(t *testing.T) {
	n := loadEnvInt(t, "CAIRN_LOAD_SANDBOXES", loadDefaultSandboxes)
	duration := loadEnvDuration(t, "CAIRN_LOAD_DURATION", loadDefaultDuration)
	interval := loadEnvDuration(t, "CAIRN_LOAD_INTERVAL", loadDefaultInterval)
	warmUp := min(loadMaxWarmUp, duration/4)
	// The pool holds n roots (snapshots of one image), loadKeep+2
	// checkpoints of each and the writer's files: small. The margin is
	// for btrfs's metadata chunks, which every snapshot touches.
	d := startDaemon(t, "--pool-size", fmt.Sprintf("%dG", 8+n/10))
	pid := d.cmd.Process.Pid
	startFigure, err := procStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load trial: %d sandboxes, a checkpoint of each every %v for %v (warm-up %v); cairnd pid %d at start: RSS %s, %d fds, %d threads",
		n, interval, duration, warmUp, pid, mib(startFigure.rss), startFigure.fds, startFigure.threads)

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("load-%02d", i)
	}
	setUp := time.Now()
	loadSetUp(t, d, names)
	t.Logf("set-up: %d sandboxes with a writer in %v", n, time.Since(setUp).Round(time.Millisecond))

	// The load: one goroutine per sandbox, staggered over one interval,
	// and a sampler of cairnd's /proc.
	begin := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu      sync.Mutex
		cks     []loadCk
		deletes int
		delErrs []string
		samples []loadSample
	)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := begin.Add(time.Duration(i) * interval / time.Duration(n))
			prev := time.Duration(-1)
			for {
				if next.Sub(begin) >= duration {
					return
				}
				if wait := time.Until(next); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				} else if ctx.Err() != nil {
					return
				}
				if time.Since(begin) >= duration {
					return
				}
				rec := loadCheckpoint(d, name, begin)
				if prev >= 0 {
					rec.gap = rec.start - prev
				}
				prev = rec.start
				t0 := time.Now()
				dels, derr := loadPrune(d, name)
				rec.prune = time.Since(t0)
				mu.Lock()
				cks = append(cks, rec)
				deletes += dels
				if derr != nil {
					delErrs = append(delErrs, derr.Error())
				}
				mu.Unlock()
				// The next turn is one interval after this one's; a
				// checkpoint that took longer than the interval makes
				// the next start at once (a gap above the interval).
				next = next.Add(interval)
				if now := time.Now(); next.Before(now) {
					next = now
				}
			}
		}()
	}
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(loadSampleEvery)
		defer tick.Stop()
		for {
			s, err := procStatus(pid)
			if err == nil {
				s.at = time.Since(begin)
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	wg.Wait()
	loadEnd := time.Since(begin)
	cancel()
	<-sampled

	// Every create and every delete answered success.
	var failed []string
	for _, c := range cks {
		if c.err != nil {
			failed = append(failed, fmt.Sprintf("%s at %v: %v", c.sandbox, c.start.Round(time.Millisecond), c.err))
		}
	}
	loadReport(t, n, interval, loadEnd, warmUp, startFigure, cks, deletes, samples)
	if len(failed) > 0 {
		t.Errorf("%d of %d checkpoints failed:\n  %s", len(failed), len(cks), strings.Join(failed, "\n  "))
	}
	if len(delErrs) > 0 {
		t.Errorf("%d deletes of old checkpoints failed:\n  %s", len(delErrs), strings.Join(delErrs, "\n  "))
	}
	if want := n * int(duration/interval) / 2; len(cks) < want {
		t.Errorf("%d checkpoints in %v, fewer than half the %d asked for: the machine does not keep up (see the latencies above)", len(cks), loadEnd.Round(time.Second), n*int(duration/interval))
	}
	loadCheckFlat(t, n, samples, warmUp, loadEnd)
	loadCheckLog(t, d)

	// At the end: every sandbox answers exec and its last checkpoint has
	// the writer's file as it was, a prefix of the file it writes on.
	loadCheckEnd(t, d, names)

	// Deleting every sandbox gives back the descriptors.
	for _, name := range names {
		if _, err := d.cliErr("delete", name); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	}
	time.Sleep(loadSampleEvery) // closes that follow the answers
	after, err := procStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after deleting every sandbox: RSS %s, %d fds, %d threads (at start: %s, %d fds, %d threads)",
		mib(after.rss), after.fds, after.threads, mib(startFigure.rss), startFigure.fds, startFigure.threads)
	if after.fds > startFigure.fds+loadDeletedFDSlack {
		t.Errorf("cairnd holds %d fds once every sandbox is deleted, %d at start (slack %d): descriptors leak\n%s",
			after.fds, startFigure.fds, loadDeletedFDSlack, fdTargets(pid))
	}
}

// loadSetUp makes the sandboxes, three at a time, each with the writer
// service running.
func loadSetUp(t *testing.T, d *daemon, names []string) {
	work := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				errs <- loadMake(d, name)
			}
		}()
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func loadMake(d *daemon, name string) error {
	if _, err := d.cliErr("create", name, "--memory", "128M"); err != nil {
		return err
	}
	if _, err := d.execOut(loadExecDeadline, name, "/bin/sh", "-c", "mkdir -p /etc/cairn/services && echo '"+loadWriter+"' > /etc/cairn/services/writer.json"); err != nil {
		return err
	}
	if _, err := d.cliErr("restart", name); err != nil { // starts the writer
		return err
	}
	out, err := d.execOut(loadExecDeadline, name, "/bin/sh", "-c", "sleep 1; wc -l < /root/w.log")
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) == "0" {
		return fmt.Errorf("the writer of %s writes nothing", name)
	}
	return nil
}

// loadCheckpoint takes one checkpoint of name with the Go client.
func loadCheckpoint(d *daemon, name string, begin time.Time) loadCk {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec := loadCk{sandbox: name, start: time.Since(begin)}
	t0 := time.Now()
	op, err := d.client.CreateCheckpoint(ctx, name, api.CreateCheckpointRequest{Comment: "load"})
	var ck api.Checkpoint
	if err == nil {
		ck, err = d.client.WaitCheckpoint(ctx, op, nil)
	}
	rec.took = time.Since(t0)
	rec.err = err
	rec.paused = ck.PausedMS
	rec.crash = ck.Consistency == "crash"
	return rec
}

// loadPrune deletes the manual checkpoints of name but the loadKeep
// newest, as a user keeping a few would.
func loadPrune(d *daemon, name string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := d.client.Checkpoints(ctx, name, false)
	if err != nil {
		return 0, fmt.Errorf("list the checkpoints of %s: %w", name, err)
	}
	var manual []api.Checkpoint
	for _, ck := range list {
		if ck.Trigger == api.TriggerManual && !ck.Current {
			manual = append(manual, ck)
		}
	}
	deleted := 0
	for i := 0; i+loadKeep < len(manual); i++ { // oldest first
		if err := d.client.DeleteCheckpoint(ctx, name, manual[i].ID); err != nil {
			return deleted, fmt.Errorf("delete checkpoint %s of %s: %w", manual[i].ID, name, err)
		}
		deleted++
	}
	return deleted, nil
}

// loadCheckFlat fails the test if cairnd's fds or RSS at the end of the
// run (its last quarter) rose above the warm-up's plateau by more than the
// slack: the warm-up's maximum already has every kind of operation in
// flight, so a rise past it is what is left behind.
func loadCheckFlat(t *testing.T, n int, samples []loadSample, warmUp, end time.Duration) {
	var warm, last []loadSample
	for _, s := range samples {
		switch {
		case s.at <= warmUp:
			warm = append(warm, s)
		case s.at >= end-end/4:
			last = append(last, s)
		}
	}
	if len(warm) == 0 || len(last) == 0 {
		t.Errorf("too few samples of cairnd (%d in the warm-up, %d at the end)", len(warm), len(last))
		return
	}
	maxOf := func(ss []loadSample, f func(loadSample) int64) int64 {
		var m int64
		for _, s := range ss {
			m = max(m, f(s))
		}
		return m
	}
	fds := func(s loadSample) int64 { return int64(s.fds) }
	// The count moves with the operations in flight at the sampling
	// instant (a client connection and runsc's pipes each): the maximum
	// may rise by one per sandbox over a warm-up that did not happen to
	// see them all in flight at once, the median by the plain slack.
	warmFD, lastFD := maxOf(warm, fds), maxOf(last, fds)
	if slack := int64(loadFDSlack + n); lastFD > warmFD+slack {
		t.Errorf("cairnd's fds grew: at most %d in the warm-up, %d at the end (slack %d)", warmFD, lastFD, slack)
	}
	if w, l := medianOf(warm, fds), medianOf(last, fds); l > w+loadFDSlack {
		t.Errorf("cairnd's fds grew: median %d in the warm-up, %d at the end (slack %d)", w, l, loadFDSlack)
	}
	// RSS: the medians, as one sample taken just before a collection is
	// not a trend, and the first samples still hold the set-up's garbage.
	rss := func(s loadSample) int64 { return s.rss }
	warmRSS, endRSS := medianOf(warm, rss), medianOf(last, rss)
	bound := max(warmRSS+loadRSSSlack, int64(float64(warmRSS)*loadRSSRatio))
	if endRSS > bound {
		t.Errorf("cairnd's RSS grew: median %s in the warm-up, %s at the end (bound %s)", mib(warmRSS), mib(endRSS), mib(bound))
	}
}

func medianOf(ss []loadSample, f func(loadSample) int64) int64 {
	v := make([]int64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// loadCheckLog fails the test if cairnd logged an error or a failed
// checkpoint, interval or retention pass during the run.
func loadCheckLog(t *testing.T, d *daemon) {
	var bad []string
	for _, line := range d.logSince(0) {
		if strings.Contains(line, "quiesce did not finish") {
			continue // a crash-consistent checkpoint: counted in the figures
		}
		if strings.Contains(line, "level=ERROR") ||
			(strings.Contains(line, "level=WARN") && (strings.Contains(line, "checkpoint") || strings.Contains(line, "scheduler") || strings.Contains(line, "retention"))) {
			bad = append(bad, line)
		}
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("… and %d more", len(bad)-20))
		}
		t.Errorf("cairnd logged failures during the load:\n  %s", strings.Join(bad, "\n  "))
	}
}

// loadCheckEnd checks every sandbox once the load stopped: it answers
// exec; a last checkpoint holds the lines 1…k of the writer's file, at
// least as many as the file had before it, and they are the start of the
// file the writer goes on with; and a few of those checkpoints restore as
// new sandboxes with that file.
func loadCheckEnd(t *testing.T, d *daemon, names []string) {
	last := map[string]api.Checkpoint{}
	lines := map[string][]string{}
	for _, name := range names {
		out, err := d.execOut(loadExecDeadline, name, "/bin/sh", "-c", "wc -l < /root/w.log")
		if err != nil {
			t.Errorf("at the end, %s does not answer: %v", name, err)
			continue
		}
		before, _ := strconv.Atoi(strings.TrimSpace(out))
		ck := d.checkpoint(name)
		last[name] = ck
		b, err := os.ReadFile(filepath.Join(d.ckDir(name, ck), "root", "w.log"))
		if err != nil {
			t.Errorf("the last checkpoint %s of %s: %v", ck.ID, name, err)
			continue
		}
		ls := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if err := loadNumbered(ls); err != nil {
			t.Errorf("the writer's file in checkpoint %s of %s: %v", ck.ID, name, err)
		}
		if len(ls) < before {
			t.Errorf("checkpoint %s of %s holds %d lines of the writer's file; it had %d before the checkpoint", ck.ID, name, len(ls), before)
		}
		now, err := d.execOut(loadExecDeadline, name, "head", "-n", strconv.Itoa(len(ls)), "/root/w.log")
		if err != nil || now != string(b) {
			t.Errorf("the writer's file in %s does not start with what checkpoint %s holds (%d lines): %v", name, ck.ID, len(ls), err)
		}
		lines[name] = ls
	}
	for i := range min(loadRestoreSamples, len(names)) {
		name := names[i*(len(names)-1)/max(1, loadRestoreSamples-1)]
		ck, ok := last[name]
		if !ok {
			continue
		}
		as := name + "-restored"
		if _, err := d.cliErr("checkpoint", "restore", name, ck.ID, "--as", as); err != nil {
			t.Errorf("the last checkpoint %s of %s does not restore as a new sandbox: %v", ck.ID, name, err)
			continue
		}
		got, err := d.execOut(loadExecDeadline, as, "head", "-n", strconv.Itoa(len(lines[name])), "/root/w.log")
		if err != nil || got != strings.Join(lines[name], "\n")+"\n" {
			t.Errorf("%s, restored from checkpoint %s of %s, does not hold the %d lines it was taken with: %v", as, ck.ID, name, len(lines[name]), err)
		}
		if _, err := d.cliErr("delete", as); err != nil {
			t.Errorf("delete %s: %v", as, err)
		}
	}
}

// loadNumbered checks that lines are the writer's lines 1…len(lines).
func loadNumbered(lines []string) error {
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 || f[0] != strconv.Itoa(i+1) {
			return fmt.Errorf("line %d is %q, want line number %d", i+1, l, i+1)
		}
	}
	return nil
}

// loadReport logs the run's figures: checkpoints, their latencies, and
// cairnd's RSS, fds and threads at start, after the warm-up, at the end
// and minute by minute.
func loadReport(t *testing.T, n int, interval, end, warmUp time.Duration, start loadSample, cks []loadCk, deletes int, samples []loadSample) {
	ok, crash, late := 0, 0, 0
	var took, paused, gaps, prunes []float64
	for _, c := range cks {
		if c.err == nil {
			ok++
			took = append(took, c.took.Seconds()*1000)
			paused = append(paused, c.paused)
		}
		if c.crash {
			crash++
		}
		if c.gap > 0 {
			gaps = append(gaps, c.gap.Seconds())
			if c.gap > interval+interval/2 {
				late++
			}
		}
		prunes = append(prunes, c.prune.Seconds()*1000)
	}
	t.Logf("checkpoints: %d taken (%d failed), %.2f/s over %v (asked: %.2f/s); %d deleted; %d crash-consistent; %d of them more than 1.5 intervals after the sandbox's previous one",
		ok, len(cks)-ok, float64(ok)/end.Seconds(), end.Round(time.Second), float64(n)/interval.Seconds(), deletes, crash, late)
	t.Logf("time between two checkpoints of one sandbox (s): median %.1f, p90 %.1f, max %.1f (asked: %v); listing and deleting the old ones after each (ms): median %.0f, p90 %.0f, max %.0f",
		quantile(gaps, 0.5), quantile(gaps, 0.9), quantile(gaps, 1), interval, quantile(prunes, 0.5), quantile(prunes, 0.9), quantile(prunes, 1))
	t.Logf("checkpoint create latency (ms): median %.0f, p90 %.0f, max %.0f; sandbox paused (ms): median %.1f, p90 %.1f, max %.1f",
		quantile(took, 0.5), quantile(took, 0.9), quantile(took, 1), quantile(paused, 0.5), quantile(paused, 0.9), quantile(paused, 1))
	at := func(when time.Duration) loadSample {
		var best loadSample
		for _, s := range samples {
			if s.at <= when {
				best = s
			}
		}
		return best
	}
	row := func(label string, s loadSample) {
		t.Logf("  %-22s RSS %8s  fds %4d  threads %3d", label, mib(s.rss), s.fds, s.threads)
	}
	t.Logf("cairnd:")
	row("start (no sandbox)", start)
	if len(samples) > 0 {
		row("load start", samples[0])
	}
	row(fmt.Sprintf("after warm-up (%v)", warmUp), at(warmUp))
	for m := time.Minute; m < end; m += time.Minute {
		var taken []float64
		for _, c := range cks {
			if c.err == nil && c.start >= m-time.Minute && c.start < m {
				taken = append(taken, c.took.Seconds()*1000)
			}
		}
		s := at(m)
		t.Logf("  %-22s RSS %8s  fds %4d  threads %3d  (%d checkpoints that minute, median %.0f ms, max %.0f ms)",
			fmt.Sprintf("minute %d", m/time.Minute), mib(s.rss), s.fds, s.threads, len(taken), quantile(taken, 0.5), quantile(taken, 1))
	}
	if len(samples) > 0 {
		row("end", samples[len(samples)-1])
	}
}

// quantile is the q-th quantile of xs (nearest rank); 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func mib(b int64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

// fdTargets lists what cairnd's fds point at, for the message of a leak.
func fdTargets(pid int) string {
	ents, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	count := map[string]int{}
	for _, e := range ents {
		target, _ := os.Readlink(e)
		if i := strings.Index(target, ":["); i > 0 {
			target = target[:i] // socket:[123] → socket
		}
		count[target]++
	}
	var out []string
	for k, v := range count {
		out = append(out, fmt.Sprintf("%4d %s", v, k))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
