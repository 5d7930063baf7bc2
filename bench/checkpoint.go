package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// Goals of the disk-checkpoint group, printed next to the figures.
const (
	goalCreateOverhead = 30 * time.Millisecond // create p50 − bare snapshot p50, at every size
	goalPause          = 20 * time.Millisecond // pause window p50
	// growthAllowance is how much the create p50 may differ between the
	// smallest and the largest layer and still count as "does not grow":
	// run-to-run noise on this VM, not a budget.
	growthAllowance = 10 * time.Millisecond
	forkCount       = 10
)

// layerSizes are the writable layers checkpointed, one sandbox each, written
// once and reused by every iteration.
var layerSizes = []struct {
	label string
	bytes int64
}{
	{"10 MiB", 10 << 20},
	{"1 GiB", 1 << 30},
	{"5 GiB", 5 << 30},
}

// benchCheckpoint measures disk checkpoints: create latency and pause window
// against a bare btrfs snapshot of the same layer, restore in place against
// runsc and btrfs by hand, fork of 10 against 10 snapshots + runsc runs by
// hand.
func benchCheckpoint(ctx context.Context, e *env) error {
	fmt.Printf("== disk checkpoints: %d iterations per measurement, fork of %d: %d iterations\n\n", e.n, forkCount, forkIterations(e.n))
	if err := benchCheckpointCreate(ctx, e); err != nil {
		return fmt.Errorf("checkpoint create: %w", err)
	}
	// The floor's "checkpoint": a read-only snapshot of the busybox image
	// plus a marker, the same kind of tree as the sandboxes' checkpoints.
	bareCk, err := e.bareCheckpoint(ctx)
	if err != nil {
		return err
	}
	if err := benchRestore(ctx, e, bareCk); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := benchFork(ctx, e, bareCk); err != nil {
		return fmt.Errorf("fork: %w", err)
	}
	return reclaim(ctx, e.d.poolDir(), bareCk)
}

