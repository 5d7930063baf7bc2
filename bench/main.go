// Command bench measures cairn against the floor it is built on, side by
// side in one run, and prints the figures, ratios and goals
// (bench/RESULTS.md keeps the latest). Run it as root with `make bench`, or
// one group alone with `go run ./bench -only checkpoint`.
//
// Groups, one file each:
//   - skeleton (skeleton.go): create+start+`exec true`, and the exec round
//     trip, against runsc by hand;
//   - checkpoint (checkpoint.go): disk checkpoint create latency and pause
//     window against a bare btrfs snapshot, restore in place and fork of 10
//     against runsc and btrfs by hand;
//   - memory (memory*.go): memory checkpoint and restore in place at 64 MiB,
//     512 MiB and 2 GiB of touched memory and fork of 10 from a memory
//     checkpoint, against runsc checkpoint/restore by hand of the same
//     sandbox and checkpoint; runsc's compression against none;
//   - offsite (offsite*.go): off-site upload of a 1 GiB tree with
//     internal/repo to an S3 server (versitygw), first and after 1% of the
//     files changed, against restic backing up the same tree to another;
//     time, bytes stored and bytes sent (its own temp dir and versitygw
//     servers, removed at the end like the daemon's);
//   - network (network.go): HTTP through the port proxy against the same
//     server reached directly, egress throughput against the host's own
//     download, create+start with networking against without; all of it
//     inside the bench's own test internet (internal/testenv/testnet);
//   - files (files.go): Files API write and read throughput of 1 GiB
//     against `cairn exec -i … cat` and against the host's own disk;
//   - wake (wake.go): an exec on a sandbox asleep (--idle, 256 MiB in
//     memory) until it answers, against resuming its session by hand;
//   - lazy (lazy*.go): a lazy restore of an off-site-only checkpoint of a
//     mixed tree (1 GiB, -lazy-gib N) until the first exec answers, until a
//     web service in it answers with prefetch in access order against
//     without, until the whole fill; a whole restore of it against `restic
//     restore` of the same tree (its own cairnd with two versitygw
//     locations, and a versitygw for restic);
//   - postgres (postgres.go): disk checkpoint create on a second cairnd
//     whose metadata is in PostgreSQL against the bench's own on SQLite,
//     and the statements a checkpoint costs there.
//
// Everything runs on a throw-away cairnd with its own data dir and loop
// pool (daemon.go), which is removed at the end, on error and on Ctrl-C.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/sandbox/runsc"
)

// group is one set of benchmarks that can run alone (-only NAME).
type group struct {
	name  string
	about string
	run   func(context.Context, *env) error
}

var groups = []group{
	{"skeleton", "create+start+exec and exec round trip vs. runsc by hand", benchSkeleton},
	{"checkpoint", "disk checkpoint create (10 MiB/1 GiB/5 GiB), restore in place, fork of 10 vs. btrfs and runsc by hand", benchCheckpoint},
	{"memory", "memory checkpoint and restore (64 MiB/512 MiB/2 GiB touched), fork of 10, compression vs. runsc by hand", benchMemory},
	{"offsite", "off-site upload of 1 GiB to S3 (versitygw), first and incremental, vs. restic", benchOffsite},
	{"network", "HTTP through the port proxy vs. direct, egress throughput vs. the host, create+start with vs. without networking", benchNetwork},
	{"remote", "GET /v1/sandboxes and exec true over HTTPS with a token vs. the unix socket", benchRemote},
	{"hosts", "GET /v1/sandboxes/{name} and exec true forwarded by another host vs. on the sandbox's own host (two cairnd on PostgreSQL)", benchHosts},
	{"evacuate", "evacuation of a lost host holding 10 sandboxes (three cairnd on PostgreSQL, two S3) vs. restoring their checkpoints one by one by hand", benchEvacuate},
	{"build", "build of an unchanged Dockerfile (all steps cached) vs. the same with --no-cache", benchBuild},
	{"images", "pull of 300 MB in 5 layers vs. export | tar -x, second pull, create+start from a pulled image vs. busybox", benchImages},
	{"files", "Files API write and read of 1 GiB vs. exec -i cat and the host's own disk", benchFiles},
	{"wake", "exec on a sandbox asleep (256 MiB, --idle) vs. cairn start of its saved session by hand", benchWake},
	{"lazy", "lazy restore of an off-site-only checkpoint (1 GiB, -lazy-gib): first exec, a web service with vs. without prefetch, whole fill; whole restore vs. restic restore", benchLazy},
	{"postgres", "disk checkpoint create with the metadata in PostgreSQL vs. SQLite, statements per checkpoint", benchPostgres},
}

// env is what every group gets: the daemon, its client and the floor.
type env struct {
	n      int // iterations per measurement
	binDir string
	runsc  string
	d      *benchDaemon
	c      *client.Client
	floor  *bareRunsc
}

// warmSandbox runs for the whole bench; the busybox image is built for it.
const warmSandbox = "warm"

