// Package integration tests cairn end to end as a user runs it: the real
// cairnd (real runsc, a real btrfs pool on a loop file, SQLite) driven by the
// real cairn CLI and the Go client. It needs root; when CI=true a missing
// prerequisite fails the run instead of skipping it.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/browse"
	"github.com/cairn-sandbox/cairn/internal/lazy"
	"github.com/cairn-sandbox/cairn/internal/network"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
	"github.com/cairn-sandbox/cairn/internal/testenv/testnet"
)

// binDir holds cairn, cairnd and cairn-init for the whole run.
var binDir string

// testCacheDir keeps debootstrap's downloads between runs.
const testCacheDir = "/var/cache/cairn-test"

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if reason := missingPrerequisite(); reason != "" {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "integration: FAIL:", reason)
			return 1
		}
		fmt.Fprintln(os.Stderr, "integration: skipping:", reason)
		return 0
	}
	binDir = os.Getenv("CAIRN_BIN")
	if binDir == "" {
		dir, err := os.MkdirTemp("", "cairn-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/cairn", "./cmd/cairnd", "./cmd/cairn-init", "./cmd/cairn-env")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
			return 1
		}
		binDir = dir
	}
	return pgtest.Run(m) // m.Run, then the PostgreSQL server (if a test started one) is stopped
}

func missingPrerequisite() string {
	if os.Geteuid() != 0 {
		return "needs root"
	}
	for _, tool := range []string{"runsc", "btrfs", "mkfs.btrfs", "busybox", "debootstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not installed (run scripts/install-deps.sh)"
		}
	}
	return ""
}

// daemon is one cairnd process with its own data dir and socket.
type daemon struct {
	t       *testing.T
	dataDir string
	socket  string
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited and been reaped
	flags   []string      // extra cairnd flags
	// internet is what its sandboxes reach (cairnd's uplink and DNS).
	internet *testnet.Internet
	log      *os.File
	client   *client.Client
}

