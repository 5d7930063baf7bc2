package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
	"github.com/cairn-sandbox/cairn/internal/testenv/faultproxy"
)

// faultPartition is how long TestOffsiteStorageFaults cuts a location
// off: CAIRN_FAULT_PARTITION (make fault-trials sets minutes), else 15 s.
func faultPartition(t *testing.T) time.Duration {
	if v := os.Getenv("CAIRN_FAULT_PARTITION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CAIRN_FAULT_PARTITION: %v", err)
		}
		return d
	}
	return 15 * time.Second
}

// faultyOffsiteDaemon starts two S3 servers, a fault proxy in front of
// each, and a cairnd whose locations east and west are the proxies.
func faultyOffsiteDaemon(t *testing.T) (*daemon, [2]*faultproxy.Proxy) {
	t.Helper()
	srv := [2]*s3test.Server{s3test.Start(t), s3test.Start(t)}
	var proxies [2]*faultproxy.Proxy
	var locs []map[string]any
	for i, name := range []string{"east", "west"} {
		p, err := faultproxy.Start(srv[i].Config.Endpoint, faultproxy.Options{Seed: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxies[i] = p
		c := srv[i].Config
		locs = append(locs, map[string]any{"name": name, "s3": map[string]any{
			"endpoint": p.Addr(), "bucket": c.Bucket, "access_key": c.AccessKey, "secret_key": c.SecretKey}})
	}
	return startDaemon(t, "--config", offsiteConfig(t, locs, "")), proxies
}

// offsiteStates returns the off-site state of every checkpoint of name, by id.
func (d *daemon) offsiteStates(name string) map[string]string {
	d.t.Helper()
	var cks []api.Checkpoint
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", name, "--include-auto")), &cks); err != nil {
		d.t.Fatal(err)
	}
	out := map[string]string{}
	for _, ck := range cks {
		out[ck.ID] = ck.Offsite
	}
	return out
}

// Off-site storage that misbehaves (docs/reliability.md): one
// location flaky (5xx, resets, cut bodies), the other cut off; checkpoints,
// a delete and a restore go on meanwhile. The states never claim ×2 for
// what the cut-off location cannot hold, a restore gives the exact tree or
// R01 (try again), and once the faults clear both locations converge: everything
// uploaded ×2, verify --offsite clean, every checkpoint restored exactly.
func TestOffsiteStorageFaults(t *testing.T) {
	d, proxy := faultyOffsiteDaemon(t)
	d.create("f")
	d.sh("f", "mkdir -p /data && head -c 3000000 /dev/urandom > /data/zero")
	v0 := d.checkpoint("f")
	d.sh("f", "head -c 2000000 /dev/urandom > /data/one")
	v1 := d.checkpoint("f")
	d.waitOffsite("f", v0.ID, "uploaded ×2", time.Minute)
	d.waitOffsite("f", v1.ID, "uploaded ×2", time.Minute)
	committed := []api.Checkpoint{v1} // ×2 before the faults, kept

	part := faultPartition(t)
	proxy[0].Set(faultproxy.Faults{Latency: 5 * time.Millisecond, ErrorRate: 0.1, ResetRequestRate: 0.05,
		ResetResponseRate: 0.05, TruncateRate: 0.05})
	if err := proxy[1].Partition(faultproxy.Refuse, part); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Deleted while west is cut off: gone from east now, from west later.
	d.mustCLI("checkpoint", "delete", "f", v0.ID)
	var during []api.Checkpoint
	for i := range 2 {
		d.sh("f", fmt.Sprintf("head -c 1000000 /dev/urandom > /data/during%d", i))
		during = append(during, d.checkpoint("f"))
	}
	// A restore from off-site with east flaky and west cut off: the exact
	// tree, or a clear error.
	out, errOut, code := d.cli("", "--json", "checkpoint", "restore", "f", v1.ID, "--as", "during", "--from-offsite", "--whole")
	if code == 0 {
		if got, want := fileSums(t, filepath.Join(d.rootOf("during"), "data")), fileSums(t, filepath.Join(d.ckDir("f", v1), "data")); !reflect.DeepEqual(got, want) {
			t.Fatalf("restored during the faults, the tree differs:\n got %v\nwant %v", got, want)
		}
		t.Logf("restore during the faults: exact")
	} else {
		var eb api.ErrorBody
		_ = json.Unmarshal([]byte(out), &eb)
		// R01: a location failed to answer (R04 would say the data is damaged).
		if c := eb.Error.Code; c != api.CodeOffsiteUnavailable {
			t.Fatalf("restore during the faults: exit %d, code %q\n%s\n%s", code, c, out, errOut)
		}
		t.Logf("restore during the faults: %s %s", eb.Error.Code, eb.Error.Message)
	}
	// While west is cut off, nothing new is uploaded ×2.
	for proxy[1].Partitioned() {
		states := d.offsiteStates("f")
		if !proxy[1].Partitioned() {
			break
		}
		for _, ck := range during {
			if states[ck.ID] == "uploaded ×2" {
				t.Fatalf("%s shows uploaded ×2 while west is cut off", ck.ID)
			}
		}
		time.Sleep(time.Second)
	}
	proxy[0].Set(faultproxy.Faults{})
	healed := time.Now()
	for _, ck := range append(committed, during...) {
		d.waitOffsite("f", ck.ID, "uploaded ×2", 2*time.Minute)
	}
	t.Logf("partition %v; converged %v after it ended", part, time.Since(healed).Round(100*time.Millisecond))
	for i, p := range proxy {
		st := p.Stats()
		t.Logf("location %d: %d requests, %d faults injected (%d 5xx, %d request resets, %d response resets, %d truncated, %d partition drops)",
			i, st.Requests, st.Faulted(), st.Errors, st.ResetRequests, st.ResetResponses, st.Truncated, st.PartitionDrops)
	}
	// The deleted checkpoint's space is freed in west too: verify reads
	// back everything both heads name, and both are intact.
	deadline := time.Now().Add(time.Minute)
	for {
		out, errOut, code := d.cli("", "verify", "--offsite", "--no-repair")
		if code == 0 && strings.Count(out, "intact") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("verify --offsite after the faults: exit %d\n%s\n%s", code, out, errOut)
		}
		time.Sleep(2 * time.Second)
	}
	// Nothing committed is lost, nothing uploaded meanwhile either.
	for i, ck := range append(committed, during...) {
		name := fmt.Sprintf("after%d", i)
		d.mustCLI("checkpoint", "restore", "f", ck.ID, "--as", name, "--from-offsite", "--whole")
		if got, want := fileSums(t, filepath.Join(d.rootOf(name), "data")), fileSums(t, filepath.Join(d.ckDir("f", ck), "data")); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s restored from off-site differs:\n got %v\nwant %v", ck.ID, got, want)
		}
	}
	t.Logf("the whole run took %v", time.Since(start).Round(time.Second))
}
