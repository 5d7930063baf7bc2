package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// The checks of TestCrashTrials, after each restart, every few trials and
// at the end.

// browseScript prints one line per entry of /.cairn/checkpoints: its name
// and the /root/mark it holds ("-" when it has none).
const browseScript = `cd /.cairn/checkpoints && for id in $(ls); do printf '%s %s\n' "$id" "$(cat "$id/root/mark" 2>/dev/null || echo -)"; done`

// check runs after every restart: cairnd answers; every sandbox answers
// exec and holds the mark it should; what was acknowledged survived;
// /.cairn/checkpoints shows the five newest; the restarted cairnd does not
// keep failing to refresh it.
func (r *crashRun) check(tr *trial) {
	d := r.d
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.client.ServerInfo(ctx); err != nil {
		r.fatalf(tr, "cairnd does not answer after its restart: %v", err)
	}
	for _, name := range r.names {
		mark := r.execMark(tr, name)
		allowed := []string{r.cur[name]}
		if name == tr.sandbox {
			allowed = []string{tr.mark}
		}
		if name == tr.sandbox && tr.act.inPlace() {
			want := r.marksOf(tr.target)
			if tr.answered {
				if !slices.Contains(want, mark) {
					r.fatalf(tr, "the %s answered that it was done before the kill, but /root/mark of %s reads %q after the restart, not %s's %q",
						opOf(tr), name, mark, tr.target.ID, want)
				}
			} else if !slices.Contains(want, mark) && mark != tr.mark {
				r.fatalf(tr, "after a kill during the %s, /root/mark of %s reads %q: neither the state before it (%q) nor %s's (%q)",
					opOf(tr), name, mark, tr.mark, tr.target.ID, want)
			}
		} else if !slices.Contains(allowed, mark) {
			r.fatalf(tr, "/root/mark of %s reads %q after the restart, want %q: its disk changed though nothing restored it", name, mark, allowed[0])
		}
		r.cur[name] = mark
	}
	for _, name := range r.names {
		r.checkSurvivors(tr, name)
		r.known[name] = r.checkBrowse(tr, name)
	}
	switch tr.act {
	case actFork:
		r.checkFork(tr)
	case actSnapRestore:
		r.checkSnapRestore(tr)
	case actUpload:
		r.checkUploadResumes(tr)
	case actGC:
		r.checkCollected(tr)
	}
	r.checkLog(tr)
	if before := r.off.kept; r.keptManifests() != before {
		r.t.Logf("%s: cairnd now keeps %d manifests that no checkpoint names (an upload committed off-site whose record the kill prevented)", tr, r.off.kept)
	}
}