// startDaemon starts a cairnd on a fresh data dir; it is stopped, its
// sandboxes deleted and its pool unmounted when the test ends.
func startDaemon(t *testing.T, flags ...string) *daemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "cairn-it-")
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, dataDir: dir, socket: filepath.Join(dir, "cairn.sock"), flags: flags}
	// Every cairnd's sandboxes reach only a test internet of its own (a
	// namespace this test made): never the machine's network.
	d.internet = testnet.New(t)
	d.flags = append([]string{"--network-uplink", d.internet.Uplink, "--dns-upstream", d.internet.Upstream,
		"--network-range", nextNetworkRange(), "--proxy-listen", "127.0.0.1:0"}, d.flags...)
	d.client = client.New(d.socket)
	d.start()
	t.Cleanup(d.destroy)
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	logf, err := os.OpenFile(filepath.Join(d.dataDir, "cairnd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	d.log = logf
	d.cmd = exec.Command(filepath.Join(binDir, "cairnd"), append([]string{
		"--data-dir", d.dataDir, "--socket", d.socket, "--pool-size", "8G",
		"--cache-dir", testCacheDir, "--log-level", "debug"}, d.flags...)...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.exited = make(chan struct{})
	var waitErr error
	go func() { waitErr = d.cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := d.client.ServerInfo(ctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-d.exited:
			d.t.Fatalf("cairnd exited at start: %v\n%s%s", waitErr, d.logText(), d.lockHolders())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("cairnd did not answer within 60s: %v\n%s", err, d.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockHolders names the processes that have cairnd's data-dir lock file
// open, for the message of a start that found it taken.
func (d *daemon) lockHolders() string {
	lock := filepath.Join(d.dataDir, "cairnd.lock")
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	var out []string
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == lock {
			pid := strings.Split(fd, "/")[2]
			cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			out = append(out, fmt.Sprintf("pid %s (%s)", pid, strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "\x00", " ")))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "\n" + lock + " is open in: " + strings.Join(out, ", ")
}

// kill stops cairnd with sig (SIGKILL: a crash) and waits until it is gone.
func (d *daemon) kill(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.exited:
		d.log.Close()
	case <-time.After(15 * time.Second):
		d.t.Fatalf("cairnd (pid %d) did not exit after %v", d.cmd.Process.Pid, sig)
	}
}

func (d *daemon) running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return d.cmd != nil
	}
}

func (d *daemon) logText() string {
	b, _ := os.ReadFile(filepath.Join(d.dataDir, "cairnd.log"))
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// destroy deletes every sandbox, stops cairnd, unmounts the pool and
// removes the data dir, so that a run leaves nothing behind.
func (d *daemon) destroy() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if d.t.Failed() {
		d.t.Logf("cairnd log:\n%s", d.logText())
	}
	if list, err := d.client.Sandboxes(ctx, ""); err == nil {
		for _, sb := range list {
			if op, err := d.client.DeleteSandbox(ctx, sb.Name); err == nil {
				d.client.Follow(ctx, op, nil)
			}
		}
	}
	if d.running() {
		d.kill(syscall.SIGTERM)
	}
	// Containers a failed test left: runsc's state lives in the data dir.
	if ids, err := exec.Command("runsc", "--root", filepath.Join(d.dataDir, "runsc"), "list", "--quiet").Output(); err == nil {
		for _, id := range strings.Fields(string(ids)) {
			exec.Command("runsc", "--root", filepath.Join(d.dataDir, "runsc"), "delete", "--force", id).Run()
		}
	}
	// runsc keeps a bind mount of an empty network namespace in its root.
	// Each cairnd start may bind it once more (a killed one leaves its
	// mount): unmounted until none is left, at most a few times.
	for i := 0; i < 8 && exec.Command("umount", filepath.Join(d.dataDir, "runsc", "null-netns")).Run() == nil; i++ {
	}
	// What a killed cairnd's networks left: namespaces, links, its table.
	if err := network.CleanHost(filepath.Join(d.dataDir, "net")); err != nil {
		d.t.Errorf("clean the host of the sandboxes' networks: %v", err)
	}
	// The browse server outlives cairnd by design: unmounting its view
	// ends it.
	// So do the servers of lazy roots a failed test left.
	if dirs, err := os.ReadDir(filepath.Join(d.dataDir, "lazy")); err == nil {
		for _, e := range dirs {
			if err := lazy.Stop(filepath.Join(d.dataDir, "lazy", e.Name())); err != nil {
				d.t.Errorf("stop a lazyfs server: %v", err)
			}
		}
	}
	if err := browse.Stop(filepath.Join(d.dataDir, "browse")); err != nil {
		d.t.Errorf("stop the browse server: %v", err)
	}
	pool := filepath.Join(d.dataDir, "pool")
	if err := exec.Command("umount", pool).Run(); err != nil {
		exec.Command("umount", "-l", pool).Run()
	}
	os.RemoveAll(d.dataDir)
}

// networkRanges counts the cairnds started, so that each gets a range of
// host-side link addresses of its own.
var networkRanges atomic.Int32

func nextNetworkRange() string {
	n := networkRanges.Add(1)
	return fmt.Sprintf("10.%d.%d.0/24", 240+(n/256)%8, n%256)
}

// cli runs the cairn CLI against this daemon.
func (d *daemon) cli(stdin string, args ...string) (stdout, stderr string, code int) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "cairn"), append([]string{"--socket", d.socket}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			d.t.Fatalf("cairn %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return o.String(), e.String(), code
}

// mustCLI runs the CLI and fails the test unless it exits 0.
func (d *daemon) mustCLI(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.cli("", args...)
	if code != 0 {
		d.t.Fatalf("cairn %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// create makes a running sandbox with the CLI.
func (d *daemon) create(name string, flags ...string) api.Sandbox {
	d.t.Helper()
	out := d.mustCLI(append([]string{"--json", "create", name}, flags...)...)
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(out), &sb); err != nil {
		d.t.Fatalf("create %s: bad JSON %q: %v", name, out, err)
	}
	if sb.State != api.StateRunning {
		d.t.Fatalf("create %s: state %q, want running", name, sb.State)
	}
	return sb
}

// sh runs a shell command in a sandbox and returns its stdout; it fails the
// test unless the command exits 0.
func (d *daemon) sh(name, script string) string {
	d.t.Helper()
	out, errOut, code := d.cli("", "exec", name, "--", "/bin/sh", "-c", script)
	if code != 0 {
		d.t.Fatalf("exec %s %q: exit %d\nstdout: %s\nstderr: %s", name, script, code, out, errOut)
	}
	return out
}

// errorCode runs a CLI command expected to fail and returns the API code it
// printed with --json.
func (d *daemon) errorCode(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.cli("", append([]string{"--json"}, args...)...)
	if code == 0 {
		d.t.Fatalf("cairn %v succeeded, want an error\n%s", args, out)
	}
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(out), &eb); err != nil {
		d.t.Fatalf("cairn %v: error output is not the JSON error shape: %q %q", args, out, errOut)
	}
	return eb.Error.Code
}

// poolEntries lists the sandbox root subvolumes in the pool.
func (d *daemon) poolEntries() []string {
	entries, _ := os.ReadDir(filepath.Join(d.dataDir, "pool", "sandboxes"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// containers lists the runsc containers of this daemon.
func (d *daemon) containers() []string {
	out, err := exec.Command("runsc", "--root", filepath.Join(d.dataDir, "runsc"), "list", "--quiet").Output()
	if err != nil {
		d.t.Fatalf("runsc list: %v", err)
	}
	return strings.Fields(string(out))
}
