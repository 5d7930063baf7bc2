package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"github.com/cairn-sandbox/cairn/internal/lazy"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
)

// lazyData is what the lazy restore tests put in a sandbox: lazyFiles
// files of 32 MiB under /var, so that the image's own files come first in
// the manifest. `make test` has 8 (256 MiB); `make lazy-trial` 64 (2 GiB,
// the size) through CAIRN_LAZY_FILES.
const (
	lazyFileSize = 32 << 20
	lazyDir      = "/var/lazy"
)

var (
	lazyFiles = envInt("CAIRN_LAZY_FILES", 8, 8)
	// lazyRate bounds the background fill (cairnd --lazy-fill-rate), so
	// that the tests catch it mid-fill; reads are never held back.
	lazyRate = envString("CAIRN_LAZY_RATE", "16M")
	// lazyFillTime is how long a whole fill may take at lazyRate.
	lazyFillTime = time.Duration(lazyFiles/8) * time.Minute
)

// envInt is the integer in environment variable name, def when it is
// unset or not a number, never below least.
func envInt(name string, def, least int) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		n = def
	}
	return max(n, least)
}

// envString is environment variable name, def when it is unset.
func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// lazySums hashes the lazy data and a few of the image's files inside
// sandbox name.
func (d *daemon) lazySums(name string) string {
	d.t.Helper()
	return d.sh(name, "sha256sum "+lazyDir+"/* /etc/passwd /bin/sh")
}

// offsiteOnlyCheckpoint makes sandbox "src" with the lazy data, takes
// its checkpoint v0 and a later v1, waits until both locations hold v0
// and the local tier has dropped its local copy (keep the newest), and
// returns v0's sums. cairnd gets the flags extra; before, when not nil,
// runs before v0 is taken.
func offsiteOnlyCheckpoint(t *testing.T, extra []string, before func(d *daemon)) (*daemon, [2]*s3test.Server, string) {
	t.Helper()
	srv, locs := s3Locations(t)
	offsite := map[string]any{"retry_max": "2s", "locations": locs}
	b, _ := json.Marshal(map[string]any{"accounts": map[string]any{"default": map[string]any{
		"offsite": offsite, "local": map[string]any{"keep_newest": 1, "keep_for": "-1s"}}}})
	config := filepath.Join(t.TempDir(), "cairnd.json")
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, append([]string{"--config", config, "--lazy-fill-rate", lazyRate}, extra...)...)
	d.create("src")
	d.sh("src", "mkdir -p "+lazyDir+" && for i in $(seq 0 "+strconv.Itoa(lazyFiles-1)+"); do head -c 33554432 /dev/urandom > "+lazyDir+"/f$i; done")
	want := d.lazySums("src")
	if before != nil {
		before(d)
	}
	d.checkpoint("src")
	d.sh("src", "echo later > /root/later")
	d.checkpoint("src")
	d.waitOffsite("src", "v0", "uploaded ×2", 5*time.Minute)
	d.waitOffsite("src", "v1", "uploaded ×2", 5*time.Minute)
	deadline := time.Now().Add(time.Minute)
	for d.ckInfo("src", "v0").Stored != api.StoredOffsiteOnly {
		if time.Now().After(deadline) {
			t.Fatalf("v0 is still %q a minute after both locations held it", d.ckInfo("src", "v0").Stored)
		}
		time.Sleep(time.Second)
	}
	return d, srv, want
}

// restoreLazily restores src's v0 (off-site only: lazily, by default) as
// name and returns it.
func (d *daemon) restoreLazily(name string) api.Sandbox {
	d.t.Helper()
	var sb api.Sandbox
	out := d.mustCLI("--json", "checkpoint", "restore", "src", "v0", "--as", name)
	if err := json.Unmarshal([]byte(out), &sb); err != nil {
		d.t.Fatalf("restore --lazy: %q: %v", out, err)
	}
	return sb
}

