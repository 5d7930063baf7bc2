package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
)

// The off-site side of TestCrashTrials: cairnd keeps every checkpoint in
// two real S3 servers (versitygw); some trials kill it while an upload
// runs or while the off-site delete (with its garbage collection) of a
// checkpoint runs, and the checks see uploads resume and finish, the
// deleted checkpoint's manifest go, verify --offsite stay clean, and, once
// everything is deleted, nothing stay behind off-site.

const (
	offsiteBoth         = "uploaded ×2"         // both locations hold all of the checkpoint
	crashUploadKillMax  = 50 * time.Millisecond // upload: kill within this of seeing it run (an upload of a few changed files takes 25-60 ms)
	crashGCKillMax      = 80 * time.Millisecond // off-site delete: kill within this of the row's going (it takes 40-60 ms)
	crashUploadWait     = 30 * time.Second      // the test waits this long for the upload to start before it kills anyway
	crashUploadDeadline = time.Minute           // after the restart, the cut-short upload is uploaded ×2 within this
	crashGCDeadline     = time.Minute           // after the restart, the deleted checkpoint's manifest is gone within this
	crashSettleDeadline = 3 * time.Minute       // every checkpoint uploaded ×2 and no stray manifest, at the rounds
)

// crashOffsite is the run's two off-site locations, east and west.
type crashOffsite struct {
	srv    [2]*s3test.Server
	config string // cairnd's config file naming them

	logOff int64 // cairnd's log read up to here for "manifests kept"
	kept   int   // the last count of manifests kept that no checkpoint names
}

func startCrashOffsite(t *testing.T) *crashOffsite {
	srv, locs := s3Locations(t)
	return &crashOffsite{srv: srv, config: offsiteConfig(t, locs, "")}
}

// bgPhase is where an upload or an off-site delete was when cairnd was
// killed, as its log and the checkpoint's state tell.
type bgPhase int

const (
	bgPending bgPhase = iota // not killed yet
	bgQueued                 // upload: not seen running
	bgRunning                // seen running (upload) or started (delete), not finished
	bgDone                   // finished before the kill
	numPhases
)

func (p bgPhase) String() string {
	return [...]string{"kill pending", "not started at the kill", "in flight at the kill", "finished before the kill"}[p]
}

// offsiteStats are the off-site figures of the run.
type offsiteStats struct {
	uploadStart    []time.Duration // from a create's answer to its upload seen running
	rowGone        []time.Duration // from a delete's start to its checkpoint no longer listed
	uploadResume   []time.Duration // upload trials: from the restart's end to uploaded ×2
	gcResume       []time.Duration // GC trials: from the restart's end to the manifest gone
	gcNoManifest   int             // GC trials whose checkpoint was not uploaded yet
	settle         []time.Duration // rounds: until everything is uploaded ×2
	verifies       int
	verifyTime     time.Duration
	objects        [2]int // in each location at the last verify
	finalsDeleted  int    // final checkpoints of crash-tmp, fork children and snapshot restores
	endDeleted     int    // checkpoints deleted at the end
	maxStrayAtEnd  int
	strayManifests int // kept that no checkpoint names (a crash between commit and record)
}

