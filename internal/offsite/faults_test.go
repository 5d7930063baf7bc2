package offsite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/retry"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
	"github.com/cairn-sandbox/cairn/internal/testenv/faultproxy"
)

// The tests here put a fault-injecting proxy (faultproxy) in front of each
// of two real S3 servers (versitygw) and check what docs/offsite.md
// promises while the network misbehaves: the states tell the truth, uploads
// and deletes converge once the faults clear, restores give the exact data
// or a clear error, and nothing uploaded ×2 before is lost.

// partitionTime is how long the tests' partitions last:
// CAIRN_FAULT_PARTITION (a Go duration; make fault-trials sets minutes),
// else a few seconds.
func partitionTime(t *testing.T) time.Duration {
	if v := os.Getenv("CAIRN_FAULT_PARTITION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CAIRN_FAULT_PARTITION: %v", err)
		}
		return d
	}
	return 6 * time.Second
}

// faultSeed is CAIRN_FAULT_SEED, else 1.
func faultSeed(t *testing.T) uint64 {
	if v := os.Getenv("CAIRN_FAULT_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CAIRN_FAULT_SEED: %v", err)
		}
		return n
	}
	return 1
}

// faulty is a fixture whose two locations are versitygw servers, each
// reached through a fault proxy.
type faulty struct {
	*fixture
	srv   [2]*s3test.Server
	proxy [2]*faultproxy.Proxy
	stop  context.CancelFunc
	done  chan struct{}
}

func newFaulty(t *testing.T) *faulty {
	t.Helper()
	f := &faulty{fixture: newFixture(t)}
	// A short stall timeout, so that a hung location fails its calls
	// well inside a test's partition.
	stall := s3StallTimeout
	s3StallTimeout = time.Second
	t.Cleanup(func() { s3StallTimeout = stall })
	for i := range 2 {
		f.srv[i] = s3test.Start(t)
		p, err := faultproxy.Start(f.srv[i].Config.Endpoint, faultproxy.Options{Seed: faultSeed(t) + uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		f.proxy[i] = p
		c := f.srv[i].Config
		f.cfg.Locations[i] = LocationConfig{Name: f.cfg.Locations[i].Name,
			S3: &S3Location{Endpoint: p.Addr(), Bucket: c.Bucket, AccessKey: c.AccessKey, SecretKey: c.SecretKey}}
	}
	f.cfg.RetryMax = Duration(time.Second)
	f.restart()
	return f
}

// run works the queue in the background, as cairnd does, until the test
// ends.
func (f *faulty) run() {
	ctx, cancel := context.WithCancel(context.Background())
	f.stop, f.done = cancel, make(chan struct{})
	go func() { defer close(f.done); f.svc.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-f.done })
}

// truth opens the repository straight on the servers, past the proxies,
// and returns, per manifest, the locations whose head really lists it:
// those of the repository's checkpoints, and those of manifests.
func (f *faulty) truth(manifests ...string) map[string][]string {
	f.t.Helper()
	ctx := context.Background()
	secret, _, err := keySecret(f.cfg.KeyFile)
	if err != nil {
		f.t.Fatal(err)
	}
	var locs []repo.Location
	for i := range 2 {
		b, err := s3.New(f.srv[i].Config)
		if err != nil {
			f.t.Fatal(err)
		}
		locs = append(locs, repo.Location{Name: f.cfg.Locations[i].Name, Backend: retry.New(b, retry.DefaultPolicy)})
	}
	key, err := repo.LoadKey(ctx, locs[0], secret)
	if err != nil {
		if key, err = repo.LoadKey(ctx, locs[1], secret); err != nil {
			return nil // no repository yet
		}
	}
	r, err := repo.Open(ctx, key, locs...)
	if errors.Is(err, repo.ErrNotInitialized) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("truth: %v", err)
	}
	if u := r.Unavailable(); u != nil {
		f.t.Fatalf("truth: locations unreadable past the proxies: %v", u)
	}
	out := map[string][]string{}
	for _, ref := range r.List() {
		out[ref.ID] = r.Holders(ref)
	}
	for _, m := range manifests {
		if h := r.Holders(repo.ManifestRef{ID: m}); len(h) > 0 {
			out[m] = h
		}
	}
	return out
}

