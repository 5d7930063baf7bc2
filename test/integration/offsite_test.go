package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
)

// offsiteDaemon starts two S3 servers (versitygw) and a cairnd whose
// account keeps its off-site copies in them, retrying a failing location
// every 2 s at most.
func offsiteDaemon(t *testing.T) (*daemon, [2]*s3test.Server) {
	t.Helper()
	srv, locs := s3Locations(t)
	return startDaemon(t, "--config", offsiteConfig(t, locs, "")), srv
}

// s3Locations starts two S3 servers (versitygw) and returns them and their
// configs as the locations "east" and "west".
func s3Locations(t *testing.T) ([2]*s3test.Server, []map[string]any) {
	t.Helper()
	srv := [2]*s3test.Server{s3test.Start(t), s3test.Start(t)}
	return srv, []map[string]any{s3Location("east", srv[0], srv[0].Config.SecretKey), s3Location("west", srv[1], srv[1].Config.SecretKey)}
}

// offsiteConfig writes a cairnd config file naming the account's two
// off-site locations, retried every 2 s at most, and returns its path.
// The key file is keyFile, or with "" the daemon's own (in its data dir).
func offsiteConfig(t *testing.T, locs []map[string]any, keyFile string) string {
	t.Helper()
	offsite := map[string]any{"retry_max": "2s", "locations": locs}
	if keyFile != "" {
		offsite["key_file"] = keyFile
	}
	b, _ := json.Marshal(map[string]any{"accounts": map[string]any{"default": map[string]any{"offsite": offsite}}})
	path := filepath.Join(t.TempDir(), "cairnd.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// s3Location is the config of a location in server s, with secret.
func s3Location(name string, s *s3test.Server, secret string) map[string]any {
	c := s.Config
	return map[string]any{"name": name, "s3": map[string]any{
		"endpoint": c.Endpoint, "bucket": c.Bucket, "access_key": c.AccessKey, "secret_key": secret}}
}

// ckInfo returns checkpoint id of sandbox name.
func (d *daemon) ckInfo(name, id string) api.Checkpoint {
	d.t.Helper()
	var ck api.Checkpoint
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "info", name, id)), &ck); err != nil {
		d.t.Fatal(err)
	}
	return ck
}

