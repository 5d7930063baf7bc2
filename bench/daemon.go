package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/network"
	"github.com/cairn-sandbox/cairn/internal/testenv/testnet"
)

// poolSize is the bench pool's sparse loop file: room for the 5 GiB
// writable layer of the checkpoint group with a wide margin.
const poolSize = "16G"

// benchDaemon is a cairnd on a throw-away data dir.
type benchDaemon struct {
	dataDir string
	runsc   string
	cmd     *exec.Cmd
	client  *client.Client
	keepLog string // where stop copies cairnd's log; "" for nowhere
	// internet is all its sandboxes can reach: a namespace of the bench's
	// own, cairnd's uplink and DNS upstream.
	internet *testnet.Internet
}

// noOffsiteConfig is the bench daemon's config file: off-site uploads off,
// since they would compete for the 2 cores with what is measured (the
// offsite group measures the repository by itself, the lazy group starts
// a cairnd of its own with uploads on).
const noOffsiteConfig = `{"accounts":{"default":{"offsite":{"disabled":true}}}}`

// startDaemon starts a cairnd for the bench; extra are more flags for it
// (the postgres group's --database, the hosts group's --host-name).
func startDaemon(ctx context.Context, binDir, runscPath string, extra ...string) (*benchDaemon, error) {
	return startDaemonWith(ctx, binDir, runscPath, noOffsiteConfig, extra...)
}

// startDaemonWith starts a cairnd for the bench with config as its config
// file; a flag in extra given twice (--pool-size) wins over the default.
func startDaemonWith(ctx context.Context, binDir, runscPath, config string, extra ...string) (*benchDaemon, error) {
	dir, err := os.MkdirTemp("", "cairn-bench-")
	if err != nil {
		return nil, err
	}
	d := &benchDaemon{dataDir: dir, runsc: runscPath}
	sock := filepath.Join(dir, "cairn.sock")
	logf, err := os.Create(d.logPath())
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	configPath := filepath.Join(dir, "cairnd.json")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	d.cmd = exec.Command(filepath.Join(binDir, "cairnd"), "--data-dir", dir, "--socket", sock, "--pool-size", poolSize, "--config", configPath,
		"--proxy-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0")
	// With --network-off (the evacuate group's hosts) it needs no test
	// internet, of which there are a few only.
	if !slices.Contains(extra, "--network-off") {
		if d.internet, err = testnet.Start(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		d.cmd.Args = append(d.cmd.Args, "--network-uplink", d.internet.Uplink, "--dns-upstream", d.internet.Upstream)
	}
	d.cmd.Args = append(d.cmd.Args, extra...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Own process group: a ^C meant for the bench must not stop cairnd
	// before the bench has deleted its sandboxes through it.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	d.client = client.New(sock)
	for i := 0; ; i++ {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := d.client.ServerInfo(cctx)
		cancel()
		if err == nil {
			return d, nil
		}
		if i > 600 || ctx.Err() != nil {
			d.stop()
			return nil, fmt.Errorf("cairnd did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *benchDaemon) logPath() string { return filepath.Join(d.dataDir, "cairnd.log") }

func (d *benchDaemon) poolDir() string { return filepath.Join(d.dataDir, "pool") }

// stop deletes the sandboxes, stops cairnd and removes everything it and
// the floor made: containers, mounts (runsc's null-netns, the pool) and the
// data dir. It reports what it could not remove.
func (d *benchDaemon) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if d.cmd.Process != nil && d.cmd.ProcessState == nil {
		d.deleteSandboxes(ctx)
		d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			<-done
		}
	}
	for _, root := range []string{filepath.Join(d.dataDir, "runsc"), filepath.Join(d.dataDir, "bare", "state")} {
		if out, err := exec.CommandContext(ctx, d.runsc, "--root", root, "list", "--quiet").Output(); err == nil {
			for _, id := range strings.Fields(string(out)) {
				exec.CommandContext(ctx, d.runsc, "--root", root, "delete", "--force", id).Run()
			}
		}
	}
	// The sandboxes' networks (namespaces, links, cairnd's table), then the
	// test internet.
	var netErr error
	if d.internet == nil {
		// --network-off: it made no networks.
	} else if err := network.CleanHost(filepath.Join(d.dataDir, "net")); err != nil {
		netErr = fmt.Errorf("clean the host of the sandboxes' networks: %w", err)
	}
	if d.internet != nil {
		d.internet.Close()
	}
	// Unmount everything under the data dir, deepest first: runsc's
	// null-netns bind mounts (runsc/null-netns, bare/state/null-netns) and
	// the pool.
	left := unmountUnder(ctx, d.dataDir)
	if d.keepLog != "" {
		if b, err := os.ReadFile(d.logPath()); err == nil {
			os.WriteFile(d.keepLog, b, 0o644)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still mounted, data dir %s kept: %s", d.dataDir, strings.Join(left, " "))
	}
	if netErr != nil {
		return netErr
	}
	return os.RemoveAll(d.dataDir)
}

// deleteSandboxes deletes every sandbox through the API, waiting for an
// operation still running on one (a restore at ^C) to end first.
func (d *benchDaemon) deleteSandboxes(ctx context.Context) {
	list, err := d.client.Sandboxes(ctx, "")
	if err != nil {
		return
	}
	for _, sb := range list {
		for try := 0; try < 100 && ctx.Err() == nil; try++ {
			op, err := d.client.DeleteSandbox(ctx, sb.Name)
			if client.CodeOf(err) == api.CodeSandboxBusy {
				time.Sleep(300 * time.Millisecond)
				continue
			}
			if err == nil {
				d.client.Follow(ctx, op, nil)
			}
			break
		}
	}
}

// unmountUnder unmounts everything mounted at or below dir, deepest first,
// trying for up to 5 s (a mount stays busy while a process exits), and
// returns what is still mounted.
func unmountUnder(ctx context.Context, dir string) []string {
	var left []string
	for try := 0; try < 20; try++ {
		if left = mountsUnder(dir); len(left) == 0 {
			return nil
		}
		for _, m := range left {
			exec.CommandContext(ctx, "umount", m).Run()
		}
		if left = mountsUnder(dir); len(left) == 0 {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return left
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// logSince returns what cairnd logged after byte offset off.
func (d *benchDaemon) logSince(off int64) string {
	b, err := os.ReadFile(d.logPath())
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

// logSize is the current length of cairnd's log, for logSince.
func (d *benchDaemon) logSize() int64 {
	st, err := os.Stat(d.logPath())
	if err != nil {
		return 0
	}
	return st.Size()
}
