package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// The crash trials kill cairnd with SIGKILL at random moments of the
// operations that move a checkpoint's disk or its off-site copy
// (checkpoint create, checkpoint delete, restore in place, rollback, the
// refresh of /.cairn/checkpoints that follows a create or a delete, fork,
// snapshot restore as a new sandbox, an upload to the two off-site
// locations and the off-site delete with its garbage collection), start it
// again after each kill, and check what a user relies on: cairnd and every
// sandbox answer, the browse directory shows the five newest checkpoints,
// what was acknowledged survived, every checkpoint restores with the files
// it was taken with, uploads resume and finish, verify --offsite is clean,
// and deleting everything leaves nothing behind, locally or off-site. See
// docs/crash-trials.md.
const (
	crashDefaultTrials  = 100
	crashMaxCheckpoints = 8                      // per sandbox; past it a create becomes a delete
	crashRestoreEvery   = 10                     // trials between two rounds of restore-every-checkpoint
	crashKillMax        = 400 * time.Millisecond // kill within this of the operation's start
	crashBrowseKillMax  = 100 * time.Millisecond // browse: kill within this of the answer
	crashExecDeadline   = 5 * time.Second        // every sandbox answers exec within this
	crashBrowseDeadline = 5 * time.Second        // /.cairn/checkpoints is right within this
	crashAnswerDeadline = 15 * time.Second       // a killed operation's caller returns within this
	crashTmp            = "crash-tmp"            // the restore-as-new sandbox of the checks
)

type crashAction int

const (
	actCreate crashAction = iota
	actDelete
	actRestore
	actBrowse
	actFork
	actRollback    // cairn rollback NAME ID [--disk-only]
	actSnapRestore // cairn snapshot restore REF NEW
	actUpload      // a checkpoint create, killed while its upload runs
	actGC          // a checkpoint delete, killed while its off-site delete runs
	numActions
)

// crashForkCount is how many children a fork trial asks for.
const crashForkCount = 3

func (a crashAction) String() string {
	return [...]string{"checkpoint create", "checkpoint delete", "restore in place", "browse refresh", "fork",
		"rollback", "snapshot restore", "upload", "off-site delete+GC"}[a]
}

// inPlace reports whether a puts its sandbox back to a checkpoint.
func (a crashAction) inPlace() bool { return a == actRestore || a == actRollback }

// afterAnswer reports whether a's kill comes after the operation that
// starts it answered: a browse refresh and an upload run in the background
// once their create (or delete) is done. (The off-site delete of a GC
// trial starts as soon as the checkpoint's row is gone, seconds before the
// delete answers: its kill is timed from then.)
func (a crashAction) afterAnswer() bool { return a == actBrowse || a == actUpload }

// trial is one crash trial: what runs, through what, and when cairnd is
// killed.
type trial struct {
	label        string // instead of the trial's description: "set-up", "at the end"
	n            int
	act          crashAction
	sandbox      string
	target       api.Checkpoint // the checkpoint deleted or restored
	memory       bool           // a create with --memory
	browseDelete bool           // browse: the refresh follows a delete, not a create
	diskOnly     bool           // rollback, snapshot restore: --disk-only
	byGlobalID   bool           // snapshot restore: the checkpoint named by its global id, else SANDBOX/ID
	bg           bgPhase        // upload, GC: where the background work was at the kill
	sawUpload    bool           // upload: its state was seen "uploading" before the kill
	rowGone      bool           // GC: the checkpoint was seen no longer listed before the kill
	noSafety     bool           // rollback: --no-safety-checkpoint
	viaCLI       bool           // the cairn CLI, else the Go client
	delay        time.Duration
	mark         string // written to /root/mark of the sandbox just before
	answered     bool   // the operation answered before the kill
	answer       crashAnswer
	logFrom      int64 // cairnd's log from here on is the restarted daemon's
}

// crashAnswer is what the operation's caller got.
type crashAnswer struct {
	err     error
	created string // the id of the checkpoint a create answered
	global  string // and its global id
	op      string // the id of a fork's operation, once cairnd gave it
}