// waitFilled waits until sandbox name's fill is complete.
func (d *daemon) waitFilled(name string, within time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(within)
	for {
		sb := d.info(name)
		if sb.Fill == nil || sb.Fill.Done == sb.Fill.Total {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("sandbox %s: filled %d of %d after %v", name, sb.Fill.Done, sb.Fill.Total, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The first test: restore as new from an off-site-only
// checkpoint starts before a tenth of the data is in, every file then
// reads back byte for byte, and a checkpoint taken mid-fill restores
// whole; once the fill is complete and the sandbox restarted, its root
// is a plain subvolume again.
func TestLazyRestoreStartsAtOnceAndFillsWhole(t *testing.T) {
	d, _, want := offsiteOnlyCheckpoint(t, nil, nil)

	sb := d.restoreLazily("r")
	if sb.State != api.StateRunning {
		t.Fatalf("restored lazily: state %s", sb.State)
	}
	d.sh("r", "true")
	info := d.info("r")
	if info.Fill == nil || info.Fill.Total < int64(lazyFiles)*lazyFileSize {
		t.Fatalf("fill of a lazy restore: %+v", info.Fill)
	}
	t.Logf("at the first exec: %d of %d bytes in", info.Fill.Done, info.Fill.Total)
	if info.Fill.Done >= info.Fill.Total/10 {
		t.Fatalf("the first exec answered with %d of %d bytes in: more than a tenth", info.Fill.Done, info.Fill.Total)
	}
	// Writes and reads work meanwhile; a checkpoint waits for the fill.
	d.sh("r", "echo new > /root/new && cat "+lazyDir+"/f3 > /dev/null")
	d.checkpoint("r")
	if got := d.lazySums("r"); got != want {
		t.Fatalf("after the fill:\n%s\nwant\n%s", got, want)
	}
	d.mustCLI("checkpoint", "restore", "r", "v0", "--as", "r2")
	if got := d.lazySums("r2"); got != want {
		t.Fatalf("the checkpoint taken mid-fill, restored:\n%s\nwant\n%s", got, want)
	}
	if out := d.sh("r2", "cat /root/new"); out != "new\n" {
		t.Fatalf("a write made mid-fill, in its checkpoint: %q", out)
	}
	d.waitFilled("r", lazyFillTime)
	// Events: the fill's end is on the sandbox's stream.
	if out := d.mustCLI("events", "r"); !strings.Contains(out, "fill") || !strings.Contains(out, "complete") {
		t.Fatalf("events of r: no fill events:\n%s", out)
	}
	d.mustCLI("stop", "r")
	d.mustCLI("start", "r")
	if _, err := os.Stat(filepath.Join(d.dataDir, "lazy", sb.ID)); !os.IsNotExist(err) {
		t.Fatalf("the lazy state after a stop and start of a filled sandbox: %v", err)
	}
	if info := d.info("r"); info.Fill != nil {
		t.Fatalf("fill after it completed and the sandbox restarted: %+v", info.Fill)
	}
	if got := d.lazySums("r"); got != want {
		t.Fatalf("on the plain root:\n%s\nwant\n%s", got, want)
	}
}

// Both locations down mid-fill: reads of data not yet in fail with EIO,
// data in reads; once they are back the fill completes and nothing
// differs.
func TestLazyRestoreFailsReadsWithEIOWhileTheLocationsAreDown(t *testing.T) {
	d, srv, want := offsiteOnlyCheckpoint(t, nil, nil)
	d.restoreLazily("r")
	head := d.sh("r", "head -c 4096 "+lazyDir+"/f1 | sha256sum")
	srv[0].Stop()
	srv[1].Stop()
	_, errOut, code := d.cli("", "exec", "r", "--", "/bin/sh", "-c", "cat "+lazyDir+"/f7 > /dev/null")
	if code == 0 || !strings.Contains(strings.ToLower(errOut), "input/output error") {
		t.Fatalf("a read of data that cannot be fetched: exit %d, stderr %q; want an I/O error", code, errOut)
	}
	if got := d.sh("r", "head -c 4096 "+lazyDir+"/f1 | sha256sum"); got != head {
		t.Fatalf("data already in, read again while the locations are down: %q, want %q", got, head)
	}
	if info := d.info("r"); info.Fill == nil || !info.Fill.Unavailable && info.Fill.Done == info.Fill.Total {
		t.Logf("fill while down: %+v", info.Fill)
	}
	srv[0].Restart(t)
	srv[1].Restart(t)
	d.waitFilled("r", 3*lazyFillTime)
	if got := d.lazySums("r"); got != want {
		t.Fatalf("after the locations came back:\n%s\nwant\n%s", got, want)
	}
}

// kill -9 of cairnd mid-fill: the sandbox keeps running on its root, and
// after the restart the fill completes and nothing differs.
func TestLazyRestoreSurvivesAKilledDaemon(t *testing.T) {
	d, _, want := offsiteOnlyCheckpoint(t, nil, nil)
	d.restoreLazily("r")
	d.sh("r", "cat "+lazyDir+"/f0 > /dev/null")
	deadline := time.Now().Add(time.Minute)
	for {
		f := d.info("r").Fill
		if f == nil || f.Done == f.Total {
			t.Fatal("the fill ended before cairnd could be killed mid-fill")
		}
		if f.Done > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing filled after a minute: %+v", f)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.kill(syscall.SIGKILL)
	d.start()
	if out := d.sh("r", "echo alive"); out != "alive\n" {
		t.Fatalf("after the restart: %q", out)
	}
	d.waitFilled("r", 3*lazyFillTime)
	if got := d.lazySums("r"); got != want {
		t.Fatalf("after a kill -9 mid-fill:\n%s\nwant\n%s", got, want)
	}
}

// Prefetch in access order: what a sandbox read first at its last boot
// goes up, sealed, with its checkpoints, and a lazy restore of one fills
// those files first: here f6, which the manifest lists after f0 to f5,
// is whole before f0 is, though nothing in the restored sandbox reads
// either.
func TestLazyRestoreFetchesTheBootReadsFirst(t *testing.T) {
	d, _, want := offsiteOnlyCheckpoint(t, []string{"--boot-reads", "3s"}, func(d *daemon) {
		// The boot that made the data wrote it: gVisor serves it from its
		// memory. A new boot reads it from the disk, as a service would.
		src := d.info("src")
		d.mustCLI("stop", "src")
		d.mustCLI("start", "src")
		d.sh("src", "cat "+lazyDir+"/f6 > /dev/null")
		path := filepath.Join(d.dataDir, "sandboxes", src.ID, accessorder.FileName)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if o, err := accessorder.Load(path); err == nil && slices.Contains(o.Files, "var/lazy/f6") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no recorded boot order naming var/lazy/f6 at %s after 30 s", path)
			}
		}
	})
	sb := d.restoreLazily("r")
	dir := filepath.Join(d.dataDir, "lazy", sb.ID)
	plan, err := lazy.ReadPlan(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := func(path string) int {
		return slices.IndexFunc(plan.Files, func(f lazy.File) bool { return f.Path == path })
	}
	f0, f6 := at("var/lazy/f0"), at("var/lazy/f6")
	if f0 < 0 || f6 < 0 || f6 > f0 {
		t.Fatalf("the plan's order: f6 at %d, f0 at %d; want f6 first", f6, f0)
	}
	whole := func(have []bool, i int) bool {
		f := plan.Files[i]
		return !slices.Contains(have[f.First:f.First+len(f.Chunks)], false)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		have, _, err := lazy.Present(dir, plan)
		if err != nil {
			t.Fatal(err)
		}
		if whole(have, f6) {
			for i := 0; i < plan.Prefetch; i++ {
				t.Logf("prefetched %s: whole %v", plan.Files[i].Path, whole(have, i))
			}
			if whole(have, f0) {
				t.Fatal("f0 was whole as soon as f6 was: the recorded order did not lead the fill")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("f6 is not whole a minute after the restore")
		}
	}
	d.waitFilled("r", 2*lazyFillTime)
	if got := d.lazySums("r"); got != want {
		t.Fatalf("after the fill:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(d.logText(), "fetching first the files its sandbox read first") {
		t.Error("cairnd's log does not say that the fill follows a recorded order")
	}
	events := d.mustCLI("events", "r")
	pre, done := strings.Index(events, "read first at its last boot are in"), strings.Index(events, "complete:")
	if pre < 0 || done < 0 || pre > done {
		t.Errorf("events of r: want the prefetched files' arrival before the fill's end:\n%s", events)
	}
}

// A fork of an off-site-only checkpoint makes lazy copies, each with its
// own fill, that do not see each other's writes; a restore in place to
// it is lazy too, and the sandbox keeps its name and id. Every file then
// reads back as it was in the checkpoint.
func TestLazyForkAndRestoreInPlace(t *testing.T) {
	d, _, want := offsiteOnlyCheckpoint(t, nil, nil)

	var kids []api.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "fork", "src", "--from-checkpoint", "v0", "--count", "2")), &kids); err != nil || len(kids) != 2 {
		t.Fatalf("fork: %v %+v", err, kids)
	}
	for _, k := range kids {
		if f := d.info(k.Name).Fill; f == nil || f.Total < int64(lazyFiles)*lazyFileSize {
			t.Fatalf("fork child %s from off-site: fill %+v, want a lazy root", k.Name, f)
		}
	}
	d.sh(kids[0].Name, "echo one > "+lazyDir+"/f2")
	if out := d.sh(kids[1].Name, "head -c 3 "+lazyDir+"/f2 | od -c | head -1"); strings.Contains(out, "o   n   e") {
		t.Fatalf("the second copy sees the first one's write: %q", out)
	}
	d.mustCLI("delete", kids[0].Name)
	d.waitFilled(kids[1].Name, 2*time.Minute)
	if got := d.lazySums(kids[1].Name); got != want {
		t.Fatalf("the fork's copy after its fill:\n%s\nwant\n%s", got, want)
	}

	// In place: src runs at v1 with a later file; back to v0, lazily.
	before := d.info("src")
	d.mustCLI("restore", "src", "v0", "--wait", "--no-safety-checkpoint")
	after := d.info("src")
	if after.ID != before.ID || after.State != api.StateRunning {
		t.Fatalf("after the restore in place: id %s (was %s), state %s", after.ID, before.ID, after.State)
	}
	if after.Fill == nil {
		t.Fatal("a restore in place from off-site only: no fill, want a lazy root")
	}
	if out, _, code := d.cli("", "exec", "src", "--", "cat", "/root/later"); code == 0 {
		t.Fatalf("a file written after v0 is still there after the restore to v0: %q", out)
	}
	d.waitFilled("src", 2*time.Minute)
	if got := d.lazySums("src"); got != want {
		t.Fatalf("restored in place, after the fill:\n%s\nwant\n%s", got, want)
	}
	// Once filled, a stop and start make the root plain again.
	d.mustCLI("stop", "src")
	d.mustCLI("start", "src")
	if _, err := os.Stat(filepath.Join(d.dataDir, "lazy", before.ID)); !os.IsNotExist(err) {
		t.Fatalf("the lazy state after the fill and a restart: %v", err)
	}
	if got := d.lazySums("src"); got != want {
		t.Fatalf("on the plain root:\n%s\nwant\n%s", got, want)
	}
}