func main() {
	n := flag.Int("n", 20, "iterations per measurement (fork of 10: n/4, at least 3)")
	only := flag.String("only", "", "run only these groups, comma-separated: "+groupNames())
	keepLog := flag.String("log", "", "copy cairnd's log to this file at the end (it is removed with the data dir otherwise)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: go run ./bench [-n N] [-only GROUP[,GROUP]] [-log FILE]\n\ngroups:\n")
		for _, g := range groups {
			fmt.Fprintf(os.Stderr, "  %-11s %s\n", g.name, g.about)
		}
		fmt.Fprintln(os.Stderr)
		flag.PrintDefaults()
	}
	flag.Parse()
	selected, err := selectGroups(*only)
	if err == nil && *n < 1 {
		err = errors.New("-n must be at least 1")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	// The first ^C or SIGTERM cancels the measurements; cleanup still runs
	// (further signals are ignored until it is done).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, *n, selected, *keepLog)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func groupNames() string {
	var names []string
	for _, g := range groups {
		names = append(names, g.name)
	}
	return strings.Join(names, ", ")
}

func selectGroups(only string) ([]group, error) {
	if only == "" {
		return groups, nil
	}
	var out []group
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, g := range groups {
			if g.name == name {
				out = append(out, g)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("-only: no group %q (groups: %s)", name, groupNames())
		}
	}
	return out, nil
}

func run(ctx context.Context, n int, selected []group, keepLog string) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("run as root (runsc and btrfs need it)")
	}
	binDir := os.Getenv("CAIRN_BIN")
	if binDir == "" {
		binDir = "bin"
	}
	runscPath, err := runsc.Find("")
	if err != nil {
		return err
	}
	d, err := startDaemon(ctx, binDir, runscPath)
	if err != nil {
		return err
	}
	d.keepLog = keepLog
	defer func() {
		if cerr := d.stop(); cerr != nil {
			fmt.Fprintln(os.Stderr, "bench: cleanup:", cerr)
			if err == nil {
				err = cerr
			}
		}
	}()
	e := &env{n: n, d: d, c: d.client, binDir: binDir, runsc: runscPath}
	e.floor = &bareRunsc{binary: runscPath, dir: filepath.Join(d.dataDir, "bare"), image: filepath.Join(d.poolDir(), "images", "busybox")}
	if err := os.MkdirAll(e.floor.dir, 0o700); err != nil {
		return err
	}
	if e.floor.inherit, err = quotaParents(ctx, d.poolDir()); err != nil {
		return err
	}

	// Warm up: the busybox image is built on first use, outside the timings.
	if err := createQuiet(ctx, e.c, warmSandbox); err != nil {
		return err
	}

	fmt.Printf("cairn benchmarks, %s, %d cores, kernel %s, %s, load average %s\n\n",
		time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), kernel(), runscPath, loadavg())
	for _, g := range selected {
		// What the previous group wrote goes to disk first, so that its
		// write-back does not run during this group's timings.
		syscall.Sync()
		start := time.Now()
		if err := g.run(ctx, e); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: interrupted: %w", g.name, err)
			}
			return fmt.Errorf("%s: %w", g.name, err)
		}
		// Other work on the machine shows here: the figures are only as
		// quiet as the machine was.
		fmt.Printf("(group %s took %s; load average %s)\n\n", g.name, time.Since(start).Round(time.Second), loadavg())
		if quotaInconsistent(ctx, d.poolDir()) {
			fmt.Println("WARNING: the pool's btrfs quota data became inconsistent during this group: later figures and cairn's disk usage are off")
		}
	}
	return nil
}

// loadavg is the 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

func createSandbox(ctx context.Context, c *client.Client, name string) error {
	return createSandboxReq(ctx, c, api.CreateSandboxRequest{Name: name})
}

// createQuiet creates a sandbox whose automatic checkpoints come at the
// longest interval allowed, so that none lands inside a measurement.
func createQuiet(ctx context.Context, c *client.Client, name string) error {
	return createSandboxReq(ctx, c, api.CreateSandboxRequest{Name: name, AutoCheckpoint: "24h"})
}

// createSandboxReq creates a sandbox; without networking unless req asks
// for it, so that the other groups' figures stay comparable with the
// runsc-by-hand floors (which have none).
func createSandboxReq(ctx context.Context, c *client.Client, req api.CreateSandboxRequest) error {
	if req.Network == nil {
		req.Network = &api.NetworkChange{Mode: "none"}
	}
	op, err := c.CreateSandbox(ctx, req)
	if err != nil {
		return err
	}
	_, err = c.WaitSandbox(ctx, op, nil)
	return err
}

func deleteSandbox(ctx context.Context, c *client.Client, name string) error {
	op, err := c.DeleteSandbox(ctx, name)
	if err != nil {
		return err
	}
	_, err = c.Follow(ctx, op, nil)
	return err
}

func execTrue(ctx context.Context, c *client.Client, name string) error {
	st, err := c.Exec(ctx, name, api.ExecRequest{Command: []string{"true"}}, client.ExecIO{})
	if err != nil {
		return err
	}
	if st.Code != 0 {
		return fmt.Errorf("true exited %d", st.Code)
	}
	return nil
}

// execSh runs a shell script in sandbox name and returns its stdout; a
// non-zero exit is an error carrying its stderr.
func execSh(ctx context.Context, c *client.Client, name, script string) (string, error) {
	var stdout, stderr bytes.Buffer
	st, err := c.Exec(ctx, name, api.ExecRequest{Command: []string{"sh", "-c", script}}, client.ExecIO{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		return "", fmt.Errorf("exec in %s: %w", name, err)
	}
	if st.Code != 0 {
		return "", fmt.Errorf("exec in %s: `%s` exited %d: %s", name, script, st.Code, trimOut(stderr.Bytes()))
	}
	return stdout.String(), nil
}
