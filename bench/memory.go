package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/browse"
)

// Goals of the memory-checkpoint group, printed next to the figures.
const (
	goalMemRate     = 2e9  // bytes of touched memory per second of checkpoint, 2 GB/s (E2B: ~4 s per GB)
	goalMemRatio    = 1.10 // cairn p50 / bare runsc p50, checkpoint, restore and fork
	goalRestore512  = 500 * time.Millisecond
	memIterations   = 5 // at most, per size; -n lowers it
	bigIterations   = 3 // at most, for the 2 GiB case
	memForkIters    = 3 // fork of 10
	compressIters   = 3 // each fill, each compression
	flateBestSpeed  = "flate-best-speed"
	memFillTimeout  = 3 * time.Minute
	memCompressSize = 512 << 20
)

// memSizes are the amounts of memory the sandboxes' processes touch, one
// sandbox each, filled once and reused by every iteration.
var memSizes = []struct {
	label string
	bytes int64
	iters int
}{
	{"64 MiB", 64 << 20, memIterations},
	{"512 MiB", 512 << 20, memIterations},
	{"2 GiB", 2 << 30, bigIterations},
}

// memSandbox is a busybox sandbox whose /tmp (gVisor's tmpfs: sandbox
// memory) holds bytes of data (see memFill), kept by a sleeping process.
type memSandbox struct {
	label    string
	bytes    int64
	iters    int
	name, id string
	pid      int    // of the detached process (sh, then sleep) inside
	template []byte // its bundle's config.json, for copies by hand

	ck          api.Checkpoint // the memory checkpoint restored and forked from
	ckCairn     []time.Duration
	ckFloor     []time.Duration
	ckPaused    []time.Duration
	ckSave      []time.Duration // cairn's memory save (memory_save in its log)
	ckPhases    phases
	image       int64 // bytes of the floor's image
	rsCairn     []time.Duration
	rsNoKill    []time.Duration // rsCairn less the kill of the running sandbox
	rsExec      []time.Duration // the first exec after each restore
	rsWithExec  []time.Duration // rsCairn plus rsExec
	rsFloor     []time.Duration
	rsPhases    phases
	rsFloorPh   phases
	verifiedMsg string
}

// benchMemory measures memory checkpoints: checkpoint, restore in place
// and fork of 10 against the same runsc calls by hand, at 64 MiB, 512 MiB
// and 2 GiB of touched memory, and whether runsc's compression pays.
func benchMemory(ctx context.Context, e *env) error {
	its := func(n int) int { return min(e.n, n) }
	fmt.Printf("== memory checkpoints: %d iterations per measurement (2 GiB: %d), fork of %d: %d, compression: %d\n\n",
		its(memIterations), its(bigIterations), forkCount, its(memForkIters), its(compressIters))
	scratch, err := e.memScratch()
	if err != nil {
		return err
	}
	all := make([]*memSandbox, len(memSizes))
	for k, size := range memSizes {
		m := &memSandbox{label: size.label, bytes: size.bytes, iters: its(size.iters), name: fmt.Sprintf("mem%d", k)}
		if err := e.memFill(ctx, m, "random"); err != nil {
			return fmt.Errorf("fill %s: %w", m.label, err)
		}
		all[k] = m
	}
	fmt.Println()
	t := time.Now()
	if err := e.benchMemCheckpoint(ctx, all); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	t = took("checkpoint", t)
	if err := e.benchWriteCeiling(ctx); err != nil {
		return fmt.Errorf("write ceiling: %w", err)
	}
	if err := e.benchMemRestore(ctx, all, scratch); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	t = took("restore", t)
	memSummary(all)
	// The fork and the compression run on the 512 MiB sandbox alone: the
	// others go first, so that ten copies fit in memory comfortably.
	mid := all[1]
	for _, m := range []*memSandbox{all[0], all[2]} {
		if err := e.memDelete(ctx, m); err != nil {
			return err
		}
	}
	if err := e.benchMemFork(ctx, mid, scratch); err != nil {
		return fmt.Errorf("fork: %w", err)
	}
	t = took("fork", t)
	if err := e.benchMemCompression(ctx, mid, scratch); err != nil {
		return fmt.Errorf("compression: %w", err)
	}
	took("compression", t)
	return e.memDelete(ctx, mid)
}