func (tr *trial) String() string {
	if tr.label != "" {
		return tr.label
	}
	what := tr.act.String()
	switch {
	case tr.act == actCreate && tr.memory:
		what += " --memory"
	case tr.act == actDelete || tr.act == actRestore:
		what += " " + tr.target.ID
	case tr.act == actRollback:
		what += " " + tr.target.ID
		if tr.diskOnly {
			what += " --disk-only"
		}
		if tr.noSafety {
			what += " --no-safety-checkpoint"
		}
	case tr.act == actSnapRestore:
		what += " " + snapRef(tr) + " " + snapName(tr)
		if tr.diskOnly {
			what += " --disk-only"
		}
	case tr.act == actGC:
		what += " (after checkpoint delete " + tr.target.ID + ")"
	case tr.act == actUpload && tr.memory:
		what += " (after checkpoint create --memory)"
	case tr.act == actUpload:
		what += " (after checkpoint create)"
	case tr.act == actBrowse && tr.browseDelete:
		what += " (after checkpoint delete " + tr.target.ID + ")"
	case tr.act == actBrowse:
		what += " (after checkpoint create)"
	case tr.act == actFork:
		what += fmt.Sprintf(" --count %d --name-prefix %s", crashForkCount, forkPrefix(tr))
	}
	via := "Go client"
	if tr.viaCLI {
		via = "CLI"
	}
	when := "before its answer"
	if tr.answered {
		when = "after its answer"
	}
	switch tr.act {
	case actBrowse:
		return fmt.Sprintf("trial %d: %s of %s via %s, SIGKILL %v after the answer", tr.n, what, tr.sandbox, via, tr.delay.Round(time.Millisecond))
	case actUpload, actGC:
		return fmt.Sprintf("trial %d: %s of %s via %s, SIGKILL %v after %s (%s)", tr.n, what, tr.sandbox, via, tr.delay.Round(time.Millisecond), bgStart(tr), tr.bg)
	}
	return fmt.Sprintf("trial %d: %s of %s via %s, SIGKILL %v after its start (%s)", tr.n, what, tr.sandbox, via, tr.delay.Round(time.Millisecond), when)
}

// crashRun is the state of one TestCrashTrials run: what the test knows
// each sandbox and checkpoint holds.
type crashRun struct {
	t       *testing.T
	d       *daemon
	rng     *rand.Rand
	seed    int64
	names   []string
	marks   map[string]string           // checkpoint global id → its /root/mark
	pending map[string][]string         // checkpoint global id → the marks it may hold, until it is seen
	written map[string][]string         // sandbox → every mark its disk has held
	cur     map[string]string           // sandbox → its /root/mark now
	known   map[string][]api.Checkpoint // sandbox → its checkpoints at the last check
	history []string                    // the trials so far, for failure messages
	tmpIDs  []string                    // ids of the restore-as-new sandboxes and the fork children
	// tmpNames are the names of the sandboxes the trials made and deleted
	// again (fork children, snapshot restores): their final checkpoints
	// are deleted at every restore round.
	tmpNames map[string]bool
	off      *crashOffsite
	stats    crashStats
}

// crashStats are the run's figures, printed at its end.
type crashStats struct {
	trials, mid, after, viaCLI [numActions]int
	memory                     int
	forkOutcomes               map[string]int // what cut-short forks' operations answered, by status
	snapOutcomes               map[string]int // what cut-short snapshot restores left: "whole", "none"
	diskOnly                   int            // rollbacks and snapshot restores with --disk-only
	bg                         [numActions]map[bgPhase]int
	offsite                    offsiteStats
	daemonRestarts             int
	adopted, restartedByCairnd int // sandboxes, at cairnd's start, from its log
	restartedByTest            int // sandboxes found stopped and started again
	crashedRestarted           int // sandboxes found crashed and started again by their policy
	restoreRounds, restores    int
	restoreTime                time.Duration
	trialTimes                 []time.Duration // each trial, from its pick to the end of its checks
	restartTimes, checkTimes   []time.Duration // of which cairnd's start, and the checks
	logWarnings                map[string]int  // WARN and ERROR messages of cairnd, by message
	start                      time.Time
}