// exclusiveBytes is what `btrfs filesystem du` counts as held only by the
// subvolume at path: its writable layer, while no snapshot shares it.
func exclusiveBytes(ctx context.Context, path string) (int64, error) {
	out, err := exec.CommandContext(ctx, "btrfs", "filesystem", "du", "-s", "--raw", path).Output()
	if err != nil {
		return 0, fmt.Errorf("btrfs filesystem du %s: %w", path, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 {
		return 0, fmt.Errorf("btrfs filesystem du %s: unexpected output %q", path, out)
	}
	return strconv.ParseInt(f[1], 10, 64)
}

func forkIterations(n int) int { return max(3, n/4) }

// tmp is a path in the pool's work area, which cairnd sweeps at start.
func (e *env) tmp(name string) string { return filepath.Join(e.d.poolDir(), "tmp", name) }

// bareCheckpoint makes the floor's checkpoint in the pool's work area.
func (e *env) bareCheckpoint(ctx context.Context) (string, error) {
	src, ck := e.tmp("bare-src"), e.tmp("bare-ck")
	if err := e.floor.snapshot(ctx, e.floor.image, src, false); err != nil {
		return "", err
	}
	defer btrfs(context.WithoutCancel(ctx), "subvolume", "delete", src)
	if err := os.WriteFile(filepath.Join(src, "root", "marker"), []byte("base\n"), 0o644); err != nil {
		return "", err
	}
	return ck, e.floor.snapshot(ctx, src, ck, true)
}

// --- 1. create latency and pause window ---

type createFigures struct {
	label, name  string // layer size; sandbox
	root         string // its root subvolume
	layer        int64  // bytes only its root holds
	cairn, floor []time.Duration
	paused       []time.Duration // PausedMS of the answers
	phases       phases
}

func benchCheckpointCreate(ctx context.Context, e *env) error {
	c, pool := e.c, e.d.poolDir()
	// One sandbox per layer size, all filled first, then measured in
	// turns within every iteration: drift on the machine (other work, the
	// disk) hits every size alike instead of looking like a size effect.
	all := make([]*createFigures, len(layerSizes))
	for k, size := range layerSizes {
		f := &createFigures{label: size.label, name: fmt.Sprintf("ck%d", k)}
		all[k] = f
		if err := createQuiet(ctx, c, f.name); err != nil {
			return err
		}
		sb, err := c.Sandbox(ctx, f.name)
		if err != nil {
			return err
		}
		f.root = filepath.Join(pool, "sandboxes", sb.ID)
		// Incompressible data, synced inside the sandbox and then on the
		// host, so that every iteration snapshots the same clean layer.
		t0 := time.Now()
		script := fmt.Sprintf("dd if=/dev/urandom of=/root/fill bs=1M count=%d 2>/dev/null && sync", size.bytes>>20)
		if _, err := execSh(ctx, c, f.name, script); err != nil {
			return err
		}
		fill := time.Since(t0)
		t1 := time.Now()
		if err := btrfs(ctx, "filesystem", "sync", pool); err != nil {
			return err
		}
		hostSync := time.Since(t1)
		if f.layer, err = exclusiveBytes(ctx, f.root); err != nil {
			return err
		}
		// Cross-check what cairn reports (btrfs quota groups).
		var reported string
		if info, err := c.Sandbox(ctx, f.name); err == nil && info.Disk != nil {
			reported = ", cairn info reports " + mib(info.Disk.Sandbox)
		}
		fmt.Printf("  (layer %s: filled in %s, host sync after it %s; btrfs fi du exclusive %s%s)\n",
			size.label, fill.Round(10*time.Millisecond), hostSync.Round(time.Millisecond), mib(f.layer), reported)
	}

	// Round -1 is untimed: the first checkpoint of a sandbox pays for
	// one-off work (caches, the fill's last metadata).
	floorDst := e.tmp("floor-ck")
	for i := -1; i < e.n; i++ {
		for j := range all {
			f := all[(i+1+j)%len(all)]
			cairnFirst := (i+j)%2 == 0
			for _, cairnTurn := range []bool{cairnFirst, !cairnFirst} {
				if cairnTurn {
					var ph phases
					total, paused, err := e.timedCheckpoint(ctx, f.name, &ph)
					if err != nil {
						return err
					}
					if i >= 0 {
						f.cairn = append(f.cairn, total)
						f.paused = append(f.paused, paused)
						f.phases.merge(ph)
					}
					continue
				}
				t0 := time.Now()
				if err := e.floor.snapshot(ctx, f.root, floorDst, true); err != nil {
					return err
				}
				if i >= 0 {
					f.floor = append(f.floor, time.Since(t0))
				}
				if err := reclaim(ctx, pool, floorDst); err != nil {
					return err
				}
			}
		}
	}

	for _, f := range all {
		fmt.Println()
		compare(fmt.Sprintf("checkpoint create, writable layer %s (API: CreateCheckpoint → WaitCheckpoint)", f.label),
			series{"btrfs subvolume snapshot -r of the same layer (floor)", f.floor},
			series{"cairn", f.cairn})
		printSeries(series{"pause window (PausedMS in the answer)", f.paused})
		f.phases.print("cairn")
		cp50, _ := percentiles(f.cairn)
		fp50, _ := percentiles(f.floor)
		pp50, _ := percentiles(f.paused)
		goal(cp50-fp50 <= goalCreateOverhead, "p50 within %s of the floor (is %s)", goalCreateOverhead, round(cp50-fp50))
		goal(pp50 <= goalPause, "pause p50 ≤ %s (is %s)", goalPause, round(pp50))
	}
	// Growth: the largest p50 above the smallest layer's.
	var cairnP50, floorP50 []string
	c0, _ := percentiles(all[0].cairn)
	var growth time.Duration
	for _, f := range all {
		cp50, _ := percentiles(f.cairn)
		fp50, _ := percentiles(f.floor)
		cairnP50 = append(cairnP50, round(cp50).String())
		floorP50 = append(floorP50, round(fp50).String())
		growth = max(growth, cp50-c0)
	}
	last := all[len(all)-1]
	c1, _ := percentiles(last.cairn)
	fmt.Println()
	fmt.Printf("checkpoint create p50 by layer size (%s → %s): cairn %s; floor %s\n",
		all[0].label, last.label, strings.Join(cairnP50, " / "), strings.Join(floorP50, " / "))
	goal(growth <= growthAllowance, "create p50 does not grow with size (largest rise over %s: %s; allowance %s for noise)", all[0].label, round(growth), growthAllowance)
	fmt.Printf("  reference: Fly.io Sprites documents about 300 ms per checkpoint; cairn p50 at %s is %s\n", last.label, round(c1))

	// What the protocol costs by hand on a bare container: runsc pause and
	// resume are separate runsc invocations, both inside cairn's figure and
	// the resume inside the pause window.
	pz, rs, err := e.pauseResume(ctx)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("components by hand on a bare busybox container (for reading the figures above)")
	printSeries(series{"runsc pause", pz})
	printSeries(series{"runsc resume", rs})
	fmt.Println()
	for _, f := range all {
		if err := deleteSandbox(ctx, c, f.name); err != nil {
			return err
		}
	}
	return nil
}

// timedCheckpoint takes and deletes one checkpoint of sandbox name and
// returns how long the API took and the pause window. It adds the phases,
// from the operation's event times and cairnd's "checkpoint created" line.
func (e *env) timedCheckpoint(ctx context.Context, name string, ph *phases) (total, paused time.Duration, err error) {
	c := e.c
	logOff := e.d.logSize()
	var tl timeline
	t0 := time.Now()
	op, err := c.CreateCheckpoint(ctx, name, api.CreateCheckpointRequest{Comment: "bench"})
	if err != nil {
		return 0, 0, err
	}
	ck, err := c.WaitCheckpoint(ctx, op, tl.record)
	if err != nil {
		return 0, 0, err
	}
	end := time.Now()
	total, paused = end.Sub(t0), ms(ck.PausedMS)
	if ck.Consistency != "frozen" {
		fmt.Printf("  note: checkpoint %s is %s-consistent\n", ck.ID, ck.Consistency)
	}
	if err := c.DeleteCheckpoint(ctx, name, ck.ID); err != nil {
		return 0, 0, err
	}
	started, ok1 := tl.at("Creating checkpoint")
	quiescing, ok2 := tl.at("Quiescing")
	created, ok3 := tl.at("Checkpoint ")
	quiesce := parseCheckpointLog(e.d.logSince(logOff), name)
	if ok1 && ok2 && ok3 && len(quiesce) == 1 {
		ph.add("request→op", started.Sub(t0))
		ph.add("lock+read row", quiescing.Sub(started))
		ph.add("quiesce (sync inside)", quiesce[0])
		ph.add("runsc pause + bookkeeping after resume", created.Sub(quiescing)-quiesce[0]-paused)
		ph.add("paused (snapshot + runsc resume)", paused)
		ph.add("result→client", end.Sub(created))
	}
	return total, paused, nil
}

var (
	ckLogLine  = regexp.MustCompile(`msg="checkpoint created".*`)
	ckLogField = regexp.MustCompile(`\b(sandbox|trigger|quiesce)=("[^"]*"|\S+)`)
)

// parseCheckpointLog returns the quiesce durations of the manual
// checkpoints of sandbox name in cairnd's log lines
// `msg="checkpoint created" … paused=12ms quiesce=3ms`.
func parseCheckpointLog(log, name string) (quiesce []time.Duration) {
	for _, line := range ckLogLine.FindAllString(log, -1) {
		kv := map[string]string{}
		for _, m := range ckLogField.FindAllStringSubmatch(line, -1) {
			kv[m[1]] = strings.Trim(m[2], `"`)
		}
		if kv["sandbox"] != name || kv["trigger"] != api.TriggerManual {
			continue
		}
		if d, err := time.ParseDuration(kv["quiesce"]); err == nil {
			quiesce = append(quiesce, d)
		}
	}
	return quiesce
}

// pauseResume times `runsc pause` and `runsc resume` of a bare container.
func (e *env) pauseResume(ctx context.Context) (pause, resume []time.Duration, err error) {
	const id = "barepz"
	root := e.tmp(id)
	bundle, err := e.floor.bundle(ctx, id, root, []string{"/bin/sleep", "100000"})
	if err != nil {
		return nil, nil, err
	}
	defer e.floor.cleanup(id, root)
	if err := e.floor.runDetached(id, bundle); err != nil {
		return nil, nil, err
	}
	for i := 0; i < e.n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		if out, err := e.floor.runsc("pause", id).CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("runsc pause: %v: %s", err, trimOut(out))
		}
		t1 := time.Now()
		if out, err := e.floor.runsc("resume", id).CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("runsc resume: %v: %s", err, trimOut(out))
		}
		pause = append(pause, t1.Sub(t0))
		resume = append(resume, time.Since(t1))
	}
	return pause, resume, nil
}

