package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

// evacuateSandboxes is how many sandboxes the lost host holds.
const evacuateSandboxes = 10

// evacuateMiB is what each of them wrote to its disk before its
// checkpoint, in MiB of random data.
const evacuateMiB = 16

// benchEvacuate measures issue 22's evacuation: three cairnd (a, b, c) on
// one PostgreSQL database and two S3 servers, with one key; a holds 10
// sandboxes, each with a checkpoint uploaded ×2; a is killed with SIGKILL,
// its containers with it (the machine is gone). Measured, in the same run:
// restoring those checkpoints one by one by hand on c (`cairn snapshot
// restore REF NEW`, each followed until it runs: what a user had before
// `cairn host evacuate`), then `cairn host evacuate a` (spread over b and
// c), each until every sandbox runs; both lazy, as by default.
func benchEvacuate(ctx context.Context, e *env) (err error) {
	dir, err := os.MkdirTemp("", "cairn-bench-evacuate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url, stopPG, err := pgtest.Serve()
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	defer stopPG()
	var s3 [2]*s3Server
	defer func() {
		for _, s := range s3 {
			if s != nil {
				s.stop()
			}
		}
	}()
	for i := range s3 {
		if s3[i], err = startS3Server(ctx, filepath.Join(dir, fmt.Sprintf("s3-%d", i))); err != nil {
			return err
		}
		if err := s3[i].makeBucket(ctx, "cairn"); err != nil {
			return err
		}
	}
	config, err := evacuateConfig(s3, filepath.Join(dir, "account.key"))
	if err != nil {
		return err
	}
	names := []string{"a", "b", "c"}
	var hosts [3]*benchDaemon
	defer func() {
		for i := len(hosts) - 1; i >= 0; i-- {
			if hosts[i] != nil {
				if err := hosts[i].stop(); err != nil {
					fmt.Fprintln(os.Stderr, "bench: evacuate: cleanup:", err)
				}
			}
		}
	}()
	for i, name := range names {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		listen := ln.Addr().String()
		ln.Close()
		if hosts[i], err = startDaemonWith(ctx, e.binDir, e.runsc, config, "--database", url, "--listen", listen, "--host-name", name,
			"--network-off"); err != nil {
			return fmt.Errorf("host %s: %w", name, err)
		}
		if dir := os.Getenv("CAIRN_BENCH_KEEP_LOGS"); dir != "" {
			hosts[i].keepLog = filepath.Join(dir, "evacuate-"+name+".log")
		}
	}
	a, b, c := hosts[0], hosts[1], hosts[2]
	fmt.Printf("== evacuation of a lost host holding %d sandboxes (%d MiB written each, one checkpoint uploaded ×2)\n\n", evacuateSandboxes, evacuateMiB)
	refs, err := evacuatePrepare(ctx, a)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := killHost(ctx, a); err != nil {
		return err
	}
	if err := waitHostDown(ctx, b.client, "a"); err != nil {
		return err
	}

	// By hand: one snapshot restore after the other, on c.
	t0 := time.Now()
	for i, ref := range refs {
		op, err := c.client.RestoreSnapshot(ctx, ref, api.SnapshotRestoreRequest{Name: fmt.Sprintf("hand-%d", i)})
		if err != nil {
			return err
		}
		if _, err := c.client.WaitSandbox(ctx, op, nil); err != nil {
			return fmt.Errorf("restore %s by hand: %w", ref, err)
		}
	}
	byHand := time.Since(t0)
	// Their fills and the uploads of the checkpoints their deletes take
	// end before the evacuation starts: it does not compete with them.
	for i := range refs {
		if err := waitFilled(ctx, c.client, fmt.Sprintf("hand-%d", i)); err != nil {
			return err
		}
		if err := deleteSandbox(ctx, c.client, fmt.Sprintf("hand-%d", i)); err != nil {
			return err
		}
	}
	time.Sleep(5 * time.Second)

	t0 = time.Now()
	op, err := b.client.EvacuateHost(ctx, "a", api.EvacuateRequest{})
	if err != nil {
		return err
	}
	rep, err := b.client.WaitEvacuation(ctx, op, nil)
	if err != nil {
		return err
	}
	evacuated := time.Since(t0)
	if rep.Restored != evacuateSandboxes || rep.Failed != 0 {
		return fmt.Errorf("evacuation: %d restored, %d failed (%+v)", rep.Restored, rep.Failed, rep.Sandboxes)
	}
	spread := map[string]int{}
	for _, s := range rep.Sandboxes {
		spread[s.Host]++
		if err := execTrue(ctx, b.client, s.Name); err != nil {
			return fmt.Errorf("exec in %s after the evacuation: %w", s.Name, err)
		}
	}
	fmt.Printf("  (each sandbox: busybox and %d MiB of random data, a disk checkpoint uploaded to both locations; then a and its\n", evacuateMiB)
	fmt.Println("   containers killed with SIGKILL, and b waited on until it lists a down; both ways restore lazily, the default)")
	report(fmt.Sprintf("%d sandboxes of a lost host running again on the others", evacuateSandboxes),
		[]time.Duration{evacuated}, "by hand: cairn snapshot restore of each on c, one after the other", []time.Duration{byHand})
	fmt.Printf("  the evacuation put them on: %v\n", spread)
	// The issue sets no figure to reach: the evacuation is one command
	// that keeps names and ids. Here the three hosts share the machine's
	// cores, which both ways keep busy (runsc starts, the fills).
	fmt.Printf("  (no goal; the three hosts share this machine's %d cores, so the restores of both ways compete for the same CPUs)\n", runtime.NumCPU())
	fmt.Println()
	return nil
}

// evacuateConfig is the hosts' config: the default account's two
// locations and one key file for every host (made by the first).
func evacuateConfig(s3 [2]*s3Server, keyFile string) (string, error) {
	var locs []map[string]any
	for i, s := range s3 {
		locs = append(locs, map[string]any{"name": fmt.Sprintf("loc%d", i), "s3": map[string]any{
			"endpoint": s.endpoint(), "bucket": "cairn", "access_key": s.accessKey, "secret_key": s.secretKey}})
	}
	b, err := json.Marshal(map[string]any{"accounts": map[string]any{"default": map[string]any{
		"offsite": map[string]any{"retry_max": "2s", "locations": locs, "key_file": keyFile}}}})
	return string(b), err
}

// evacuatePrepare makes the sandboxes on a, each with its data and a
// checkpoint, and waits until every checkpoint is uploaded ×2; it returns
// their global ids.
func evacuatePrepare(ctx context.Context, a *benchDaemon) ([]string, error) {
	var refs []string
	for i := range evacuateSandboxes {
		name := fmt.Sprintf("lost-%d", i)
		if err := createSandboxReq(ctx, a.client, api.CreateSandboxRequest{Name: name, AutoCheckpoint: "24h", Host: "a"}); err != nil {
			return nil, err
		}
		if _, err := execSh(ctx, a.client, name, fmt.Sprintf("head -c %d /dev/urandom > /root/data", evacuateMiB<<20)); err != nil {
			return nil, err
		}
		op, err := a.client.CreateCheckpoint(ctx, name, api.CreateCheckpointRequest{})
		if err != nil {
			return nil, err
		}
		raw, err := a.client.Follow(ctx, op, nil)
		if err != nil {
			return nil, err
		}
		var ck api.Checkpoint
		if err := json.Unmarshal(raw, &ck); err != nil {
			return nil, err
		}
		refs = append(refs, ck.GlobalID)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for i := 0; i < evacuateSandboxes; {
		cks, err := a.client.Checkpoints(ctx, fmt.Sprintf("lost-%d", i), false)
		if err != nil {
			return nil, err
		}
		if len(cks) > 0 && cks[len(cks)-1].Offsite == "uploaded ×2" {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lost-%d: not uploaded ×2 after 5 minutes", i)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return refs, nil
}

// killHost kills host d's cairnd and its containers with SIGKILL: the
// machine is gone.
func killHost(ctx context.Context, d *benchDaemon) error {
	if err := d.cmd.Process.Kill(); err != nil {
		return err
	}
	d.cmd.Wait()
	out, err := exec.CommandContext(ctx, d.runsc, "--root", filepath.Join(d.dataDir, "runsc"), "list", "--quiet").Output()
	if err != nil {
		return fmt.Errorf("runsc list: %w", err)
	}
	for _, id := range strings.Fields(string(out)) {
		exec.CommandContext(ctx, d.runsc, "--root", filepath.Join(d.dataDir, "runsc"), "delete", "--force", id).Run()
	}
	return nil
}

// waitHostDown waits until c lists the host called name down.
func waitHostDown(ctx context.Context, c *client.Client, name string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		hs, err := c.Hosts(ctx)
		if err != nil {
			return err
		}
		for _, h := range hs {
			if h.Name == name && h.State == api.HostDown {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("host " + name + " is not down after a minute")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitFilled waits until sandbox name's lazy fill is complete.
func waitFilled(ctx context.Context, c *client.Client, name string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		sb, err := c.Sandbox(ctx, name)
		if err != nil {
			return err
		}
		if sb.Fill == nil || sb.Fill.Done == sb.Fill.Total {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: filled %d of %d after 5 minutes", name, sb.Fill.Done, sb.Fill.Total)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