func TestCrashTrials(t *testing.T) {
	trials := crashDefaultTrials
	if s := os.Getenv("CAIRN_CRASH_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CAIRN_CRASH_TRIALS=%q: want a positive number", s)
		}
		trials = n
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("CAIRN_CRASH_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("CAIRN_CRASH_SEED=%q: want a number", s)
		}
		seed = n
	}
	t.Logf("%d trials, seed %d (CAIRN_CRASH_SEED=%d repeats the choices as long as the kills land alike: their timing varies)", trials, seed, seed)

	off := startCrashOffsite(t)
	d := startDaemon(t, "--config", off.config)
	r := &crashRun{
		t: t, d: d, rng: rand.New(rand.NewSource(seed)), seed: seed,
		names:    []string{"crash-a", "crash-b"},
		marks:    map[string]string{},
		pending:  map[string][]string{},
		written:  map[string][]string{},
		cur:      map[string]string{},
		known:    map[string][]api.Checkpoint{},
		tmpNames: map[string]bool{},
		off:      off,
		stats:    crashStats{logWarnings: map[string]int{}, forkOutcomes: map[string]int{}, snapOutcomes: map[string]int{}, start: time.Now()},
	}
	for a := range r.stats.bg {
		r.stats.bg[a] = map[bgPhase]int{}
	}
	defer r.report()
	r.setUp()
	for n := 1; n <= trials; n++ {
		start := time.Now()
		tr := r.pick(n)
		r.run(tr)
		checked := time.Now()
		r.check(tr)
		r.stats.checkTimes = append(r.stats.checkTimes, time.Since(checked))
		r.stats.trialTimes = append(r.stats.trialTimes, time.Since(start))
		r.history = append(r.history, tr.String())
		t.Logf("%s; %v (restart %v, checks %v)", tr, time.Since(start).Round(time.Millisecond),
			r.stats.restartTimes[len(r.stats.restartTimes)-1].Round(time.Millisecond), time.Since(checked).Round(time.Millisecond))
		if n%crashRestoreEvery == 0 && n != trials {
			r.restoreAll(fmt.Sprintf("after trial %d", n))
			r.checkOffsite(fmt.Sprintf("after trial %d", n))
		}
	}
	r.restoreAll("at the end")
	r.checkOffsite("at the end")
	r.deleteAll()
	r.deleteEverything()
}

// setUp makes the two sandboxes, each with a writer service that appends
// to /root/writer.log (it comes back after every restore), and enough
// checkpoints of crash-a that every create or delete changes which five
// are browsable. crash-b also takes interval checkpoints (every 60 s when
// its disk changed), so that some crashes land during one.
func (r *crashRun) setUp() {
	d := r.d
	const service = `{"name":"writer","cmd":["sh","-c","while true; do date >> /root/writer.log; sleep 0.2; done"],"restart":"always"}`
	for _, name := range r.names {
		flags := []string{}
		if name == "crash-b" {
			flags = append(flags, "--auto-checkpoint", "60s")
		}
		d.create(name, flags...)
		d.sh(name, "mkdir -p /etc/cairn/services && echo '"+service+"' > /etc/cairn/services/writer.json && echo setup > /root/mark && sync")
		r.cur[name] = "setup"
		r.written[name] = []string{"setup"}
		d.mustCLI("restart", name) // starts the writer; takes a checkpoint (trigger restart)
	}
	for i := range 6 {
		mark := fmt.Sprintf("setup-%d", i)
		d.sh("crash-a", "echo "+mark+" > /root/mark && sync")
		r.cur["crash-a"] = mark
		r.written["crash-a"] = append(r.written["crash-a"], mark)
		r.marks[d.checkpoint("crash-a").GlobalID] = mark
	}
	setUp := &trial{label: "set-up"}
	for _, name := range r.names {
		cks, err := d.client.Checkpoints(context.Background(), name, true)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, ck := range cks {
			if r.marks[ck.GlobalID] == "" {
				if ck.Trigger != api.TriggerRestart {
					r.t.Fatalf("set-up: unexpected checkpoint %+v", ck)
				}
				r.marks[ck.GlobalID] = "setup"
			}
		}
		r.known[name] = r.checkBrowse(setUp, name)
	}
	if out := d.sh("crash-a", "sleep 0.5; wc -l < /root/writer.log"); strings.TrimSpace(out) == "0" {
		r.t.Fatalf("the writer service of crash-a writes nothing")
	}
}