// --- 2. restore in place ---

func benchRestore(ctx context.Context, e *env, bareCk string) error {
	const name = "rs"
	c := e.c
	if err := createQuiet(ctx, c, name); err != nil {
		return err
	}
	if _, err := execSh(ctx, c, name, "echo base > /root/marker && sync"); err != nil {
		return err
	}
	op, err := c.CreateCheckpoint(ctx, name, api.CreateCheckpointRequest{Comment: "restore target"})
	if err != nil {
		return err
	}
	base, err := c.WaitCheckpoint(ctx, op, nil)
	if err != nil {
		return err
	}

	var phSafety, phNoSafety phases
	restore := func(safety bool) (time.Duration, error) {
		// Change the state, so that there is something to restore (and,
		// with the safety checkpoint, something new to save).
		if _, err := execSh(ctx, c, name, "echo changed > /root/marker"); err != nil {
			return 0, err
		}
		t0 := time.Now()
		op, err := c.RestoreCheckpoint(ctx, name, base.ID, api.RestoreRequest{NoSafetyCheckpoint: !safety})
		if err != nil {
			return 0, err
		}
		// The exec waits by itself while the restore runs.
		if err := execTrue(ctx, c, name); err != nil {
			return 0, fmt.Errorf("exec true after restore: %w", err)
		}
		end := time.Now()
		var tl timeline
		if _, err := c.Follow(ctx, op, tl.record); err != nil {
			return 0, err
		}
		ph := &phNoSafety
		if safety {
			ph = &phSafety
		}
		restorePhases(ph, tl, t0, end, safety)
		return end.Sub(t0), nil
	}
	var withSafety, noSafety []time.Duration
	for i := 0; i < e.n; i++ {
		safetyFirst := i%2 == 0
		for _, safety := range []bool{safetyFirst, !safetyFirst} {
			dt, err := restore(safety)
			if err != nil {
				return err
			}
			if safety {
				withSafety = append(withSafety, dt)
			} else {
				noSafety = append(noSafety, dt)
			}
			if i == 0 {
				out, err := execSh(ctx, c, name, "cat /root/marker")
				if err != nil {
					return err
				}
				if got := strings.TrimSpace(out); got != "base" {
					return fmt.Errorf("after restore to %s, /root/marker holds %q, want %q", base.ID, got, "base")
				}
			}
			// Delete the safety checkpoints, as the create benchmark does.
			cks, err := c.Checkpoints(ctx, name, true)
			if err != nil {
				return err
			}
			for _, ck := range cks {
				if ck.Trigger == api.TriggerRestore && !ck.Current {
					if err := c.DeleteCheckpoint(ctx, name, ck.ID); err != nil {
						return err
					}
				}
			}
		}
	}

	var phFloor phases
	floor, err := e.bareRestore(ctx, bareCk, &phFloor)
	if err != nil {
		return err
	}
	compare("restore in place of a running sandbox (RestoreCheckpoint → `exec true` succeeds; restored marker verified)",
		series{"runsc delete --force + btrfs snapshot + runsc run --detach (floor)", floor},
		series{"cairn, with safety checkpoint (default)", withSafety},
		series{"cairn, NoSafetyCheckpoint", noSafety})
	ws, _ := percentiles(withSafety)
	ns, _ := percentiles(noSafety)
	fmt.Printf("  the safety checkpoint adds %s (p50)\n", round(ws-ns))
	phSafety.print("cairn with safety checkpoint")
	phNoSafety.print("cairn NoSafetyCheckpoint")
	phFloor.print("floor")
	fmt.Println()
	return deleteSandbox(ctx, c, name)
}