// execMark reads /root/mark of sandbox name within crashExecDeadline. A
// sandbox that does not answer must be stopped, with the reason in
// cairnd's log since the restart; it is started again then.
func (r *crashRun) execMark(tr *trial, name string) string {
	d := r.d
	out, err := d.execOut(crashExecDeadline, name, "cat", "/root/mark")
	if err == nil {
		return strings.TrimSpace(out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, ierr := d.client.Sandbox(ctx, name)
	if ierr != nil {
		r.fatalf(tr, "sandbox %s does not answer exec within %v after the restart (%v), and cairn info fails: %v", name, crashExecDeadline, err, ierr)
	}
	if sb.State == api.StateCrashed {
		return r.crashedMark(tr, name, sb, err)
	}
	if sb.State != api.StateStopped {
		r.fatalf(tr, "sandbox %s does not answer exec within %v after the restart, and is %s (not stopped or crashed; agent connected: %v, container %s): %v",
			name, crashExecDeadline, sb.State, sb.AgentConnected, sb.Container, err)
	}
	var reasons []string
	about := regexp.MustCompile(`\bsandbox=` + regexp.QuoteMeta(name) + `(\s|$)`)
	for _, line := range d.logSince(tr.logFrom) {
		if about.MatchString(line) && logMsg.MatchString(line) {
			reasons = append(reasons, line)
		}
	}
	if len(reasons) == 0 {
		r.fatalf(tr, "sandbox %s is stopped after the restart, and cairnd's log says nothing about why (exec: %v)", name, err)
	}
	r.t.Logf("%s: sandbox %s is stopped after the restart (%s); starting it", tr, name, strings.Join(reasons, " | "))
	r.stats.restartedByTest++
	if _, err := d.cliErr("start", name); err != nil {
		r.fatalf(tr, "sandbox %s, stopped after the restart, does not start: %v", name, err)
	}
	out, err = d.execOut(crashExecDeadline, name, "cat", "/root/mark")
	if err != nil {
		r.fatalf(tr, "sandbox %s, stopped after the restart and started, does not answer exec: %v", name, err)
	}
	return strings.TrimSpace(out)
}

// crashedMark handles a sandbox found crashed after a restart (its
// processes died with the killed cairnd's work, e.g. a container a restore
// was starting): it must say why, and its restart policy (on-failure)
// must bring it back from its disk within crashRestartDeadline.
func (r *crashRun) crashedMark(tr *trial, name string, sb api.Sandbox, execErr error) string {
	if sb.LastCrash == nil || sb.LastCrash.What == "" {
		r.fatalf(tr, "sandbox %s is crashed after the restart without a reason (exec: %v)", name, execErr)
	}
	r.t.Logf("%s: sandbox %s is crashed after the restart (%s); waiting for cairnd to start it again", tr, name, sb.LastCrash.What)
	r.stats.crashedRestarted++
	deadline := time.Now().Add(crashRestartDeadline)
	for {
		out, err := r.d.execOut(crashExecDeadline, name, "cat", "/root/mark")
		if err == nil {
			return strings.TrimSpace(out)
		}
		if time.Now().After(deadline) {
			r.fatalf(tr, "sandbox %s, crashed after the restart (%s), is not running again from its disk within %v: %v",
				name, sb.LastCrash.What, crashRestartDeadline, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// crashRestartDeadline bounds how long a crashed sandbox may take to be
// started again by its restart policy (first delay 1 s, then a start).
const crashRestartDeadline = 20 * time.Second

// checkSurvivors compares sandbox name's checkpoints with those before the
// trial: none went but the one deleted, an acknowledged create or delete
// holds, and what is new is what the trial (or the interval) may make.
func (r *crashRun) checkSurvivors(tr *trial, name string) {
	cks := r.list(tr, name)
	now := map[string]api.Checkpoint{}
	for _, ck := range cks {
		now[ck.ID] = ck
	}
	deleting := name == tr.sandbox && (tr.act == actDelete || tr.act == actGC || tr.browseDelete)
	for _, ck := range r.known[name] {
		if _, ok := now[ck.ID]; ok {
			if deleting && ck.ID == tr.target.ID && tr.answered {
				r.fatalf(tr, "checkpoint delete of %s answered that it was done before the kill, but %s of %s is listed again after the restart", ck.ID, ck.ID, name)
			}
			continue
		}
		if deleting && ck.ID == tr.target.ID {
			continue
		}
		if ck.Trigger != api.TriggerManual && time.Since(ck.CreatedAt) > 55*time.Minute {
			continue // retention may thin out automatic checkpoints older than an hour
		}
		r.fatalf(tr, "checkpoint %s of %s (trigger %s, taken %s) is no longer listed after the restart: a kill lost a checkpoint nobody deleted",
			ck.ID, name, ck.Trigger, ck.CreatedAt.Format(time.TimeOnly))
	}
	if name == tr.sandbox && tr.answer.created != "" {
		if _, ok := now[tr.answer.created]; !ok {
			r.fatalf(tr, "checkpoint create answered %s before the kill, but %s of %s is not listed after the restart: an acknowledged checkpoint was lost",
				tr.answer.created, tr.answer.created, name)
		}
	}
	for _, ck := range cks {
		if slices.ContainsFunc(r.known[name], func(k api.Checkpoint) bool { return k.ID == ck.ID }) {
			continue
		}
		ok := ck.Trigger == api.TriggerInterval
		if name == tr.sandbox {
			switch ck.Trigger {
			case api.TriggerManual:
				ok = tr.act == actCreate || tr.act == actUpload || (tr.act == actBrowse && !tr.browseDelete)
			case api.TriggerRestore:
				ok = tr.act.inPlace()
			case api.TriggerFork:
				ok = tr.act == actFork
			}
		}
		if !ok {
			r.fatalf(tr, "after the restart %s has a new checkpoint %s with trigger %s, which this trial does not make", name, ck.ID, ck.Trigger)
		}
		if _, seen := r.pending[ck.GlobalID]; !seen && r.marks[ck.GlobalID] == "" {
			r.pending[ck.GlobalID] = r.mayHold(tr, name, ck)
		}
	}
}

// list returns sandbox name's checkpoints, automatic ones included.
func (r *crashRun) list(tr *trial, name string) []api.Checkpoint {
	out, err := r.d.cliErr("--json", "checkpoint", "list", name, "--include-auto")
	if err != nil {
		r.fatalf(tr, "checkpoint list of %s fails after the restart: %v", name, err)
	}
	var cks []api.Checkpoint
	if err := json.Unmarshal([]byte(out), &cks); err != nil {
		r.fatalf(tr, "checkpoint list --json of %s: %v: %q", name, err, out)
	}
	return cks
}

// checkBrowse waits until /.cairn/checkpoints of sandbox name lists
// exactly its five newest checkpoints, and checks the mark in each: what
// the test recorded, or for a new checkpoint what it may hold (recorded
// then). It returns the sandbox's checkpoints.
func (r *crashRun) checkBrowse(tr *trial, name string) []api.Checkpoint {
	deadline := time.Now().Add(crashBrowseDeadline)
	for {
		cks := r.list(tr, name)
		byID := map[string]api.Checkpoint{}
		var want []string
		for i, ck := range sortedByAge(cks) {
			byID[ck.ID] = ck
			if i < 5 {
				want = append(want, ck.ID)
			}
		}
		sort.Strings(want)
		out, err := r.d.execOut(crashExecDeadline, name, "/bin/sh", "-c", browseScript)
		var got []string
		marks := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if id, mark, ok := strings.Cut(line, " "); ok {
				got = append(got, id)
				marks[id] = mark
			}
		}
		sort.Strings(got)
		if err == nil && slices.Equal(got, want) {
			for _, id := range got {
				r.checkMark(tr, "/.cairn/checkpoints/"+id+"/root/mark in "+name, name, byID[id], marks[id])
			}
			return cks
		}
		if time.Now().After(deadline) {
			var all []string
			for _, ck := range sortedByAge(cks) {
				all = append(all, ck.ID)
			}
			problem := fmt.Sprintf("it lists %v", got)
			if err != nil {
				problem = fmt.Sprintf("ls in it fails: %v", err)
			} else if missing, extra := setDiff(want, got), setDiff(got, want); len(missing)+len(extra) > 0 {
				problem += fmt.Sprintf(": missing %v, extra %v", missing, extra)
			}
			note := "no refresh of it failed in cairnd's log since the restart, and none brought it up to date"
			if f := r.refreshFailures(tr); len(f) > 0 {
				note = fmt.Sprintf("cairnd's log since the restart has %d failed refreshes of it, the last:\n    %s", len(f), f[len(f)-1])
			}
			r.fatalf(tr, "/.cairn/checkpoints in %s does not hold the five newest checkpoints %v after the restart: %s; want %v (the five newest by creation time in checkpoint list --include-auto, newest first: %v); %s",
				name, crashBrowseDeadline, problem, want, all, note)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkMark checks the /root/mark that checkpoint ck of sandbox name
// shows (under /.cairn/checkpoints, or in a sandbox restored from it): the
// mark recorded for it, or for a checkpoint seen for the first time one it
// may hold, which is recorded then.
func (r *crashRun) checkMark(tr *trial, where, name string, ck api.Checkpoint, mark string) {
	if known := r.marks[ck.GlobalID]; known != "" {
		if mark != known {
			r.fatalf(tr, "%s reads %q, but checkpoint %s of %s was taken with %q%s", where, mark, ck.ID, name, known, r.onHost(name, ck, known))
		}
		return
	}
	allowed, ok := r.pending[ck.GlobalID]
	if !ok {
		allowed = r.mayHold(tr, name, ck)
	}
	if !slices.Contains(allowed, mark) {
		r.fatalf(tr, "%s reads %q, want %q: new checkpoint %s of %s (trigger %s) does not hold the disk as it was when it was taken%s",
			where, mark, allowed, ck.ID, name, ck.Trigger, r.onHost(name, ck, allowed...))
	}
	r.marks[ck.GlobalID] = mark
	delete(r.pending, ck.GlobalID)
}

// onHost says, for a developer, what the checkpoint's /root/mark holds
// on the host, wherever the pool keeps a subvolume of it, and whether that
// is a mark it should hold (a diagnostic: the checks themselves look only
// through the CLI and the client).
func (r *crashRun) onHost(name string, ck api.Checkpoint, want ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sb, err := r.d.client.Sandbox(ctx, name)
	if err != nil {
		return ""
	}
	var found []string
	right := false
	for _, path := range r.d.subvolumes() {
		if strings.HasSuffix(path, "/"+ck.GlobalID) || strings.HasSuffix(path, sb.ID+"/"+ck.ID) {
			b, err := os.ReadFile(filepath.Join(r.d.dataDir, "pool", path, "root", "mark"))
			if err != nil {
				found = append(found, fmt.Sprintf("%s: %v", path, err))
			} else {
				found = append(found, fmt.Sprintf("%s: %q", path, strings.TrimSpace(string(b))))
				right = right || slices.Contains(want, strings.TrimSpace(string(b)))
			}
		}
	}
	if len(found) == 0 {
		return fmt.Sprintf("\n  on the host no subvolume of the pool is named after %s (%s)", ck.ID, ck.GlobalID)
	}
	note := ""
	if right {
		note = "\n  the pool holds the right file: what the sandbox sees of it is not what is on the disk"
	}
	return "\n  on the host its /root/mark in the pool: " + strings.Join(found, "; ") + note
}

// marksOf returns the mark checkpoint ck holds, or those it may hold
// while it has not been seen yet.
func (r *crashRun) marksOf(ck api.Checkpoint) []string {
	if m := r.marks[ck.GlobalID]; m != "" {
		return []string{m}
	}
	return r.pending[ck.GlobalID]
}

// mayHold returns the marks a checkpoint of sandbox name that appeared
// during trial tr may hold: an interval checkpoint whatever the disk held
// then; one the trial made the mark written just before it.
func (r *crashRun) mayHold(tr *trial, name string, ck api.Checkpoint) []string {
	if ck.Trigger == api.TriggerInterval || name != tr.sandbox {
		return slices.Clone(r.written[name])
	}
	return []string{tr.mark}
}

// setDiff returns the elements of a not in b.
func setDiff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

var logMsg = regexp.MustCompile(`level=(WARN|ERROR) msg=("(?:[^"\\]|\\.)*"|\S+)`)

// refreshFailures returns the lines of cairnd's log since the restart that
// say a refresh of /.cairn/checkpoints failed.
func (r *crashRun) refreshFailures(tr *trial) []string {
	var out []string
	for _, line := range r.d.logSince(tr.logFrom) {
		if strings.Contains(line, "refresh /.cairn/checkpoints") && logMsg.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// checkLog fails when the restarted cairnd failed to refresh
// /.cairn/checkpoints more than once (once can be a refresh a later one
// repaired; twice is a state it does not repair), and counts its warnings
// and how it took over the sandboxes.
func (r *crashRun) checkLog(tr *trial) {
	if f := r.refreshFailures(tr); len(f) >= 2 {
		r.fatalf(tr, "cairnd's log since the restart holds %d failed refreshes of /.cairn/checkpoints, a state it does not repair; the first and the last:\n    %s\n    %s",
			len(f), f[0], f[len(f)-1])
	}
	for _, line := range r.d.logSince(tr.logFrom) {
		switch {
		case strings.Contains(line, `msg="recover: adopted running sandbox"`):
			r.stats.adopted++
		case strings.Contains(line, `msg="recover: starting sandbox that should be running"`):
			r.stats.restartedByCairnd++
		}
		if m := logMsg.FindStringSubmatch(line); m != nil {
			r.stats.logWarnings[m[1]+" "+strings.Trim(m[2], `"`)]++
		}
	}
}

// restoreAll restores every checkpoint of every sandbox as a new sandbox,
// checks that it holds the mark it was taken with, and deletes it.
func (r *crashRun) restoreAll(when string) {
	d := r.d
	start := time.Now()
	r.stats.restoreRounds++
	for _, name := range r.names {
		for _, ck := range r.known[name] {
			t0 := time.Now()
			out, err := d.cliErr("--json", "checkpoint", "restore", name, ck.ID, "--as", crashTmp)
			if err != nil {
				r.failf(when, len(r.history), "checkpoint %s of %s (%s, trigger %s) does not restore as a new sandbox: %v", ck.ID, name, ck.GlobalID, ck.Trigger, err)
			}
			var sb api.Sandbox
			json.Unmarshal([]byte(out), &sb)
			r.tmpIDs = append(r.tmpIDs, sb.ID)
			got, err := d.execOut(crashExecDeadline, crashTmp, "cat", "/root/mark")
			if err != nil {
				r.failf(when, len(r.history), "the sandbox restored from checkpoint %s of %s does not answer exec: %v", ck.ID, name, err)
			}
			r.checkMark(&trial{label: when, n: len(r.history)}, "/root/mark in the sandbox restored from it", name, ck, strings.TrimSpace(got))
			if _, err := d.cliErr("delete", crashTmp); err != nil {
				r.failf(when, len(r.history), "cairn delete of %s, restored from checkpoint %s of %s, fails: %v", crashTmp, ck.ID, name, err)
			}
			r.stats.restores++
			r.stats.restoreTime += time.Since(t0)
		}
	}
	r.t.Logf("%s: every checkpoint restored as new with its files (%d in %v)", when, len(r.known["crash-a"])+len(r.known["crash-b"]), time.Since(start).Round(time.Millisecond))
}

// deleteAll deletes every sandbox and checks that nothing is left behind
// but the checkpoints that outlive a sandbox: its automatic ones (14
// days) with the final one, its named ones, and its manual ones.
func (r *crashRun) deleteAll() {
	d := r.d
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	remain := map[string]api.Checkpoint{} // global id → a checkpoint that outlives its sandbox
	ids := slices.Clone(r.tmpIDs)         // every sandbox id the run made
	for _, name := range r.names {
		sb, err := d.client.Sandbox(ctx, name)
		if err != nil {
			r.failf("at the end", len(r.history), "cairn info %s: %v", name, err)
		}
		ids = append(ids, sb.ID)
		for _, ck := range r.list(&trial{label: "at the end", n: len(r.history)}, name) {
			remain[ck.GlobalID] = ck
		}
		if _, err := d.cliErr("delete", name); err != nil {
			r.failf("at the end", len(r.history), "cairn delete %s fails after the crash trials: %v", name, err)
		}
	}
	if p := d.poolEntries(); len(p) != 0 {
		r.failf("at the end", len(r.history), "after every sandbox was deleted the pool still holds sandbox roots %v", p)
	}
	if c := d.containers(); len(c) != 0 {
		r.failf("at the end", len(r.history), "after every sandbox was deleted runsc still has containers %v", c)
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(d.dataDir, "browse", id)); !os.IsNotExist(err) {
			r.failf("at the end", len(r.history), "the browse view of deleted sandbox %s is still served: %v", id, err)
		}
	}
	if m := d.mountsUnder(); len(m) != 0 {
		r.failf("at the end", len(r.history), "after every sandbox was deleted these are still mounted under the data dir: %v", m)
	}
	for _, id := range ids {
		if _, err := os.Stat(filepath.Join(d.dataDir, "sandboxes", id)); err == nil {
			r.failf("at the end", len(r.history), "the host directory of deleted sandbox %s is still there", id)
		}
	}
	for _, name := range r.names {
		if code := d.errorCode("checkpoint", "list", name); code != api.CodeNoSandbox {
			r.failf("at the end", len(r.history), "checkpoint list of deleted sandbox %s answers %s, want %s", name, code, api.CodeNoSandbox)
		}
	}
	var snaps []api.Checkpoint
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "snapshot", "list")), &snaps); err != nil {
		r.t.Fatal(err)
	}
	listed := map[string]bool{}
	finals, tmpFinals := 0, 0
	for _, s := range snaps {
		listed[s.GlobalID] = true
		_, before := remain[s.GlobalID]
		switch {
		case !s.SandboxDeleted:
			r.failf("at the end", len(r.history), "snapshot list shows %s of %s as of a sandbox that exists; every sandbox was deleted", s.ID, s.Sandbox)
		case before:
		case s.Trigger == api.TriggerDelete && (s.Sandbox == crashTmp || r.tmpNames[s.Sandbox]):
			tmpFinals++
		case s.Trigger == api.TriggerDelete && slices.Contains(r.names, s.Sandbox):
			finals++
			remain[s.GlobalID] = s
		default:
			r.failf("at the end", len(r.history), "snapshot list holds %s (%s of %s, trigger %s), which no sandbox left", s.GlobalID, s.ID, s.Sandbox, s.Trigger)
		}
	}
	if finals != len(r.names) {
		r.failf("at the end", len(r.history), "snapshot list holds %d final checkpoints (trigger delete) of the deleted sandboxes, want %d", finals, len(r.names))
	}
	manual := 0
	for gid, ck := range remain {
		if ck.Trigger == api.TriggerManual && ck.Name == "" {
			manual++
		}
		if !listed[gid] {
			r.failf("at the end", len(r.history), "checkpoint %s of deleted sandbox %s (trigger %s) is gone from snapshot list; a deleted sandbox's unnamed checkpoints are kept 14 days, named ones until deleted", ck.ID, ck.Sandbox, ck.Trigger)
		}
	}
	// Uploads of the final checkpoints work in temporary subvolumes: wait
	// for them to end.
	var subvolumes []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		subvolumes = d.subvolumes()
		if !slices.ContainsFunc(subvolumes, func(p string) bool { return strings.HasPrefix(p, "tmp/") }) || time.Now().After(deadline) {
			break
		}
	}
	for _, path := range subvolumes {
		parts := strings.Split(path, "/")
		if parts[0] == "images" {
			continue
		}
		if i := slices.IndexFunc(parts, func(p string) bool { return slices.Contains(ids, p) }); i >= 0 {
			r.failf("at the end", len(r.history), "subvolume %s of the pool belongs to deleted sandbox %s", path, parts[i])
		}
		owned := slices.ContainsFunc(parts, func(p string) bool { _, ok := remain[p]; return ok || listed[p] })
		if !owned {
			r.failf("at the end", len(r.history), "subvolume %s of the pool belongs to no checkpoint that remains", path)
		}
	}
	var left []api.Sandbox
	if out := d.mustCLI("--json", "list"); json.Unmarshal([]byte(out), &left) != nil || len(left) != 0 {
		r.failf("at the end", len(r.history), "cairn list shows sandboxes after every sandbox was deleted: %s", out)
	}
	var acct api.AccountInfo
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "account")), &acct); err != nil {
		r.t.Fatal(err)
	}
	if acct.Sandboxes != 0 {
		r.failf("at the end", len(r.history), "cairn account counts %d sandboxes after every sandbox was deleted", acct.Sandboxes)
	}
	r.t.Logf("at the end: every sandbox deleted; left as designed: %d checkpoints in snapshot list (%d automatic of crash-a/b, %d of them final, %d final ones of %s), %d of them manual; cairn account counts %d checkpoints",
		len(snaps), len(snaps)-tmpFinals, finals, tmpFinals, crashTmp, manual, acct.Checkpoints)
}

// mountsUnder lists the mounts under the data dir other than the pool and
// runsc's own empty network namespace.
func (d *daemon) mountsUnder() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		d.t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[4], d.dataDir+"/") {
			continue
		}
		// The pool, runsc's empty network namespace and the browse view
		// (served for every sandbox by one server that outlives cairnd)
		// belong to the data dir, not to a sandbox.
		if f[4] == filepath.Join(d.dataDir, "pool") || f[4] == filepath.Join(d.dataDir, "runsc", "null-netns") ||
			f[4] == filepath.Join(d.dataDir, "browse") {
			continue
		}
		out = append(out, f[4])
	}
	return out
}