// crashWeights are how likely each action is picked. Most actions add a
// checkpoint (a restore or rollback its safety checkpoint): the two that
// remove one count twice, so that the sandboxes are seldom full and few
// picks are turned into deletes (see pick).
var crashWeights = [numActions]int{actCreate: 1, actDelete: 2, actRestore: 1, actBrowse: 1, actFork: 1,
	actRollback: 1, actSnapRestore: 1, actUpload: 1, actGC: 2}

// pickAction draws an action by crashWeights.
func (r *crashRun) pickAction() crashAction {
	total := 0
	for _, w := range crashWeights {
		total += w
	}
	n := r.rng.Intn(total)
	for a, w := range crashWeights {
		if n < w {
			return crashAction(a)
		}
		n -= w
	}
	panic("unreachable")
}

// pick chooses the next trial: a sandbox (crash-a three times in four), an
// action (by crashWeights), its target, the way it is asked and the kill's
// delay. Past crashMaxCheckpoints a create or a fork becomes a delete, an
// upload an off-site delete.
func (r *crashRun) pick(n int) *trial {
	tr := &trial{n: n, act: r.pickAction(), viaCLI: r.rng.Intn(2) == 0, sandbox: "crash-a"}
	if r.rng.Intn(4) == 0 {
		tr.sandbox = "crash-b"
	}
	cks := r.known[tr.sandbox]
	var deletable, uploaded, memory []api.Checkpoint
	for _, ck := range cks {
		if !ck.Current {
			deletable = append(deletable, ck)
			if ck.Offsite == offsiteBoth {
				uploaded = append(uploaded, ck)
			}
		}
		if ck.HasMemory {
			memory = append(memory, ck)
		}
	}
	full := len(cks) >= crashMaxCheckpoints
	switch tr.act {
	case actCreate, actFork:
		if full && len(deletable) > 0 {
			tr.act = actDelete
		}
	case actUpload:
		if full && len(deletable) > 0 {
			tr.act = actGC
		}
	case actDelete, actGC:
		if len(deletable) == 0 {
			tr.act = actCreate
		}
	case actBrowse:
		tr.browseDelete = len(deletable) > 0 && (full || r.rng.Intn(2) == 0)
	case actRestore, actRollback, actSnapRestore:
		if len(cks) == 0 {
			tr.act = actCreate
		}
	}
	switch {
	case tr.act == actGC && len(uploaded) > 0:
		tr.target = uploaded[r.rng.Intn(len(uploaded))] // the off-site delete then has something to do
	case tr.act == actDelete || tr.act == actGC || tr.browseDelete:
		tr.target = deletable[r.rng.Intn(len(deletable))]
	case tr.act == actRollback || tr.act == actSnapRestore:
		tr.diskOnly = r.rng.Intn(2) == 0
		tr.byGlobalID = r.rng.Intn(2) == 0
		tr.noSafety = tr.act == actRollback && r.rng.Intn(2) == 0
		if tr.diskOnly && len(memory) > 0 && r.rng.Intn(2) == 0 {
			tr.target = memory[r.rng.Intn(len(memory))] // --disk-only matters for a memory checkpoint
		} else {
			tr.target = cks[r.rng.Intn(len(cks))]
		}
	case tr.act == actRestore:
		tr.target = cks[r.rng.Intn(len(cks))]
	case tr.act == actCreate || tr.act == actUpload:
		tr.memory = r.rng.Intn(4) == 0
	}
	switch tr.act {
	case actBrowse:
		tr.delay = time.Duration(r.rng.Int63n(int64(crashBrowseKillMax)))
	case actUpload:
		tr.delay = time.Duration(r.rng.Int63n(int64(crashUploadKillMax)))
	case actGC:
		tr.delay = time.Duration(r.rng.Int63n(int64(crashGCKillMax)))
	default:
		tr.delay = time.Duration(r.rng.Int63n(int64(crashKillMax)))
	}
	tr.mark = fmt.Sprintf("t%d", n)
	return tr
}