// restorePhases splits one restore in place by its operation's events.
func restorePhases(ph *phases, tl timeline, t0, end time.Time, safety bool) {
	if len(tl) == 0 {
		return
	}
	stopping, ok1 := tl.at("Stopping sandbox")
	swapping, ok2 := tl.at("Swapping in")
	starting, ok3 := tl.at("Starting sandbox")
	restored, ok4 := tl.at("Sandbox ")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	ph.add("request→op", tl[0].Time.Sub(t0))
	if safety {
		if taking, ok := tl.at("Taking a safety"); ok {
			ph.add("safety checkpoint", stopping.Sub(taking))
		}
	}
	ph.add("stop", swapping.Sub(stopping))
	ph.add("swap root", starting.Sub(swapping))
	ph.add("start (runsc run + agent)", restored.Sub(starting))
	ph.add("→exec true done", end.Sub(restored))
}

// bareRestore times, on a running bare container, what a restore in place
// needs at the least: kill and remove the container, snapshot the
// checkpoint into a new root, run the container again on it.
func (e *env) bareRestore(ctx context.Context, bareCk string, ph *phases) ([]time.Duration, error) {
	const id = "barers"
	args := []string{"/bin/sleep", "100000"}
	root := e.tmp(id + "-0")
	bundle, err := e.floor.bundleFrom(ctx, bareCk, id, root, args)
	if err != nil {
		return nil, err
	}
	defer func() { e.floor.cleanup(id, root) }()
	if err := e.floor.runDetached(id, bundle); err != nil {
		return nil, err
	}
	var ds []time.Duration
	for i := 1; i <= e.n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		newRoot := e.tmp(fmt.Sprintf("%s-%d", id, i))
		t0 := time.Now()
		if err := e.floor.deleteForce(id); err != nil {
			return nil, err
		}
		t1 := time.Now()
		bundle, err := e.floor.bundleFrom(ctx, bareCk, id, newRoot, args)
		if err != nil {
			return nil, err
		}
		t2 := time.Now()
		if err := e.floor.runDetached(id, bundle); err != nil {
			btrfs(context.WithoutCancel(ctx), "subvolume", "delete", newRoot)
			return nil, err
		}
		t3 := time.Now()
		ds = append(ds, t3.Sub(t0))
		ph.add("runsc delete --force", t1.Sub(t0))
		ph.add("snapshot + bundle", t2.Sub(t1))
		ph.add("runsc run --detach", t3.Sub(t2))
		if err := btrfs(ctx, "subvolume", "delete", root); err != nil {
			return nil, err
		}
		root = newRoot
	}
	return ds, nil
}