// waitOffsite waits until checkpoint id of sandbox name has off-site state
// want ("uploaded ×2"…).
func (d *daemon) waitOffsite(name, id, want string, timeout time.Duration) api.Checkpoint {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ck := d.ckInfo(name, id)
		if ck.Offsite == want {
			return ck
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("checkpoint %s/%s: off-site state %q after %v, want %q; detail %+v", name, id, ck.Offsite, timeout, want, ck.OffsiteDetail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// bucketBytes is what a server stores in its bucket.
func bucketBytes(t *testing.T, s *s3test.Server) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(filepath.Join(s.Dir(), s.Config.Bucket), func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.Type().IsRegular() {
			if fi, err := de.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// storeHolds reports whether any object name or content under dir contains
// needle.
func storeHolds(t *testing.T, dir string, needle string) bool {
	t.Helper()
	found := false
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || found {
			return nil
		}
		if strings.Contains(de.Name(), needle) {
			found = true
			return nil
		}
		if de.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(needle)) {
				found = true
			}
		}
		return nil
	})
	return found
}

// fileSums hashes the regular files under dir, by path.
func fileSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = hex.EncodeToString(sum[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOffsiteRoundTripKeepsEverythingAndShowsTheStoresNothing(t *testing.T) {
	d, srv := offsiteDaemon(t)
	d.create("files")
	const secretName, secretText = "cairn-secret-name-7f3a", "distinctive-content-9c1e5b"
	d.sh("files", `set -e
		mkdir -p /data/empty /data/sub
		echo "file A" > /data/a
		chmod 640 /data/a
		chown 1234:5678 /data/a
		head -c 3000000 /dev/urandom > /data/sub/random.bin
		ln -s ../a /data/sub/link-to-a
		ln /data/sub/random.bin /data/hardlink
		dd if=/dev/zero of=/data/sparse bs=1 count=1 seek=104857600 2>/dev/null
		mkfifo /data/fifo
		chmod 4755 /data/sub
		for i in $(seq 200); do echo "`+secretText+` $i"; done > /data/`+secretName+`
		sync`)
	root := d.rootOf("files")
	if err := unix.Setxattr(filepath.Join(root, "data/a"), "user.origin", []byte("cairn-test"), 0); err != nil {
		t.Fatalf("setxattr: %v", err)
	}
	v0 := d.checkpoint("files")
	before := manifest(t, filepath.Join(d.ckDir("files", v0), "data"))
	if !strings.Contains(before[secretName], "size=") || !strings.Contains(before["sparse"], "sparse=true") {
		t.Fatalf("the test tree is not what the test wrote: %v", before)
	}
	ck := d.waitOffsite("files", "v0", "uploaded ×2", 2*time.Minute)
	if ck.OffsiteDetail == nil || len(ck.OffsiteDetail.Locations) != 2 || ck.OffsiteDetail.Manifest == "" {
		t.Fatalf("off-site detail: %+v", ck.OffsiteDetail)
	}
	if out := d.mustCLI("status", "files"); !strings.Contains(out, "· off-site ") || strings.Contains(out, "off-site —") {
		t.Fatalf("status once v0 is off-site:\n%s", out)
	}
	if out := d.mustCLI("account"); !strings.Contains(out, "east, west: 1 uploaded ×2") {
		t.Fatalf("account once v0 is off-site:\n%s", out)
	}
	for i, s := range srv {
		if bucketBytes(t, s) < 3000000 {
			t.Fatalf("location %d holds %d bytes, less than the random file", i, bucketBytes(t, s))
		}
		for _, needle := range []string{secretName, secretText, "link-to-a", "cairn-test"} {
			if storeHolds(t, s.Dir(), needle) {
				t.Errorf("location %d shows %q", i, needle)
			}
		}
	}

	// Wipe the local copy, and the image too, as on a host that never saw
	// it: the restore fetches the whole tree from off-site by itself.
	image := filepath.Join(d.dataDir, "pool", "images", "busybox")
	for _, dir := range []string{d.ckDir("files", v0), image} {
		if out, err := exec.Command("btrfs", "subvolume", "delete", dir).CombinedOutput(); err != nil {
			t.Fatalf("wipe %s: %v: %s", dir, err, out)
		}
	}
	// A fork of it is restored from off-site into its copy (whole here,
	// to compare the tree on the host; lazily by default).
	d.mustCLI("fork", "files", "--from-checkpoint", "v0", "--whole")
	if got := manifest(t, filepath.Join(d.rootOf("files-fork-1"), "data")); !reflect.DeepEqual(got, before) {
		t.Fatalf("forked from off-site, the tree differs:\n got %v\nwant %v", got, before)
	}
	d.mustCLI("delete", "files-fork-1")
	out, _, code := d.cli("", "verify")
	if code != 1 || !strings.Contains(out, "files/v0: the local disk is gone") {
		t.Fatalf("local verify after the wipe: exit %d\n%s", code, out)
	}
	out, errOut, code := d.cli("", "checkpoint", "restore", "files", "v0", "--as", "copy", "--whole")
	if code != 0 || !strings.Contains(errOut, "from off-site") {
		t.Fatalf("restore of a wiped checkpoint: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := manifest(t, filepath.Join(d.rootOf("copy"), "data")); !reflect.DeepEqual(got, before) {
		t.Fatalf("restored from off-site, the tree differs:\n got %v\nwant %v", got, before)
	}
	if out := d.sh("copy", "cat /data/a; ls /data/empty | wc -l"); out != "file A\n0\n" {
		t.Fatalf("inside the restored copy: %q", out)
	}
	if _, err := os.Stat(image); !os.IsNotExist(err) {
		t.Fatalf("the restore needed the image back: %v", err)
	}

	// --from-offsite while the local copy exists, with snapshot restore.
	d.sh("files", "echo second > /data/second")
	v1 := d.checkpoint("files")
	d.waitOffsite("files", v1.ID, "uploaded ×2", time.Minute)
	d.mustCLI("snapshot", "restore", v1.GlobalID, "copy2", "--from-offsite", "--whole")
	if out := d.sh("copy2", "cat /data/second /data/a"); out != "second\nfile A\n" {
		t.Fatalf("copy2: %q", out)
	}
	if got, want := manifest(t, filepath.Join(d.rootOf("copy2"), "data")), manifest(t, filepath.Join(d.ckDir("files", v1), "data")); !reflect.DeepEqual(got, want) {
		t.Fatalf("copy2 differs from v1:\n got %v\nwant %v", got, want)
	}
	if out, errOut, code := d.cli("", "verify", "--offsite"); code != 0 || strings.Count(out, "intact") != 2 {
		t.Fatalf("verify --offsite: exit %d\n%s\n%s", code, out, errOut)
	}
	if code := d.errorCode("checkpoint", "restore", "files", "v99", "--as", "nope", "--from-offsite"); code != api.CodeNoCheckpoint {
		t.Fatalf("unknown checkpoint: code %s", code)
	}
}

func TestOffsiteDedupAndGC(t *testing.T) {
	d, srv := offsiteDaemon(t)
	d.create("a")
	d.sh("a", "mkdir -p /data && head -c 20000000 /dev/urandom > /data/big && echo small > /data/small")
	d.checkpoint("a")
	d.waitOffsite("a", "v0", "uploaded ×2", 2*time.Minute)
	sizes := func() [2]int64 { return [2]int64{bucketBytes(t, srv[0]), bucketBytes(t, srv[1])} }
	s0 := sizes()
	if s0[0] < 20000000 || s0[1] < 20000000 {
		t.Fatalf("after the first upload the locations hold %v bytes", s0)
	}

	// One byte changed: a few chunks go up, not the file.
	d.sh("a", "printf x | dd of=/data/big bs=1 seek=5000000 conv=notrunc 2>/dev/null")
	d.checkpoint("a")
	d.waitOffsite("a", "v1", "uploaded ×2", time.Minute)
	s1 := sizes()
	for i := range s1 {
		if grew := s1[i] - s0[i]; grew > 3<<20 {
			t.Errorf("location %d grew by %d bytes for a 1-byte change", i, grew)
		}
	}
	// And the changed file was read only around the change: the rest
	// still shares its extents with v0's disk.
	if read, shared := uploadReads(t, d, "a", "v1"); read > 4<<20 || shared < 16<<20 {
		t.Errorf("upload of v1 read %d bytes and took %d unread from v0's disk; want the 20 MB file mostly unread", read, shared)
	}

	// Another sandbox with the same file shares its chunks.
	big, _, code := d.cli("", "exec", "a", "--", "cat", "/data/big")
	if code != 0 || len(big) != 20000000 {
		t.Fatalf("read big: exit %d, %d bytes", code, len(big))
	}
	d.create("b")
	if _, errOut, code := d.cli(big, "exec", "-i", "b", "--", "/bin/sh", "-c", "mkdir -p /data && cat > /data/big"); code != 0 {
		t.Fatalf("write big into b: %s", errOut)
	}
	d.checkpoint("b")
	d.waitOffsite("b", "v0", "uploaded ×2", time.Minute)
	s2 := sizes()
	for i := range s2 {
		if grew := s2[i] - s1[i]; grew > 3<<20 {
			t.Errorf("location %d grew by %d bytes for a sandbox holding the same file", i, grew)
		}
	}

	// GC: deleting a checkpoint drops what only it used, in both places.
	d.sh("a", "head -c 10000000 /dev/urandom > /data/unique")
	v2 := d.checkpoint("a")
	d.waitOffsite("a", v2.ID, "uploaded ×2", time.Minute)
	s3 := sizes()
	d.mustCLI("checkpoint", "delete", "a", v2.ID)
	deadline := time.Now().Add(time.Minute)
	for {
		s4 := sizes()
		if s3[0]-s4[0] >= 9000000 && s3[1]-s4[1] >= 9000000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting %s the locations went from %v to %v bytes", v2.ID, s3, s4)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, errOut, code := d.cli("", "verify", "--offsite", "--no-repair"); code != 0 {
		t.Fatalf("verify after GC: exit %d\n%s\n%s", code, out, errOut)
	}
	want := fileSums(t, filepath.Join(d.ckDir("a", d.ckInfo("a", "v1")), "data"))
	d.mustCLI("checkpoint", "restore", "a", "v1", "--as", "a-v1", "--from-offsite", "--whole")
	if got := fileSums(t, filepath.Join(d.rootOf("a-v1"), "data")); !reflect.DeepEqual(got, want) {
		t.Fatalf("v1 from off-site after GC:\n got %v\nwant %v", got, want)
	}
}

// uploadReads returns what cairnd's log says the upload of checkpoint id of
// sandbox name read from its disk and took unread from its parent's.
func uploadReads(t *testing.T, d *daemon, name, id string) (read, shared int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dataDir, "cairnd.log"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`msg="off-site: uploaded" sandbox=` + regexp.QuoteMeta(name) + ` checkpoint=` + regexp.QuoteMeta(id) + ` .* read=(\d+) unread_shared=(\d+)`)
	m := re.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no upload of %s/%s in cairnd's log", name, id)
	}
	read, _ = strconv.ParseInt(string(m[1]), 10, 64)
	shared, _ = strconv.ParseInt(string(m[2]), 10, 64)
	return read, shared
}

func TestOffsiteLocationDownConvergesAndDamageIsRepaired(t *testing.T) {
	d, srv := offsiteDaemon(t)
	d.create("f")
	d.sh("f", "mkdir -p /data && head -c 5000000 /dev/urandom > /data/one")

	// West is down before the checkpoint: uploaded ×1, then ×2 when back.
	srv[1].Stop()
	d.checkpoint("f")
	ck := d.waitOffsite("f", "v0", "uploaded ×1", time.Minute)
	if l := ck.OffsiteDetail.Locations; len(l) != 2 || l[0].State != "uploaded" || l[1].State != "failed" || l[1].Error == "" {
		t.Fatalf("per location while west is down: %+v", l)
	}
	out := d.mustCLI("checkpoint", "info", "f", "v0")
	if !strings.Contains(out, "uploaded ×1") || !strings.Contains(out, "west") {
		t.Fatalf("info while west is down:\n%s", out)
	}
	srv[1].Restart(t)
	d.waitOffsite("f", "v0", "uploaded ×2", time.Minute)

	// West goes down in the middle of an upload.
	d.sh("f", "head -c 60000000 /dev/urandom > /data/two")
	d.checkpoint("f")
	time.Sleep(300 * time.Millisecond)
	srv[1].Stop()
	d.waitOffsite("f", "v1", "uploaded ×1", time.Minute)
	// Checkpoints go on locally meanwhile.
	d.sh("f", "echo three > /data/three")
	d.checkpoint("f")
	d.waitOffsite("f", "v2", "uploaded ×1", time.Minute)
	srv[1].Restart(t)
	d.waitOffsite("f", "v1", "uploaded ×2", time.Minute)
	d.waitOffsite("f", "v2", "uploaded ×2", time.Minute)

	// A flipped byte in one of east's packs: verify names it and repairs
	// it from west.
	packs, _ := filepath.Glob(filepath.Join(srv[0].Dir(), srv[0].Config.Bucket, "packs", "*"))
	if len(packs) == 0 {
		t.Fatal("no packs in east")
	}
	victim := packs[0]
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	name := "packs/" + filepath.Base(victim)
	out, _, code := d.cli("", "verify", "--offsite", "--location", "east", "--no-repair")
	if code != 1 || !strings.Contains(out, name) {
		t.Fatalf("verify --no-repair of the damaged location: exit %d\n%s", code, out)
	}
	out, errOut, code := d.cli("", "verify", "--offsite")
	if code != 0 || !strings.Contains(out, "repaired") || !strings.Contains(out, name) {
		t.Fatalf("verify with repair: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, _, code := d.cli("", "verify", "--offsite", "--no-repair"); code != 0 || strings.Count(out, "intact") != 2 {
		t.Fatalf("verify after the repair: exit %d\n%s", code, out)
	}
	if code := d.errorCode("verify", "--offsite", "--location", "north"); code != api.CodeNoLocation {
		t.Fatalf("unknown location: code %s", code)
	}
}

func TestOffsiteSurvivesKilledDaemon(t *testing.T) {
	d, _ := offsiteDaemon(t)
	d.create("k")
	want := map[string]map[string]string{}
	// Killed during uploads, at several points.
	for i, delay := range []time.Duration{30 * time.Millisecond, 250 * time.Millisecond, 700 * time.Millisecond} {
		d.sh("k", "mkdir -p /data && head -c 30000000 /dev/urandom > /data/f"+string(rune('0'+i)))
		ck := d.checkpoint("k")
		want[ck.ID] = fileSums(t, filepath.Join(d.ckDir("k", ck), "data"))
		time.Sleep(delay)
		d.kill(syscall.SIGKILL)
		d.start()
	}
	for id := range want {
		d.waitOffsite("k", id, "uploaded ×2", 2*time.Minute)
	}
	// Killed during deletes and garbage collection.
	for id, delay := range map[string]time.Duration{"v0": 0, "v1": 60 * time.Millisecond} {
		d.mustCLI("checkpoint", "delete", "k", id)
		delete(want, id)
		time.Sleep(delay)
		d.kill(syscall.SIGKILL)
		d.start()
	}
	d.sh("k", "echo last > /data/last")
	last := d.checkpoint("k")
	want[last.ID] = fileSums(t, filepath.Join(d.ckDir("k", last), "data"))
	d.waitOffsite("k", last.ID, "uploaded ×2", 2*time.Minute)
	if out, errOut, code := d.cli("", "verify", "--offsite", "--no-repair"); code != 0 {
		t.Fatalf("verify after the kills: exit %d\n%s\n%s", code, out, errOut)
	}
	for id, sums := range want {
		name := "k-" + id
		d.mustCLI("checkpoint", "restore", "k", id, "--as", name, "--from-offsite", "--whole")
		if got := fileSums(t, filepath.Join(d.rootOf(name), "data")); !reflect.DeepEqual(got, sums) {
			t.Fatalf("%s from off-site:\n got %v\nwant %v", id, got, sums)
		}
	}
}

func TestOffsiteWrongKeyAndBadCredentials(t *testing.T) {
	// The embedded default: two directories under the data dir.
	d := startDaemon(t)
	d.create("w")
	d.sh("w", "echo one > /one")
	d.checkpoint("w")
	d.waitOffsite("w", "v0", "uploaded ×2", time.Minute)
	for _, loc := range []string{"primary", "secondary"} {
		if _, err := os.Stat(filepath.Join(d.dataDir, "offsite", loc, "manifests")); err != nil {
			t.Fatalf("embedded location %s: %v", loc, err)
		}
	}

	keyFile := filepath.Join(d.dataDir, "offsite", "account.key")
	good, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	d.kill(syscall.SIGTERM)
	if err := os.WriteFile(keyFile, []byte("not the key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	d.sh("w", "echo two > /two")
	d.checkpoint("w")
	ck := d.waitOffsite("w", "v1", "failed", time.Minute)
	if ck.OffsiteDetail == nil || !strings.Contains(ck.OffsiteDetail.Error, "wrong key") {
		t.Fatalf("wrong key: detail %+v", ck.OffsiteDetail)
	}
	if code := d.errorCode("verify", "--offsite"); code != api.CodeOffsiteUnavailable {
		t.Fatalf("verify with the wrong key: code %s", code)
	}
	// Nothing is lost: the local checkpoint restores.
	d.mustCLI("restore", "w", "v1", "--wait")
	if out := d.sh("w", "cat /one /two"); out != "one\ntwo\n" {
		t.Fatalf("after a local restore: %q", out)
	}

	d.kill(syscall.SIGTERM)
	if err := os.WriteFile(keyFile, good, 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	d.waitOffsite("w", "v1", "uploaded ×2", time.Minute)

	// Bad credentials for one S3 location: uploaded ×1, with the error.
	srv := [2]*s3test.Server{s3test.Start(t), s3test.Start(t)}
	d2 := startDaemon(t, "--config", offsiteConfig(t, []map[string]any{
		s3Location("east", srv[0], srv[0].Config.SecretKey), s3Location("west", srv[1], "wrong-secret")}, ""))
	d2.create("c")
	d2.checkpoint("c")
	ck = d2.waitOffsite("c", "v0", "uploaded ×1", time.Minute)
	if l := ck.OffsiteDetail.Locations[1]; l.State != "failed" || !strings.Contains(strings.ToLower(l.Error), "signature") && !strings.Contains(strings.ToLower(l.Error), "denied") {
		t.Fatalf("bad credentials: %+v", ck.OffsiteDetail)
	}
}

func TestOffsiteFullLocation(t *testing.T) {
	// Primary is a directory on a 2 MiB file system: it fills up.
	small := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", small).Run() })
	roomy := t.TempDir()
	d := startDaemon(t, "--config", offsiteConfig(t, []map[string]any{
		{"name": "small", "dir": small}, {"name": "roomy", "dir": roomy}}, ""))
	d.create("full")
	d.sh("full", "mkdir -p /data && head -c 8000000 /dev/urandom > /data/big")
	ck := d.checkpoint("full")
	got := d.waitOffsite("full", ck.ID, "uploaded ×1", time.Minute)
	l := got.OffsiteDetail.Locations
	if l[0].Name != "small" || l[0].State != "failed" || !strings.Contains(l[0].Error, "no space left") || l[1].State != "uploaded" {
		t.Fatalf("full location: %+v", l)
	}
	// Nothing half-committed is visible there: its head lists no checkpoint.
	if out, _, code := d.cli("", "verify", "--offsite", "--location", "small", "--no-repair"); code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("verify of the full location: exit %d\n%s", code, out)
	}
	// The checkpoint restores from the other location.
	d.mustCLI("checkpoint", "restore", "full", ck.ID, "--as", "full-copy", "--from-offsite", "--whole")
	if out := d.sh("full-copy", "wc -c < /data/big"); strings.TrimSpace(out) != "8000000" {
		t.Fatalf("restored copy: %q", out)
	}
}

// TestOffsiteSurvivesANewHost: a cairnd with new metadata pointed at the
// locations and key file of another (the host it replaces died) deletes
// nothing it did not record itself. The first daemon's checkpoint still
// restores from off-site after the second has uploaded checkpoints of its
// own and deleted one of them.
func TestOffsiteSurvivesANewHost(t *testing.T) {
	_, locs := s3Locations(t)
	config := offsiteConfig(t, locs, filepath.Join(t.TempDir(), "account.key"))

	old := startDaemon(t, "--config", config)
	old.create("old")
	old.sh("old", "mkdir -p /data && head -c 3000000 /dev/urandom > /data/f && echo kept > /data/note")
	ck := old.checkpoint("old")
	want := fileSums(t, filepath.Join(old.ckDir("old", ck), "data"))
	old.waitOffsite("old", ck.ID, "uploaded ×2", 2*time.Minute)
	old.kill(syscall.SIGTERM)

	replacement := startDaemon(t, "--config", config)
	replacement.create("new")
	first := replacement.checkpoint("new")
	replacement.waitOffsite("new", first.ID, "uploaded ×2", 2*time.Minute)
	replacement.sh("new", "echo more > /root/more")
	second := replacement.checkpoint("new")
	replacement.waitOffsite("new", second.ID, "uploaded ×2", 2*time.Minute)
	replacement.mustCLI("checkpoint", "delete", "new", first.ID)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(replacement.logText(), "off-site: deleted"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the replacement daemon did not delete its deleted checkpoint's manifest within a minute")
		}
	}
	if !strings.Contains(replacement.logText(), "manifests kept that no checkpoint here names") {
		t.Error("the replacement daemon's log does not say it kept manifests it did not record")
	}
	replacement.kill(syscall.SIGTERM)

	old.start()
	old.mustCLI("checkpoint", "restore", "old", ck.ID, "--as", "old-again", "--from-offsite", "--whole")
	if got := fileSums(t, filepath.Join(old.rootOf("old-again"), "data")); !reflect.DeepEqual(got, want) {
		t.Fatalf("the first daemon's checkpoint from off-site after the replacement ran:\n got %v\nwant %v", got, want)
	}
}