// run writes the trial's mark into its sandbox, starts the operation,
// kills cairnd with SIGKILL at the trial's moment and starts it again.
func (r *crashRun) run(tr *trial) {
	d := r.d
	if _, err := d.execOut(crashExecDeadline, tr.sandbox, "/bin/sh", "-c", "echo "+tr.mark+" > /root/mark && sync"); err != nil {
		r.fatalf(tr, "writing the trial's mark before the operation: %v", err)
	}
	r.written[tr.sandbox] = append(r.written[tr.sandbox], tr.mark)
	r.stats.trials[tr.act]++
	if tr.viaCLI {
		r.stats.viaCLI[tr.act]++
	}
	if tr.memory {
		r.stats.memory++
	}
	if tr.diskOnly {
		r.stats.diskOnly++
	}
	logFrom := d.logSize()
	done := make(chan crashAnswer, 1)
	go func() { done <- r.operate(tr) }()
	if tr.act.afterAnswer() {
		select {
		case tr.answer = <-done:
		case <-time.After(time.Minute):
			r.fatalf(tr, "the %s that precedes the %s did not answer within a minute (cairnd was not killed yet)", opOf(tr), tr.act)
		}
		if tr.answer.err != nil {
			r.fatalf(tr, "the %s that precedes the %s failed (cairnd was not killed yet): %v", opOf(tr), tr.act, tr.answer.err)
		}
		tr.answered = true
		r.untilBackground(tr)
		time.Sleep(tr.delay)
	} else {
		if tr.act == actGC {
			r.untilRowGone(tr)
		}
		time.Sleep(tr.delay)
		select {
		case tr.answer = <-done:
			tr.answered = true
		default:
		}
	}
	d.kill(syscall.SIGKILL)
	if tr.act == actUpload || tr.act == actGC {
		r.notePhase(tr, d.logSince(logFrom))
	}
	if !tr.answered {
		select {
		case tr.answer = <-done:
		case <-time.After(crashAnswerDeadline):
			r.fatalf(tr, "the %s's caller did not return within %v after cairnd was killed: it hangs on a dead daemon", opOf(tr), crashAnswerDeadline)
		}
	}
	switch {
	case tr.act.afterAnswer():
		r.stats.after[tr.act]++
	case tr.answered:
		r.stats.after[tr.act]++
	default:
		r.stats.mid[tr.act]++
	}
	if tr.answered && tr.answer.err != nil {
		r.fatalf(tr, "%s failed before cairnd was killed (it should have worked): %v", opOf(tr), tr.answer.err)
	}
	tr.logFrom = d.logSize()
	t0 := time.Now()
	d.start()
	r.stats.restartTimes = append(r.stats.restartTimes, time.Since(t0))
	r.stats.daemonRestarts++
}

// cliErr runs the CLI and returns its stdout, or an error with its exit
// code and output. Unlike cli, it may run on any goroutine.
func (d *daemon) cliErr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "cairn"), append([]string{"--socket", d.socket}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), fmt.Errorf("cairn %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(e.String()+" "+o.String()))
	}
	return o.String(), nil
}

// execOut runs argv in sandbox name through the Go client and returns its
// stdout; an exit code other than 0 is an error with its stderr. Unlike
// sh, it may run on any goroutine.
func (d *daemon) execOut(timeout time.Duration, name string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var o, e bytes.Buffer
	st, err := d.client.Exec(ctx, name, api.ExecRequest{Command: argv}, client.ExecIO{Stdout: &o, Stderr: &e})
	switch {
	case err != nil && ctx.Err() != nil:
		return o.String(), fmt.Errorf("exec %q in %s: no answer within %v", argv, name, timeout)
	case err != nil:
		return o.String(), fmt.Errorf("exec %q in %s: %w", argv, name, err)
	case st.Code != 0:
		return o.String(), fmt.Errorf("exec %q in %s: exit %d: %s", argv, name, st.Code, strings.TrimSpace(e.String()))
	}
	return o.String(), nil
}

// fatalf fails the run with the trial, the seed and the trials before it.
func (r *crashRun) fatalf(tr *trial, format string, args ...any) {
	r.t.Helper()
	r.failf(tr.String(), tr.n, format, args...)
}

// failf fails the run: where says what ran, n how many trials a rerun needs.
func (r *crashRun) failf(where string, n int, format string, args ...any) {
	r.t.Helper()
	last := r.history
	if len(last) > 5 {
		last = last[len(last)-5:]
	}
	if len(last) == 0 {
		last = []string{"(none)"}
	}
	r.t.Fatalf("%s\n  FAILED: %s\n  seed %d (rerun: CAIRN_CRASH_SEED=%d CAIRN_CRASH_TRIALS=%d); the trials before it:\n    %s\n  pool subvolumes:\n    %s",
		where, fmt.Sprintf(format, args...), r.seed, r.seed, n, strings.Join(last, "\n    "), strings.Join(r.d.subvolumes(), "\n    "))
}