// --- 3. fork of 10 ---

func benchFork(ctx context.Context, e *env, bareCk string) error {
	const name = "fk"
	c := e.c
	if err := createQuiet(ctx, c, name); err != nil {
		return err
	}
	if _, err := execSh(ctx, c, name, "echo base > /root/marker && sync"); err != nil {
		return err
	}
	op, err := c.CreateCheckpoint(ctx, name, api.CreateCheckpointRequest{Comment: "fork source"})
	if err != nil {
		return err
	}
	from, err := c.WaitCheckpoint(ctx, op, nil)
	if err != nil {
		return err
	}

	var ph, phFloor phases
	fork := func(it int) (time.Duration, error) {
		return e.timeFork(ctx, name, from.ID, fmt.Sprintf("fk%d", it), &ph, it == 0, func(child string) error {
			out, err := execSh(ctx, c, child, "cat /root/marker")
			if err == nil && strings.TrimSpace(out) != "base" {
				err = fmt.Errorf("fork child %s: /root/marker holds %q, want %q", child, strings.TrimSpace(out), "base")
			}
			return err
		})
	}

	iters := forkIterations(e.n)
	var cairn, floor []time.Duration
	for it := 0; it < iters; it++ {
		cairnFirst := it%2 == 0
		for _, cairnTurn := range []bool{cairnFirst, !cairnFirst} {
			var dt time.Duration
			var err error
			if cairnTurn {
				dt, err = fork(it)
				cairn = append(cairn, dt)
			} else {
				dt, err = e.bareFork(ctx, bareCk, &phFloor)
				floor = append(floor, dt)
			}
			if err != nil {
				return err
			}
		}
	}
	compare(fmt.Sprintf("fork of %d from a checkpoint (Fork → all %d children answer `exec true`)", forkCount, forkCount),
		series{fmt.Sprintf("%d × (btrfs snapshot + runsc run --detach), sequential (floor)", forkCount), floor},
		series{"cairn", cairn})
	ph.print("cairn")
	phFloor.print("floor")
	fmt.Println()
	return deleteSandbox(ctx, c, name)
}