// untilBackground waits, in an upload trial, until the new checkpoint's
// upload is seen running (or done), for crashUploadWait at most.
func (r *crashRun) untilBackground(tr *trial) {
	if tr.act != actUpload {
		return
	}
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ck, err := r.d.client.Checkpoint(ctx, tr.sandbox, tr.answer.created)
		cancel()
		if err == nil && ck.Offsite == api.OffsiteUploading {
			tr.sawUpload = true
			r.stats.offsite.uploadStart = append(r.stats.offsite.uploadStart, time.Since(start))
			return
		}
		if err == nil && strings.HasPrefix(ck.Offsite, api.OffsiteUploaded) || time.Since(start) > crashUploadWait {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// untilRowGone waits, in a GC trial, until the deleted checkpoint is no
// longer listed (its row is gone, its manifest queued for the off-site
// delete, and the queue woken), for crashAnswerDeadline at most.
func (r *crashRun) untilRowGone(tr *trial) {
	start := time.Now()
	for time.Since(start) < crashAnswerDeadline {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := r.d.client.Checkpoint(ctx, tr.sandbox, tr.target.ID)
		cancel()
		if err != nil && strings.Contains(err.Error(), api.CodeNoCheckpoint) {
			tr.rowGone = true
			r.stats.offsite.rowGone = append(r.stats.offsite.rowGone, time.Since(start))
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// bgStart names what an upload or GC trial's delay counts from.
func bgStart(tr *trial) string {
	switch {
	case tr.act == actGC && tr.rowGone:
		return "the checkpoint's row went"
	case tr.act == actGC:
		return "the delete began (its row not seen gone)"
	case tr.sawUpload:
		return "its upload was seen running"
	}
	return "the create answered (its upload not seen running)"
}

// notePhase records where the background work of an upload or GC trial
// was at the kill, from cairnd's log of the trial (lines).
func (r *crashRun) notePhase(tr *trial, lines []string) {
	tr.bg = bgRunning
	for _, line := range lines {
		switch {
		case tr.act == actUpload && strings.Contains(line, `msg="off-site: uploaded"`) && strings.Contains(line+" ", "global_id="+tr.answer.global+" "):
			tr.bg = bgDone
		case tr.act == actGC && strings.Contains(line, `msg="off-site: deleted"`):
			tr.bg = bgDone
		}
	}
	if tr.act == actUpload && tr.bg != bgDone && !tr.sawUpload {
		tr.bg = bgQueued
	}
	r.stats.bg[tr.act][tr.bg]++
}

// checkUploadResumes checks, after an upload trial's restart, that the
// new checkpoint's upload resumes and finishes: uploaded ×2 within
// crashUploadDeadline.
func (r *crashRun) checkUploadResumes(tr *trial) {
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ck, err := r.d.client.Checkpoint(ctx, tr.sandbox, tr.answer.created)
		cancel()
		if err == nil && ck.Offsite == offsiteBoth {
			r.stats.offsite.uploadResume = append(r.stats.offsite.uploadResume, time.Since(start))
			return
		}
		if time.Since(start) > crashUploadDeadline {
			detail, _ := json.Marshal(ck.OffsiteDetail)
			r.fatalf(tr, "checkpoint %s of %s is %q, not %q, %v after the restart (%v): the upload cut short did not resume and finish; detail %s",
				tr.answer.created, tr.sandbox, ck.Offsite, offsiteBoth, crashUploadDeadline, err, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkCollected checks, after a GC trial's restart, that the deleted
// checkpoint's manifest leaves both locations within crashGCDeadline: the
// delete is redone from the rows if the kill cut it short (docs/offsite.md
// "Crashes"). It looks at the servers' directories, as the end's check of
// what is left behind does.
func (r *crashRun) checkCollected(tr *trial) {
	if tr.target.OffsiteDetail == nil || tr.target.OffsiteDetail.Manifest == "" {
		r.stats.offsite.gcNoManifest++
		return
	}
	m := tr.target.OffsiteDetail.Manifest
	start := time.Now()
	for {
		var holders []string
		for i, s := range r.off.srv {
			if _, err := os.Stat(filepath.Join(s.Dir(), s.Config.Bucket, "manifests", m)); err == nil {
				holders = append(holders, locationNames[i])
			}
		}
		if len(holders) == 0 {
			r.stats.offsite.gcResume = append(r.stats.offsite.gcResume, time.Since(start))
			return
		}
		if time.Since(start) > crashGCDeadline {
			r.fatalf(tr, "checkpoint %s of %s was deleted, but %v after the restart its manifest %s is still in %v", tr.target.ID, tr.sandbox, crashGCDeadline, m[:12], holders)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var locationNames = [2]string{"east", "west"}

// bucketObjects lists the objects of location i under dir (manifests,
// packs, index).
func (o *crashOffsite) bucketObjects(i int, dir string) []string {
	s := o.srv[i]
	entries, _ := os.ReadDir(filepath.Join(s.Dir(), s.Config.Bucket, dir))
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out
}

var keptLine = regexp.MustCompile(`manifests kept that no checkpoint here names.* manifests=(\d+)`)

// keptManifests is how many manifests cairnd last logged it keeps though
// no checkpoint names them: an upload a kill kept from being recorded
// (docs/offsite.md "Crashes"; a documented leak).
func (r *crashRun) keptManifests() int {
	for _, line := range r.d.logSince(r.off.logOff) {
		if m := keptLine.FindStringSubmatch(line); m != nil {
			r.off.kept, _ = strconv.Atoi(m[1])
		}
	}
	r.off.logOff = r.d.logSize()
	r.stats.offsite.strayManifests = r.off.kept
	return r.off.kept
}

// pruneFinals deletes the final checkpoints (trigger delete) that the
// sandboxes the test made and deleted again left, so that the account does
// not grow by a dozen at every round: more deletes and collections.
func (r *crashRun) pruneFinals(when string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	snaps, err := r.d.client.Snapshots(ctx)
	if err != nil {
		r.failf(when, len(r.history), "snapshot list: %v", err)
	}
	for _, s := range snaps {
		if s.SandboxDeleted && s.Trigger == api.TriggerDelete && (s.Sandbox == crashTmp || r.tmpNames[s.Sandbox]) {
			if _, err := r.d.client.DeleteSnapshot(ctx, s.GlobalID); err != nil {
				r.failf(when, len(r.history), "snapshot delete %s (the final checkpoint of deleted %s): %v", s.GlobalID, s.Sandbox, err)
			}
			r.stats.offsite.finalsDeleted++
		}
	}
}

// checkOffsite runs every crashRestoreEvery trials and at the end: once
// every checkpoint of the account is uploaded ×2 and no location holds a
// manifest that no checkpoint names (but those cairnd says it keeps),
// within crashSettleDeadline, verify --offsite --no-repair is clean in
// both locations.
func (r *crashRun) checkOffsite(when string) {
	r.pruneFinals(when)
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		snaps, err := r.d.client.Snapshots(ctx)
		cancel()
		if err != nil {
			r.failf(when, len(r.history), "snapshot list: %v", err)
		}
		named := map[string]bool{}
		var waiting []string
		for _, s := range snaps {
			if s.Offsite != offsiteBoth {
				waiting = append(waiting, fmt.Sprintf("%s/%s (%s) %q", s.Sandbox, s.ID, s.Trigger, s.Offsite))
			}
			if s.OffsiteDetail != nil && s.OffsiteDetail.Manifest != "" {
				named[s.OffsiteDetail.Manifest] = true
			}
		}
		kept := r.keptManifests()
		var stray []string
		for i := range r.off.srv {
			n := 0
			for _, m := range r.off.bucketObjects(i, "manifests") {
				if !named[m] {
					n++
				}
			}
			if n > kept {
				stray = append(stray, fmt.Sprintf("%s holds %d manifests no checkpoint names (cairnd keeps %d)", locationNames[i], n, kept))
			}
		}
		if len(waiting) == 0 && len(stray) == 0 {
			break
		}
		if time.Since(start) > crashSettleDeadline {
			r.failf(when, len(r.history), "%v after the checks began, off-site has not settled: not uploaded ×2: %v; %v", crashSettleDeadline, waiting, stray)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.stats.offsite.settle = append(r.stats.offsite.settle, time.Since(start))
	r.verifyOffsite(when)
	r.t.Logf("%s: off-site settled in %v, verify --offsite clean (%d and %d objects)", when, time.Since(start).Round(time.Millisecond),
		r.stats.offsite.objects[0], r.stats.offsite.objects[1])
}

// verifyOffsite runs cairn verify --offsite --no-repair and fails unless
// both locations are intact.
func (r *crashRun) verifyOffsite(when string) {
	t0 := time.Now()
	out, err := r.d.cliErr("--json", "verify", "--offsite", "--no-repair")
	r.stats.offsite.verifies++
	r.stats.offsite.verifyTime += time.Since(t0)
	var rep api.VerifyReport
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
		r.failf(when, len(r.history), "verify --offsite: %v (%v): %q", err, jerr, out)
	}
	ok := err == nil && rep.OK && len(rep.Locations) == 2
	for i, l := range rep.Locations {
		ok = ok && l.OK && l.Error == "" && len(l.Problems) == 0
		if i < 2 {
			r.stats.offsite.objects[i] = l.Objects
		}
	}
	if !ok {
		r.failf(when, len(r.history), "verify --offsite --no-repair is not clean: %v\n%s", err, out)
	}
}

// deleteEverything runs after deleteAll: it deletes every checkpoint left
// (the automatic and final ones of the deleted sandboxes), half through
// the CLI, and checks that nothing is left: no snapshot, no checkpoint in
// the pool, and off-site no manifest, pack or index segment but those of
// the manifests cairnd keeps; verify --offsite is clean.
func (r *crashRun) deleteEverything() {
	const when = "at the very end"
	n := len(r.history)
	d := r.d
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	snaps, err := d.client.Snapshots(ctx)
	if err != nil {
		r.failf(when, n, "snapshot list: %v", err)
	}
	for i, s := range snaps {
		if i%2 == 0 {
			_, err = d.cliErr("snapshot", "delete", s.GlobalID)
		} else {
			_, err = d.client.DeleteSnapshot(ctx, s.GlobalID)
		}
		if err != nil {
			r.failf(when, n, "snapshot delete %s (%s of deleted %s, trigger %s): %v", s.GlobalID, s.ID, s.Sandbox, s.Trigger, err)
		}
		r.stats.offsite.endDeleted++
	}
	start := time.Now()
	var problems []string
	for {
		problems = nil
		if left, err := d.client.Snapshots(ctx); err != nil || len(left) != 0 {
			problems = append(problems, fmt.Sprintf("snapshot list: %d checkpoints, %v", len(left), err))
		}
		for _, p := range d.subvolumes() {
			if !strings.HasPrefix(p, "images/") {
				problems = append(problems, "subvolume "+p+" of the pool")
			}
		}
		kept := r.keptManifests()
		for i := range r.off.srv {
			m, p, x := r.off.bucketObjects(i, "manifests"), r.off.bucketObjects(i, "packs"), r.off.bucketObjects(i, "index")
			r.stats.offsite.maxStrayAtEnd = max(r.stats.offsite.maxStrayAtEnd, len(m))
			if len(m) != kept || kept == 0 && len(p)+len(x) != 0 {
				problems = append(problems, fmt.Sprintf("%s holds %d manifests, %d packs, %d index segments (cairnd keeps %d manifests no checkpoint names)",
					locationNames[i], len(m), len(p), len(x), kept))
			}
		}
		if len(problems) == 0 {
			break
		}
		if time.Since(start) > 2*time.Minute {
			r.failf(when, n, "2 min after every checkpoint was deleted, something is left behind: %s", strings.Join(problems, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.verifyOffsite(when)
	var acct api.AccountInfo
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "account")), &acct); err != nil {
		r.t.Fatal(err)
	}
	if acct.Checkpoints != 0 {
		r.failf(when, n, "cairn account counts %d checkpoints after every one was deleted", acct.Checkpoints)
	}
	r.t.Logf("%s: the %d checkpoints left deleted; in %v the pool holds only images and both locations no manifest, pack or index segment but the %d manifests kept",
		when, len(snaps), time.Since(start).Round(time.Millisecond), r.off.kept)
}

// reportOffsite prints the off-site figures.
func (r *crashRun) reportOffsite() {
	s := &r.stats
	o := &s.offsite
	t := r.t
	for _, a := range []crashAction{actUpload, actGC} {
		if s.trials[a] == 0 {
			continue
		}
		var parts []string
		for p := bgQueued; p < numPhases; p++ {
			if s.bg[a][p] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", s.bg[a][p], p))
			}
		}
		if a == actGC {
			parts = append(parts, fmt.Sprintf("the delete itself killed before its answer %d times, after it %d", s.mid[a], s.after[a]))
		}
		t.Logf("  %-18s %3d trials (%d via the CLI): %s", a, s.trials[a], s.viaCLI[a], strings.Join(parts, ", "))
	}
	logTimes(t, "upload seen running after the create answered", o.uploadStart)
	logTimes(t, "GC trials: checkpoint no longer listed after the delete began", o.rowGone)
	logTimes(t, "upload trials: uploaded ×2 after the restart", o.uploadResume)
	logTimes(t, "GC trials: manifest gone from both locations after the restart", o.gcResume)
	if o.gcNoManifest > 0 {
		t.Logf("  GC trials whose checkpoint was not uploaded yet when picked: %d", o.gcNoManifest)
	}
	logTimes(t, "rounds: off-site settled (all uploaded ×2) in", o.settle)
	if o.verifies > 0 {
		t.Logf("  verify --offsite: %d runs, %v each on average; last: %d objects in east, %d in west", o.verifies,
			(o.verifyTime / time.Duration(o.verifies)).Round(time.Millisecond), o.objects[0], o.objects[1])
	}
	t.Logf("  final checkpoints of deleted test sandboxes deleted at the rounds: %d; checkpoints deleted at the very end: %d", o.finalsDeleted, o.endDeleted)
	t.Logf("  manifests kept that no checkpoint names (upload committed, kill before it was recorded): %d", o.strayManifests)
}

// logTimes prints the mean, median, p90 and max of times.
func logTimes(t *testing.T, what string, times []time.Duration) {
	n := len(times)
	if n == 0 {
		return
	}
	times = slices.Clone(times)
	slices.Sort(times)
	var sum time.Duration
	for _, d := range times {
		sum += d
	}
	t.Logf("  %s: mean %v, median %v, p90 %v, max %v (%d)", what,
		(sum / time.Duration(n)).Round(time.Millisecond), times[n/2].Round(time.Millisecond),
		times[n*9/10].Round(time.Millisecond), times[n-1].Round(time.Millisecond), n)
}