// subvolumes lists the pool's subvolumes, relative to the pool.
func (d *daemon) subvolumes() []string {
	out, err := exec.Command("btrfs", "subvolume", "list", filepath.Join(d.dataDir, "pool")).Output()
	if err != nil {
		return []string{fmt.Sprintf("(btrfs subvolume list: %v)", err)}
	}
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if i := strings.Index(line, " path "); i >= 0 {
			paths = append(paths, line[i+len(" path "):])
		}
	}
	sort.Strings(paths)
	return paths
}

// logSince returns cairnd's log from byte offset off on.
func (d *daemon) logSince(off int64) []string {
	f, err := os.Open(filepath.Join(d.dataDir, "cairnd.log"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(off, 0); err != nil {
		d.t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// logSize is the length of cairnd's log now.
func (d *daemon) logSize() int64 {
	st, err := os.Stat(filepath.Join(d.dataDir, "cairnd.log"))
	if err != nil {
		return 0
	}
	return st.Size()
}

// sortedByAge returns cks newest first.
func sortedByAge(cks []api.Checkpoint) []api.Checkpoint {
	out := slices.Clone(cks)
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out
}

func (r *crashRun) report() {
	s := &r.stats
	t := r.t
	total := 0
	for a := crashAction(0); a < numActions; a++ {
		total += s.trials[a]
	}
	if total == 0 {
		return
	}
	t.Logf("crash trials: %d in %v (seed %d)", total, time.Since(s.start).Round(time.Second), r.seed)
	for a := crashAction(0); a < numActions; a++ {
		switch a {
		case actBrowse:
			t.Logf("  %-18s %3d trials (%d via the CLI), all killed 0-%v after the answer", a, s.trials[a], s.viaCLI[a], crashBrowseKillMax)
			continue
		case actUpload, actGC:
			continue // reportOffsite
		}
		t.Logf("  %-18s %3d trials (%d via the CLI): %d killed mid-operation, %d after the answer", a, s.trials[a], s.viaCLI[a], s.mid[a], s.after[a])
	}
	t.Logf("  memory checkpoints asked for: %d", s.memory)
	r.reportOffsite()
	t.Logf("  rollbacks and snapshot restores with --disk-only: %d", s.diskOnly)
	t.Logf("  forks cut short whose operation answered after the restart: %v", s.forkOutcomes)
	t.Logf("  snapshot restores cut short: the new sandbox after the restart, and what their operation answered: %v", s.snapOutcomes)
	t.Logf("  cairnd restarts: %d; sandboxes adopted at start: %d, started again by cairnd: %d, found stopped and started by the test: %d, found crashed and started again by their policy: %d",
		s.daemonRestarts, s.adopted, s.restartedByCairnd, s.restartedByTest, s.crashedRestarted)
	for _, f := range []struct {
		what  string
		times []time.Duration
	}{{"time per trial", s.trialTimes}, {"  of which cairnd's restart", s.restartTimes}, {"  of which the checks", s.checkTimes}} {
		if n := len(f.times); n > 0 {
			times := slices.Clone(f.times)
			slices.Sort(times)
			var sum time.Duration
			for _, d := range times {
				sum += d
			}
			t.Logf("  %s: mean %v, median %v, p90 %v, max %v", f.what,
				(sum / time.Duration(n)).Round(time.Millisecond), times[n/2].Round(time.Millisecond),
				times[n*9/10].Round(time.Millisecond), times[n-1].Round(time.Millisecond))
		}
	}
	if s.restores > 0 {
		t.Logf("  restore-every-checkpoint rounds: %d, %d restores as new, %v each on average", s.restoreRounds, s.restores, (s.restoreTime / time.Duration(s.restores)).Round(time.Millisecond))
	}
	if len(s.logWarnings) > 0 {
		msgs := make([]string, 0, len(s.logWarnings))
		for m := range s.logWarnings {
			msgs = append(msgs, m)
		}
		sort.Strings(msgs)
		t.Logf("  cairnd warnings and errors after restarts:")
		for _, m := range msgs {
			t.Logf("    %4d× %s", s.logWarnings[m], m)
		}
	}
}
