// Command bench measures cairn against the floor it is built on, side by
// side in one run, and prints the figures and ratios (bench/RESULTS.md keeps
// the latest). Run it as root with `make bench`.
//
// Walking skeleton:
//   - create+start a busybox sandbox and run `true` in it (cairn: the API,
//     until `exec true` returns) against `runsc run` of the same kind of
//     bundle (a btrfs snapshot of the same image, process `true`);
//   - exec round trip of `true` in a running sandbox (cairn: client → cairnd
//     → cairn-init) against `runsc exec` into a running container.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/sandbox/runsc"
)

func main() {
	n := flag.Int("n", 20, "iterations per measurement")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int) error {
	binDir := os.Getenv("CAIRN_BIN")
	if binDir == "" {
		binDir = "bin"
	}
	runscPath, err := runsc.Find("")
	if err != nil {
		return err
	}
	d, err := startDaemon(binDir)
	if err != nil {
		return err
	}
	defer d.stop()
	c := d.client

	// Warm up: the busybox image is built on first use, outside the timings.
	if err := createSandbox(ctx, c, "warm"); err != nil {
		return err
	}

	fmt.Printf("cairn walking-skeleton benchmarks, %d iterations each, %s\n\n", n, time.Now().UTC().Format(time.RFC3339))

	// 1. create+start+exec true.
	var cairnCreate []time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("b%d", i)
		t0 := time.Now()
		if err := createSandbox(ctx, c, name); err != nil {
			return err
		}
		if err := execTrue(ctx, c, name); err != nil {
			return err
		}
		cairnCreate = append(cairnCreate, time.Since(t0))
		if err := deleteSandbox(ctx, c, name); err != nil {
			return err
		}
	}
	floor := &bareRunsc{binary: runscPath, dir: filepath.Join(d.dataDir, "bare"), image: filepath.Join(d.dataDir, "pool", "images", "busybox")}
	if err := os.MkdirAll(floor.dir, 0o700); err != nil {
		return err
	}
	var bareRun []time.Duration
	for i := 0; i < n; i++ {
		dt, err := floor.runTrue(ctx, fmt.Sprintf("bare%d", i), filepath.Join(d.dataDir, "pool", "tmp", fmt.Sprintf("bare%d", i)))
		if err != nil {
			return err
		}
		bareRun = append(bareRun, dt)
	}
	report("create+start busybox, run `true`", cairnCreate, "runsc run (same image, snapshot, `true`)", bareRun)

	// 2. exec round trip.
	var cairnExec []time.Duration
	for i := 0; i < n*5; i++ {
		t0 := time.Now()
		if err := execTrue(ctx, c, "warm"); err != nil {
			return err
		}
		cairnExec = append(cairnExec, time.Since(t0))
	}
	bareExec, err := floor.execTrue(ctx, "barex", filepath.Join(d.dataDir, "pool", "tmp", "barex"), n*5)
	if err != nil {
		return err
	}
	report("exec `true` round trip", cairnExec, "runsc exec `true`", bareExec)
	return nil
}

func createSandbox(ctx context.Context, c *client.Client, name string) error {
	op, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: name})
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

// report prints p50/p90 of both series and the ratio of the medians.
func report(what string, cairn []time.Duration, floorName string, floor []time.Duration) {
	cp50, cp90 := percentiles(cairn)
	fp50, fp90 := percentiles(floor)
	fmt.Printf("%s\n", what)
	fmt.Printf("  %-44s p50 %8s  p90 %8s\n", "cairn", round(cp50), round(cp90))
	fmt.Printf("  %-44s p50 %8s  p90 %8s\n", floorName, round(fp50), round(fp90))
	fmt.Printf("  ratio cairn/floor (p50): %.2f×, overhead %s\n\n", float64(cp50)/float64(fp50), round(cp50-fp50))
}

func percentiles(ds []time.Duration) (p50, p90 time.Duration) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)*9/10]
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// bareRunsc runs containers by hand with runsc, the floor cairn builds on.
type bareRunsc struct {
	binary, dir, image string
}

func (b *bareRunsc) runsc(args ...string) *exec.Cmd {
	return exec.Command(b.binary, append([]string{"--root=" + filepath.Join(b.dir, "state"), "--overlay2=none", "--host-uds=open", "--network=none"}, args...)...)
}

// bundle snapshots the image to root and writes a bundle running args.
func (b *bareRunsc) bundle(ctx context.Context, id, root string, args []string) (string, error) {
	if out, err := exec.CommandContext(ctx, "btrfs", "subvolume", "snapshot", b.image, root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("snapshot: %v: %s", err, out)
	}
	bundle := filepath.Join(b.dir, id)
	spec := runsc.Spec{ID: id, Hostname: id, Root: root, Args: args, Env: []string{"PATH=/bin:/usr/bin"}, BundleDir: bundle}
	return bundle, spec.WriteBundle()
}

func (b *bareRunsc) cleanup(id, root string) {
	b.runsc("delete", "--force", id).Run()
	exec.Command("btrfs", "subvolume", "delete", root).Run()
	os.RemoveAll(filepath.Join(b.dir, id))
}

// runTrue times snapshot + `runsc run` of a container whose process is `true`.
func (b *bareRunsc) runTrue(ctx context.Context, id, root string) (time.Duration, error) {
	t0 := time.Now()
	bundle, err := b.bundle(ctx, id, root, []string{"/bin/true"})
	if err != nil {
		return 0, err
	}
	cmd := b.runsc("run", "--bundle="+bundle, id)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("runsc run: %v: %s", err, out)
	}
	dt := time.Since(t0)
	b.cleanup(id, root)
	return dt, nil
}

// execTrue starts a container running sleep and times n `runsc exec true`.
func (b *bareRunsc) execTrue(ctx context.Context, id, root string, n int) ([]time.Duration, error) {
	bundle, err := b.bundle(ctx, id, root, []string{"/bin/sleep", "100000"})
	if err != nil {
		return nil, err
	}
	defer b.cleanup(id, root)
	// The container's init inherits create's stdio: give it a file, not a
	// pipe that would stay open as long as the container runs.
	logf, err := os.Create(filepath.Join(b.dir, id+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	create := b.runsc("create", "--bundle="+bundle, id)
	create.Stdout, create.Stderr = logf, logf
	create.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := create.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("runsc create: %v: %s", err, out)
	}
	if out, err := b.runsc("start", id).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("runsc start: %v: %s", err, out)
	}
	var ds []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if out, err := b.runsc("exec", id, "/bin/true").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("runsc exec: %v: %s", err, strings.TrimSpace(string(out)))
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}