// took prints how long a part of the group took, set-up and clean-up
// included, and returns the time now.
func took(what string, since time.Time) time.Time {
	fmt.Printf("(%s part took %s)\n\n", what, time.Since(since).Round(time.Second))
	return time.Now()
}

// memDelete deletes the sandbox and then its memory checkpoint, which a
// deleted sandbox keeps (it stays restorable).
func (e *env) memDelete(ctx context.Context, m *memSandbox) error {
	if err := deleteSandbox(ctx, e.c, m.name); err != nil {
		return err
	}
	if m.ck.GlobalID == "" {
		return nil
	}
	subvol, err := subvolumeID(ctx, e.memoryImage(m.ck))
	if err != nil {
		return err
	}
	if _, err := e.c.DeleteSnapshot(ctx, m.ck.GlobalID); err != nil {
		return fmt.Errorf("delete memory checkpoint %s of %s: %w", m.ck.GlobalID, m.name, err)
	}
	return waitCleaned(ctx, e.d.poolDir(), subvol)
}

// memScratch makes the directories the copies by hand mount at /.cairn and
// /.cairn/checkpoints instead of the sandbox's: a copy must not reach
// cairnd's sockets (its cairn-init keeps dialling a socket that is not
// there) nor the sandbox's browsable checkpoints. Its /.cairn/checkpoints
// is an empty directory of cairnd's browse view, the same kind of file
// system as the sandbox's (runsc restore refuses mounts whose options
// differ from the checkpoint's, and it gives FUSE mounts their own).
func (e *env) memScratch() (string, error) {
	dir := filepath.Join(e.floor.dir, "scratch")
	for _, d := range []string{"dotcairn/bin", "dotcairn/checkpoints"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := browse.Publish(filepath.Join(e.d.dataDir, "browse-tables"), scratchView, nil); err != nil {
		return "", fmt.Errorf("scratch browse directory: %w", err)
	}
	return dir, nil
}

// scratchView names the copies' empty directory in cairnd's browse view.
const scratchView = "bench-scratch"

// memFill creates sandbox m.name and has a detached process fill /tmp
// with m.bytes: of /dev/urandom (kind "random"), or of copies of the
// busybox binary (kind "text": compressible about 2× by gzip -1), then
// sleep. It waits until the fill is complete.
func (e *env) memFill(ctx context.Context, m *memSandbox, kind string) error {
	c := e.c
	if err := createQuiet(ctx, c, m.name); err != nil {
		return err
	}
	sb, err := c.Sandbox(ctx, m.name)
	if err != nil {
		return err
	}
	m.id = sb.ID
	mib := m.bytes >> 20
	fill := fmt.Sprintf("dd if=/dev/urandom of=/tmp/fill bs=1M count=%d 2>/dev/null", mib)
	if kind == "text" {
		// A 16 MiB chunk of busybox copies (through a pipe, which is slow
		// in gVisor), then the chunk over and over.
		const chunk = 16 << 20
		fill = fmt.Sprintf(`n=$(( %d / $(stat -c %%s /bin/busybox) + 1 )); i=0; while [ $i -lt $n ]; do cat /bin/busybox; i=$((i+1)); done | head -c %d > /tmp/chunk && i=0; while [ $i -lt %d ]; do cat /tmp/chunk; i=$((i+1)); done > /tmp/fill && rm /tmp/chunk`, chunk, chunk, m.bytes/chunk)
	}
	t0 := time.Now()
	m.pid, err = c.ExecDetached(ctx, m.name, api.ExecRequest{Command: []string{"sh", "-c", fill + " && touch /tmp/filled; exec sleep 100000"}})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(memFillTimeout)
	for {
		out, err := execSh(ctx, c, m.name, "[ -e /tmp/filled ] && stat -c %s /tmp/fill || true")
		if err != nil {
			return err
		}
		if out = strings.TrimSpace(out); out != "" {
			if out != fmt.Sprint(m.bytes) {
				return fmt.Errorf("/tmp/fill holds %s bytes, want %d", out, m.bytes)
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fill of %s not done after %s", m.label, memFillTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fill0 := time.Since(t0)
	if m.template, err = os.ReadFile(filepath.Join(e.d.dataDir, "sandboxes", m.id, "bundle", "config.json")); err != nil {
		return err
	}
	fmt.Printf("  (sandbox %s: %s of %s data in /tmp, filled in %s)\n", m.name, m.label, kind, fill0.Round(10*time.Millisecond))
	return nil
}

// memVerify is the check that a sandbox or copy holds the checkpoint's
// state: the fill, the same process, and not what was done after it.
func (m *memSandbox) memVerify() string {
	return fmt.Sprintf(`[ -e /tmp/filled ] && [ "$(stat -c %%s /tmp/fill)" = %d ] && [ -e /proc/%d ] && [ ! -e /tmp/after ]`, m.bytes, m.pid)
}

// cairndRunsc runs runsc on cairnd's own containers (its state root),
// with the global flags cairnd uses.
func (e *env) cairndRunsc(args ...string) *exec.Cmd {
	return exec.Command(e.floor.binary, append([]string{"--root=" + filepath.Join(e.d.dataDir, "runsc"), "--overlay2=none", "--host-uds=open", "--network=none"}, args...)...)
}

// containerOf is the name of m's runsc container: the sandbox id, with a
// suffix after a restore in place.
func (e *env) containerOf(ctx context.Context, m *memSandbox) (string, error) {
	sb, err := e.c.Sandbox(ctx, m.name)
	if err != nil {
		return "", err
	}
	return cmp.Or(sb.Container, m.id), nil
}

// bareMemCheckpoint is `runsc checkpoint --leave-running` of cairn's running
// container (named container) into dir, by hand, with extra flags.
func (e *env) bareMemCheckpoint(container, dir string, extra ...string) error {
	args := append([]string{"checkpoint", "--leave-running", "--image-path=" + dir}, extra...)
	if out, err := e.cairndRunsc(append(args, container)...).CombinedOutput(); err != nil {
		return fmt.Errorf("runsc checkpoint: %v: %s", err, trimOut(out))
	}
	return nil
}

// subvolume creates an empty subvolume in the pool's quota groups.
func (b *bareRunsc) subvolume(ctx context.Context, path string) error {
	args := []string{"subvolume", "create"}
	for _, g := range b.inherit {
		args = append(args, "-i", g)
	}
	return btrfs(ctx, append(args, path)...)
}

// dirBytes is the size of the regular files in dir.
func dirBytes(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, ent := range ents {
		if info, err := ent.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n, nil
}

// afterMemCheckpoint waits (untimed) until cairn-init, whose connection a
// memory checkpoint breaks, answers again, so that the next measurement
// does not start while it dials back.
func (e *env) afterMemCheckpoint(ctx context.Context, m *memSandbox) error {
	if err := execTrue(ctx, e.c, m.name); err != nil {
		return fmt.Errorf("exec true after a memory checkpoint of %s: %w", m.name, err)
	}
	return nil
}

// --- 1. checkpoint ---

func (e *env) benchMemCheckpoint(ctx context.Context, all []*memSandbox) error {
	pool := e.d.poolDir()
	maxIters := 0
	for _, m := range all {
		maxIters = max(maxIters, m.iters)
	}
	// Sizes in turns within every iteration, cairn and the floor in
	// alternating order; round -1 is untimed (first-time costs).
	dir := e.tmp("bare-memimg")
	defer btrfs(context.WithoutCancel(ctx), "subvolume", "delete", dir)
	for i := -1; i < maxIters; i++ {
		for j := range all {
			m := all[(i+1+j)%len(all)]
			if i >= m.iters {
				continue
			}
			cairnFirst := (i+j)%2 == 0
			for _, cairnTurn := range []bool{cairnFirst, !cairnFirst} {
				if cairnTurn {
					var ph phases
					total, paused, save, err := e.timedMemCheckpoint(ctx, m, &ph)
					if err != nil {
						return err
					}
					if i >= 0 {
						m.ckCairn = append(m.ckCairn, total)
						m.ckPaused = append(m.ckPaused, paused)
						if save > 0 {
							m.ckSave = append(m.ckSave, save)
						}
						m.ckPhases.merge(ph)
					}
					continue
				}
				if err := e.floor.subvolume(ctx, dir); err != nil {
					return err
				}
				container, err := e.containerOf(ctx, m)
				if err != nil {
					return err
				}
				t0 := time.Now()
				if err := e.bareMemCheckpoint(container, dir); err != nil {
					return err
				}
				dt := time.Since(t0)
				if i >= 0 {
					m.ckFloor = append(m.ckFloor, dt)
				}
				if m.image, _ = dirBytes(dir); m.image < m.bytes {
					return fmt.Errorf("runsc wrote an image of %s for %s of touched memory", mib(m.image), m.label)
				}
				if err := e.afterMemCheckpoint(ctx, m); err != nil {
					return err
				}
				if err := reclaim(ctx, pool, dir); err != nil {
					return err
				}
			}
		}
	}
	for _, m := range all {
		compare(fmt.Sprintf("memory checkpoint, %s touched (API: CreateCheckpoint memory → WaitCheckpoint)", m.label),
			series{"runsc checkpoint --leave-running, same sandbox, into a pool subvolume (floor)", m.ckFloor},
			series{"cairn", m.ckCairn})
		printSeries(series{"  of it the memory save inside cairn (memory_save in cairnd's log; the call runsc checkpoint makes, made by cairnd)", m.ckSave})
		printSeries(series{"  pause window (PausedMS in the answer)", m.ckPaused})
		m.ckPhases.print("cairn")
		cp50, _ := percentiles(m.ckCairn)
		fp50, _ := percentiles(m.ckFloor)
		fmt.Printf("  touched memory per second (p50): cairn %s, floor %s; image %s\n", rate(m.bytes, cp50), rate(m.bytes, fp50), mib(m.image))
		goal(float64(m.bytes)/cp50.Seconds() >= goalMemRate, "≥ %.0f MB/s of touched memory (is %s)", goalMemRate/1e6, rate(m.bytes, cp50))
		goal(float64(cp50) <= goalMemRatio*float64(fp50), "within %.0f%% of bare runsc (is %+.1f%%)", (goalMemRatio-1)*100, pct(cp50, fp50))
		fmt.Println()
	}
	return nil
}

// rate formats bytes per duration in MB/s (10⁶ bytes) and seconds per GB.
func rate(bytes int64, d time.Duration) string {
	if d <= 0 {
		return "?"
	}
	mbs := float64(bytes) / 1e6 / d.Seconds()
	return fmt.Sprintf("%.0f MB/s (%.2f s per GB)", mbs, 1000/mbs)
}

// pct is how much a is above b, in percent.
func pct(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return (float64(a)/float64(b) - 1) * 100
}

// timedMemCheckpoint takes and deletes one memory checkpoint of m and
// returns how long the API took, the pause window, and runsc checkpoint's
// share (from cairnd's log). It adds the phases.
func (e *env) timedMemCheckpoint(ctx context.Context, m *memSandbox, ph *phases) (total, paused, save time.Duration, err error) {
	c := e.c
	logOff := e.d.logSize()
	var tl timeline
	t0 := time.Now()
	op, err := c.CreateCheckpoint(ctx, m.name, api.CreateCheckpointRequest{Comment: "bench", Memory: true})
	if err != nil {
		return 0, 0, 0, err
	}
	ck, err := c.WaitCheckpoint(ctx, op, tl.record)
	if err != nil {
		return 0, 0, 0, err
	}
	end := time.Now()
	total, paused = end.Sub(t0), ms(ck.PausedMS)
	if !ck.HasMemory {
		return 0, 0, 0, fmt.Errorf("checkpoint %s of %s has no memory", ck.ID, m.name)
	}
	if ck.Consistency != "frozen" {
		fmt.Printf("  note: checkpoint %s is %s-consistent\n", ck.ID, ck.Consistency)
	}
	// Deleting the memory image leaves its extents to btrfs' cleaner: let
	// it finish before the next measurement, as the floor's reclaim does.
	subvol, err := subvolumeID(ctx, e.memoryImage(ck))
	if err != nil {
		return 0, 0, 0, err
	}
	if err := c.DeleteCheckpoint(ctx, m.name, ck.ID); err != nil {
		return 0, 0, 0, err
	}
	if err := waitCleaned(ctx, e.d.poolDir(), subvol); err != nil {
		return 0, 0, 0, err
	}
	if err := e.afterMemCheckpoint(ctx, m); err != nil {
		return 0, 0, 0, err
	}
	started, ok1 := tl.at("Creating checkpoint")
	quiescing, ok2 := tl.at("Quiescing")
	saving, ok3 := tl.at("Saving memory")
	created, ok4 := tl.at("Checkpoint ")
	logged := parseMemCheckpointLog(e.d.logSince(logOff), m.name)
	if len(logged) == 1 {
		save = logged[0].save
	}
	if ok1 && ok2 && ok3 && ok4 && len(logged) == 1 {
		q := logged[0].quiesce
		ph.add("request→op", started.Sub(t0))
		ph.add("lock+read row+image subvolume", quiescing.Sub(started))
		ph.add("quiesce", q)
		ph.add("pause + disk snapshot", saving.Sub(quiescing)-q)
		ph.add("memory save (containerManager.Checkpoint)", save)
		ph.add("resume + bookkeeping", created.Sub(saving)-save)
		ph.add("result→client", end.Sub(created))
	}
	return total, paused, save, nil
}

var memLogField = regexp.MustCompile(`\b(sandbox|trigger|memory|quiesce|memory_save)=("[^"]*"|\S+)`)

type memLogged struct{ quiesce, save time.Duration }

// parseMemCheckpointLog returns the quiesce and memory-save durations of
// the manual memory checkpoints of sandbox name in cairnd's log lines
// `msg="checkpoint created" … memory=true … quiesce=3ms memory_save=550ms`.
func parseMemCheckpointLog(log, name string) (out []memLogged) {
	for _, line := range ckLogLine.FindAllString(log, -1) {
		kv := map[string]string{}
		for _, m := range memLogField.FindAllStringSubmatch(line, -1) {
			kv[m[1]] = strings.Trim(m[2], `"`)
		}
		if kv["sandbox"] != name || kv["trigger"] != api.TriggerManual || kv["memory"] != "true" {
			continue
		}
		q, err1 := time.ParseDuration(kv["quiesce"])
		s, err2 := time.ParseDuration(kv["memory_save"])
		if err1 == nil && err2 == nil {
			out = append(out, memLogged{q, s})
		}
	}
	return out
}

// memSummary prints one line per size for RESULTS.md.
func memSummary(all []*memSandbox) {
	fmt.Println("summary (p50): size · checkpoint cairn / floor · MB/s cairn / floor · restore cairn / floor")
	for _, m := range all {
		cc, _ := percentiles(m.ckCairn)
		cf, _ := percentiles(m.ckFloor)
		rc, _ := percentiles(m.rsCairn)
		rf, _ := percentiles(m.rsFloor)
		fmt.Printf("  %-8s %s / %s · %.0f / %.0f · %s / %s\n", m.label, round(cc), round(cf),
			float64(m.bytes)/1e6/cc.Seconds(), float64(m.bytes)/1e6/cf.Seconds(), round(rc), round(rf))
	}
	fmt.Println()
}

// --- 3. fork of 10 ---

func (e *env) benchMemFork(ctx context.Context, m *memSandbox, scratch string) error {
	c := e.c
	var ph, phFloor phases
	fork := func(it int) (time.Duration, error) {
		return e.timeFork(ctx, m.name, m.ck.ID, fmt.Sprintf("mf%d", it), &ph, it == 0, func(child string) error {
			if _, err := execSh(ctx, c, child, m.memVerify()); err != nil {
				return fmt.Errorf("fork child %s does not hold the checkpoint's state: %w", child, err)
			}
			return nil
		})
	}
	bareFork := func() (time.Duration, error) {
		return e.bareChildren("bare-memfk", func(id string) error {
			_, _, err := e.restoreCopy(ctx, m, func() (string, error) { return e.checkpointDisk(m) }, e.memoryImage(m.ck), id, scratch, &phFloor)
			return err
		})
	}
	iters := min(e.n, memForkIters)
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
				dt, err = bareFork()
				floor = append(floor, dt)
			}
			if err != nil {
				return err
			}
		}
	}
	compare(fmt.Sprintf("fork of %d from a memory checkpoint, %s touched (Fork FromCheckpoint → all %d children answer `exec true`)", forkCount, m.label, forkCount),
		series{fmt.Sprintf("%d × (btrfs snapshot + bundle + runsc restore --detach), sequential (floor)", forkCount), floor},
		series{"cairn", cairn})
	ph.print("cairn")
	phFloor.print("floor, per copy")
	cp50, _ := percentiles(cairn)
	fp50, _ := percentiles(floor)
	goal(float64(cp50) <= goalMemRatio*float64(fp50), "within %.0f%% of bare runsc (is %+.1f%%)", (goalMemRatio-1)*100, pct(cp50, fp50))
	fmt.Println()
	return nil
}

// --- 4. compression ---

// benchMemCompression measures, by hand with runsc, checkpoint and restore
// of 512 MiB uncompressed (what cairn does) and with
// --compression=flate-best-speed, for an incompressible fill (m) and a
// compressible one.
func (e *env) benchMemCompression(ctx context.Context, m *memSandbox, scratch string) error {
	text := &memSandbox{label: m.label + " (compressible)", bytes: memCompressSize, name: "memtext"}
	if err := e.memFill(ctx, text, "text"); err != nil {
		return err
	}
	fmt.Println()
	iters := min(e.n, compressIters)
	for _, s := range []*memSandbox{m, text} {
		kind := "incompressible (/dev/urandom)"
		if s == text {
			kind = "compressible (copies of /bin/busybox, ≈ 1.9× by gzip -1)"
		}
		type fig struct {
			ck, rs, sum []time.Duration
			image       int64
		}
		figs := map[string]*fig{"none": {}, flateBestSpeed: {}}
		for it := 0; it < iters; it++ {
			order := []string{"none", flateBestSpeed}
			if it%2 == 1 {
				order = []string{flateBestSpeed, "none"}
			}
			for _, comp := range order {
				f := figs[comp]
				ck, rs, image, err := e.compressionRound(ctx, s, comp, scratch)
				if err != nil {
					return fmt.Errorf("%s, compression %s: %w", s.name, comp, err)
				}
				f.ck, f.rs, f.sum, f.image = append(f.ck, ck), append(f.rs, rs), append(f.sum, ck+rs), image
			}
		}
		fmt.Printf("runsc checkpoint + restore by hand, %s touched, %s\n", m.label, kind)
		for _, comp := range []string{"none", flateBestSpeed} {
			f := figs[comp]
			printSeries(series{fmt.Sprintf("--compression=%s: runsc checkpoint --leave-running", comp), f.ck})
			printSeries(series{fmt.Sprintf("--compression=%s: runsc restore --detach", comp), f.rs})
			printSeries(series{fmt.Sprintf("--compression=%s: both (image %s)", comp, mib(f.image)), f.sum})
		}
		n50, _ := percentiles(figs["none"].sum)
		z50, _ := percentiles(figs[flateBestSpeed].sum)
		fmt.Printf("  checkpoint+restore, flate-best-speed / none (p50): %.2f× (%+.0f%%); image %.2f× the size\n\n",
			float64(z50)/float64(n50), pct(z50, n50), float64(figs[flateBestSpeed].image)/float64(figs["none"].image))
	}
	return e.memDelete(ctx, text)
}

// compressionRound checkpoints sandbox s by hand with compression comp
// into a pool subvolume, restores a copy from that image (disk: a snapshot
// of the live root, which the fill in memory leaves unchanged) and
// removes both. It returns runsc checkpoint's time, runsc restore's and
// the image size.
func (e *env) compressionRound(ctx context.Context, s *memSandbox, comp, scratch string) (ck, rs time.Duration, image int64, err error) {
	const id = "bare-memcz"
	dir := e.tmp("bare-czimg")
	if err := e.floor.subvolume(ctx, dir); err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		e.floor.cleanup(id, e.tmp(id))
		if rerr := reclaim(context.WithoutCancel(ctx), e.d.poolDir(), dir); rerr != nil && err == nil {
			err = rerr
		}
	}()
	container, err := e.containerOf(ctx, s)
	if err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	if err := e.bareMemCheckpoint(container, dir, "--compression="+comp); err != nil {
		return 0, 0, 0, err
	}
	ck = time.Since(t0)
	if image, err = dirBytes(dir); err != nil {
		return 0, 0, 0, err
	}
	if err := e.afterMemCheckpoint(ctx, s); err != nil {
		return 0, 0, 0, err
	}
	live := func() (string, error) { return filepath.Join(e.d.poolDir(), "sandboxes", s.id), nil }
	_, rs, err = e.restoreCopy(ctx, s, live, dir, id, scratch, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	if out, xerr := e.floor.runsc("exec", id, "/bin/sh", "-c", fmt.Sprintf(`[ "$(stat -c %%s /tmp/fill)" = %d ]`, s.bytes)).CombinedOutput(); xerr != nil {
		return 0, 0, 0, fmt.Errorf("copy restored from a %s image lacks the fill: %v: %s", comp, xerr, trimOut(out))
	}
	return ck, rs, image, nil
}