// checkTruth fails the test if a state claims a location that does not
// hold the checkpoint. It returns the states.
func (f *faulty) checkTruth(ids ...string) map[string]string {
	f.t.Helper()
	states := map[string]string{}
	claims := map[string][]string{}
	for _, id := range ids {
		ck := f.row(id)
		st, d := f.svc.Status(ck)
		states[id] = st
		for _, l := range d.Locations {
			if l.State == api.OffsiteUploaded {
				claims[id] = append(claims[id], l.Name)
			}
		}
		if st == "uploaded ×2" && len(claims[id]) != 2 || st == "uploaded ×1" && len(claims[id]) != 1 {
			f.t.Errorf("%s: state %s, locations %+v", id, st, d.Locations)
		}
	}
	truth := f.truth()
	for _, id := range ids {
		m := f.row(id).OffsiteManifest
		for _, name := range claims[id] {
			if !slices.Contains(truth[m], name) {
				f.t.Errorf("%s shows %s with %s holding it, but only %v do", id, states[id], name, truth[m])
			}
		}
	}
	return states
}

// waitAll waits until every checkpoint shows want, checking the truth of
// the states on the way; it returns how long that took.
func (f *faulty) waitAll(want string, timeout time.Duration, ids ...string) time.Duration {
	f.t.Helper()
	start := time.Now()
	for {
		states := f.checkTruth(ids...)
		all := true
		for _, st := range states {
			all = all && st == want
		}
		if all {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			f.t.Fatalf("after %v: %v, want all %s", timeout, states, want)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// restoreExact restores checkpoint id and compares it with files.
func (f *faulty) restoreExact(id string, files map[string][]byte) error {
	f.t.Helper()
	out := filepath.Join(f.t.TempDir(), "restore")
	if err := f.svc.Restore(context.Background(), f.row(id), out, nil); err != nil {
		return err
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !bytes.Equal(got, want) {
			f.t.Fatalf("%s: restored %s differs (%d bytes, want %d; %v)", id, name, len(got), len(want), err)
		}
	}
	return nil
}

// verifyClean reads back both locations past any fault and wants them
// intact, with no repair.
func (f *faulty) verifyClean() {
	f.t.Helper()
	reps, err := f.svc.Verify(context.Background(), "", true, func(string, ...any) {})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, rep := range reps {
		if !rep.OK || rep.Error != "" {
			f.t.Fatalf("verify %s: %+v", rep.Name, rep)
		}
	}
}

func (f *faulty) logStats(what string) {
	for i, p := range f.proxy {
		st := p.Stats()
		f.t.Logf("%s: location %s: %d requests, %d faults injected (%d 5xx, %d request resets, %d response resets, %d truncated, %d partitions, %d dropped by them)",
			what, f.cfg.Locations[i].Name, st.Requests, st.Faulted(), st.Errors, st.ResetRequests, st.ResetResponses, st.Truncated, st.Partitions, st.PartitionDrops)
	}
}

// flaky is a mix of every request fault, at rate in all.
func flaky(rate float64) faultproxy.Faults {
	return faultproxy.Faults{Latency: 2 * time.Millisecond, ErrorRate: rate * 0.4, ResetRequestRate: rate * 0.2,
		ResetResponseRate: rate * 0.2, TruncateRate: rate * 0.2}
}

func TestFaultsUploadsTellTheTruthAndConverge(t *testing.T) {
	f := newFaulty(t)
	f.run()
	files := map[string]map[string][]byte{}
	add := func(id string) {
		files[id] = map[string][]byte{"data": randomBytes(t, 1<<20), "etc/hostname": []byte(id + "\n")}
		f.checkpoint(id, files[id])
		f.svc.Wake()
	}
	add("c0")
	f.waitAll("uploaded ×2", time.Minute, "c0")

	// One location flaky, the other cut off; checkpoints go on.
	f.proxy[0].Set(flaky(0.3))
	if err := f.proxy[1].Partition(faultproxy.Refuse, partitionTime(t)); err != nil {
		t.Fatal(err)
	}
	ids := []string{"c0"}
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("c%d", i)
		add(id)
		ids = append(ids, id)
		time.Sleep(partitionTime(t) / 8)
		f.checkTruth(ids...)
	}
	for f.proxy[1].Partitioned() {
		f.checkTruth(ids...)
		time.Sleep(500 * time.Millisecond)
	}
	f.logStats("during the faults")
	f.proxy[0].Set(faultproxy.Faults{})
	took := f.waitAll("uploaded ×2", 2*time.Minute, ids...)
	t.Logf("both locations hold every checkpoint %v after the faults cleared", took.Round(100*time.Millisecond))
	f.verifyClean()
	for _, id := range ids {
		if err := f.restoreExact(id, files[id]); err != nil {
			t.Fatalf("restore %s: %v", id, err)
		}
	}
}

// A location that stops answering (packets dropped: connections accepted
// or open, and nothing comes back) must not hold up the other: the
// checkpoint commits there and shows uploaded ×1 long before the hung
// location comes back.
func TestFaultsHungLocationDoesNotHoldUpTheOther(t *testing.T) {
	f := newFaulty(t)
	f.run()
	files := map[string][]byte{"data": randomBytes(t, 1<<20)}
	f.checkpoint("c0", files)
	f.svc.Wake()
	f.waitAll("uploaded ×2", time.Minute, "c0")

	hang := max(partitionTime(t), 12*s3StallTimeout)
	if err := f.proxy[1].Partition(faultproxy.Hang, hang); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	files1 := map[string][]byte{"data": randomBytes(t, 1<<20)}
	f.checkpoint("c1", files1)
	f.svc.Wake()
	for {
		states := f.checkTruth("c0", "c1")
		if states["c1"] == "uploaded ×1" {
			break
		}
		if !f.proxy[1].Partitioned() {
			t.Fatalf("c1 is %s when the hung location came back after %v: the healthy location waited for it", states["c1"], hang)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("c1 uploaded ×1 %v into a %v hang of the other location", time.Since(start).Round(100*time.Millisecond), hang)
	// The local copy of c0 is gone: a restore during the hang reads the
	// location that answers.
	if err := f.restoreExact("c0", files); err != nil {
		t.Fatalf("restore during the hang: %v", err)
	}
	f.waitAll("uploaded ×2", hang+2*time.Minute, "c0", "c1")
	t.Logf("both locations hold c1 %v after the hang ended", (time.Since(start) - hang).Round(100*time.Millisecond))
	f.logStats("hang")
	f.verifyClean()
	if err := f.restoreExact("c1", files1); err != nil {
		t.Fatal(err)
	}
}

// Deleting a checkpoint while a location is cut off deletes it in the
// other at once, and in the cut-off one once it is back; the checkpoints
// still there keep every chunk they share with it.
func TestFaultsDeleteWhileALocationIsPartitioned(t *testing.T) {
	f := newFaulty(t)
	f.run()
	shared := randomBytes(t, 2<<20)
	files := map[string]map[string][]byte{
		"c1": {"shared": shared, "own": randomBytes(t, 1<<20)},
		"c2": {"shared": shared, "other": randomBytes(t, 1<<20)},
	}
	f.checkpoint("c1", files["c1"])
	f.checkpoint("c2", files["c2"])
	f.svc.Wake()
	f.waitAll("uploaded ×2", time.Minute, "c1", "c2")
	m1 := f.row("c1").OffsiteManifest
	bytesBefore := [2]int64{dirBytes(t, f.srv[0].Dir()), dirBytes(t, f.srv[1].Dir())}

	// Long enough for the delete to go through in primary while it is
	// flaky (a failed commit there waits for a repair, with backoff).
	part := max(partitionTime(t), 12*time.Second)
	if err := f.proxy[1].Partition(faultproxy.Refuse, part); err != nil {
		t.Fatal(err)
	}
	f.proxy[0].Set(flaky(0.2))
	if err := f.store.DeleteCheckpoint(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	f.svc.Wake()
	// Deleted where it can be, kept where it cannot yet.
	for {
		h := f.truth(m1)[m1]
		if !slices.Contains(h, f.cfg.Locations[0].Name) {
			if !slices.Contains(h, f.cfg.Locations[1].Name) {
				t.Fatalf("the cut-off location lost the manifest before it was back: %v", f.truth(m1))
			}
			break
		}
		if !f.proxy[1].Partitioned() {
			t.Fatalf("c1 still in %v after the %v partition, with the reachable location flaky", h, part)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if got := f.checkTruth("c2")["c2"]; got != "uploaded ×1" && got != "uploaded ×2" {
		t.Fatalf("c2 during the partition: %s", got)
	}
	for f.proxy[1].Partitioned() {
		time.Sleep(300 * time.Millisecond)
	}
	f.proxy[0].Set(faultproxy.Faults{})
	f.logStats("delete")
	f.waitAll("uploaded ×2", 2*time.Minute, "c2")
	deadline := time.Now().Add(time.Minute)
	for {
		truth := f.truth(m1)
		if _, ok := truth[m1]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted checkpoint is still held by %v", truth[m1])
		}
		time.Sleep(300 * time.Millisecond)
	}
	f.verifyClean()
	if err := f.restoreExact("c2", files["c2"]); err != nil {
		t.Fatal(err)
	}
	// The space of c1's own file is freed in both.
	for i := range 2 {
		if n := dirBytes(t, f.srv[i].Dir()); n > bytesBefore[i]-512<<10 {
			t.Errorf("location %d holds %d bytes after the delete, %d before", i, n, bytesBefore[i])
		}
	}
}

// A restore while reads fail gives the exact data, from either location,
// or fails with R01 (a location did not answer: try again); R04 is for
// data damaged in every location. Never other bytes.
func TestFaultsRestoreGivesTheDataOrAClearError(t *testing.T) {
	f := newFaulty(t)
	f.run()
	files := map[string][]byte{"a": randomBytes(t, 3<<20), "b": randomBytes(t, 200<<10)}
	f.checkpoint("c1", files)
	f.svc.Wake()
	f.waitAll("uploaded ×2", time.Minute, "c1")
	gets := func(rate float64) faultproxy.Faults {
		x := flaky(rate)
		x.Methods = []string{"GET"}
		return x
	}
	for _, tc := range []struct {
		name   string
		faults [2]faultproxy.Faults
		cut    int // location partitioned, or -1
		must   bool
	}{
		{"primary's reads all cut short", [2]faultproxy.Faults{{TruncateRate: 1, Methods: []string{"GET"}}, {}}, -1, true},
		{"primary's reads reset", [2]faultproxy.Faults{{ResetResponseRate: 1, Methods: []string{"GET"}}, {}}, -1, true},
		{"primary cut off", [2]faultproxy.Faults{{}, {}}, 0, true},
		{"secondary cut off, primary flaky", [2]faultproxy.Faults{gets(0.3), {}}, 1, false},
		{"both flaky", [2]faultproxy.Faults{gets(0.5), gets(0.5)}, -1, false},
		{"primary cut off, secondary's reads all cut short", [2]faultproxy.Faults{{}, {TruncateRate: 1, Methods: []string{"GET"}}}, 0, false},
	} {
		for i := range 2 {
			f.proxy[i].Set(tc.faults[i])
		}
		if tc.cut >= 0 {
			if err := f.proxy[tc.cut].Partition(faultproxy.Refuse, 0); err != nil {
				t.Fatal(err)
			}
		}
		err := f.restoreExact("c1", files)
		code := errdefs.CodeOf(err)
		t.Logf("%s: %v", tc.name, err)
		switch {
		case err == nil:
		case tc.must:
			t.Errorf("%s: the restore failed with a location intact: %v", tc.name, err)
		case code != api.CodeOffsiteUnavailable:
			t.Errorf("%s: error without R01: %v", tc.name, err)
		}
		for i := range 2 {
			f.proxy[i].Clear()
		}
	}
	f.logStats("restore")
	f.waitAll("uploaded ×2", time.Minute, "c1")
	f.verifyClean()

	// Every copy of the packs damaged, all locations answering: R04.
	for i := range 2 {
		packs, _ := filepath.Glob(filepath.Join(f.srv[i].Dir(), f.srv[i].Config.Bucket, "packs", "*"))
		for _, p := range packs {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	err := f.restoreExact("c1", files)
	if code := errdefs.CodeOf(err); code != api.CodeOffsiteFailed {
		t.Fatalf("restore with every copy damaged: %v", err)
	}
}