// forkPhases splits one fork by its operation's events: the operation
// (children started forkParallelism at a time by cairnd), one child's
// start (every child counts), and the execs after the operation.
func forkPhases(ph *phases, tl timeline, t0, opDone, end time.Time) {
	ph.add("fork operation", opDone.Sub(t0))
	starts := map[string]time.Time{}
	for _, ev := range tl {
		s, _ := ev.Data.(string)
		if rest, ok := strings.CutPrefix(s, "Starting sandbox "); ok {
			starts[rest] = ev.Time
		} else if rest, ok := strings.CutPrefix(s, "Sandbox "); ok {
			child, _, _ := strings.Cut(rest, " ")
			if st, ok := starts[child]; ok && strings.HasSuffix(rest, " running") {
				ph.add("one child's start (runsc run + agent + row)", ev.Time.Sub(st))
			}
		}
	}
	ph.add(fmt.Sprintf("%d × exec true, concurrently", forkCount), end.Sub(opDone))
}

// bareFork times forkCount × (snapshot + runsc run --detach), one after the
// other, then removes the containers (untimed).
func (e *env) bareFork(ctx context.Context, bareCk string, ph *phases) (time.Duration, error) {
	return e.bareChildren("barefk", func(id string) error {
		t1 := time.Now()
		bundle, err := e.floor.bundleFrom(ctx, bareCk, id, e.tmp(id), []string{"/bin/sleep", "100000"})
		if err != nil {
			return err
		}
		t2 := time.Now()
		if err := e.floor.runDetached(id, bundle); err != nil {
			return err
		}
		ph.add("one snapshot + bundle", t2.Sub(t1))
		ph.add("one runsc run --detach", time.Since(t2))
		return nil
	})
}

// bareChildren times forkCount calls of start, one after the other, for
// containers PREFIX0…, then removes those containers (untimed): the floor
// of a fork of forkCount.
func (e *env) bareChildren(prefix string, start func(id string) error) (time.Duration, error) {
	ids := make([]string, forkCount)
	for j := range ids {
		ids[j] = fmt.Sprintf("%s%d", prefix, j)
	}
	defer func() {
		for _, id := range ids {
			e.floor.cleanup(id, e.tmp(id))
		}
	}()
	t0 := time.Now()
	for _, id := range ids {
		if err := start(id); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

// forEach runs fn on every sandbox at once and returns the first error.
func forEach(sbs []api.Sandbox, fn func(api.Sandbox) error) error {
	errs := make([]error, len(sbs))
	var wg sync.WaitGroup
	for i, sb := range sbs {
		wg.Go(func() { errs[i] = fn(sb) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// timeFork forks sandbox name from checkpoint ckID into forkCount children
// named PREFIX-N and times it until every child answers `exec true`;
// with check, verify(first child) must pass too. The children are deleted
// afterwards (untimed).
func (e *env) timeFork(ctx context.Context, name, ckID, prefix string, ph *phases, check bool, verify func(child string) error) (time.Duration, error) {
	c := e.c
	t0 := time.Now()
	op, err := c.Fork(ctx, name, api.ForkRequest{FromCheckpoint: ckID, Count: forkCount, NamePrefix: prefix})
	if err != nil {
		return 0, err
	}
	var tl timeline
	kids, err := c.WaitSandboxes(ctx, op, tl.record)
	if err != nil {
		return 0, err
	}
	opDone := time.Now()
	if len(kids) != forkCount {
		return 0, fmt.Errorf("fork made %d sandboxes, want %d", len(kids), forkCount)
	}
	err = forEach(kids, func(sb api.Sandbox) error { return execTrue(ctx, c, sb.Name) })
	end := time.Now()
	forkPhases(ph, tl, t0, opDone, end)
	if err == nil && check {
		err = verify(kids[0].Name)
	}
	derr := forEach(kids, func(sb api.Sandbox) error { return deleteSandbox(ctx, c, sb.Name) })
	if err == nil {
		err = derr
	}
	return end.Sub(t0), err
}
