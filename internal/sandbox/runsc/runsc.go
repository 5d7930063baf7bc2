// Package runsc drives gVisor's runsc as cairn's sandbox runtime: it writes
// an OCI bundle for a sandbox and calls runsc to create, start, pause,
// resume, signal and delete its container. Every call uses the same global
// flags, among them --overlay2=none (what the sandbox writes lands in its
// root subvolume at once) and --host-uds=open (cairn-init can dial the
// host's agent socket).
//
// # Pause and resume without runsc
//
// Pause and Resume sit inside a disk checkpoint's pause window, and a runsc
// process costs ≈ 10 ms to start. So they do themselves what `runsc pause`
// and `runsc resume` do (runsc/container/container.go at Pinned), which is
// four steps on two files and one socket:
//
//  1. Take the container's lock: flock(2) LOCK_EX on
//     STATE/<id>_sandbox:<id>.lock, the lock every runsc command holds while
//     it reads or writes the state file next to it.
//  2. Read STATE/<id>_sandbox:<id>.state (JSON, runsc's Container) and check
//     its "status": Pause needs "running", Resume "paused", the only
//     transitions runsc's changeStatus allows. Anything else is an error
//     wrapping ErrWrongState, and nothing is sent.
//  3. Call containerManager.Pause or containerManager.Resume on the
//     sandbox's control socket ("sandbox"."controlSocketPath" in the state
//     file, else STATE/runsc-<id>.sock): gVisor's urpc, one JSON object each
//     way over a unix stream socket (see call).
//  4. Write the state file again with only "status" changed, through a
//     temporary file and a rename, then release the lock.
//
// The status check under the lock matters more than speed: the sentry's
// pause is a counter, so a second pause needs a second resume, and a resume
// without a pause panics the sentry and kills the sandbox. Checking the
// recorded status under the same lock runsc takes, and recording the change
// before releasing it, keeps the state file the one record of whether the
// sandbox is paused, whoever paused it: `runsc state` (State), `runsc
// resume`, `runsc checkpoint` and `runsc delete` see a sandbox paused here
// exactly as if `runsc pause` had paused it, and cairnd's recovery finds and
// resumes it. (runsc itself checks the status it read before taking the
// lock, so this is, if anything, stricter.)
//
// Where it differs from runsc: runsc first asks a "running" sandbox whether
// its container has stopped; here (one container per sandbox) a stopped
// sandbox shows up as a refused connection instead, and runsc is run to
// report it. runsc pauses the sandbox of a "created" container and then
// panics instead of recording it; here that is ErrWrongState before anything
// is sent. After a failed state file write, runsc leaves the sandbox
// changed and the file not; here the change is undone with the opposite
// call.
//
// Falling back: when the fast path fails for a reason that is not the
// container's state and nothing has changed (no such file layout, state file
// unreadable, no control socket, connection refused or closed before an
// answer, an unknown method in a future runsc), Pause and Resume log it and
// run `runsc pause`/`runsc resume` instead. They do not fall back when the
// outcome may already be in effect: once the sandbox has the request, it
// carries it out whether anyone waits or not, so the caller's context no
// longer cuts the wait short, and if no answer comes within answerTimeout
// the new status is recorded anyway (the sandbox will be in it) and an error
// returned. Checkpoint's fast path (checkpoint.go) falls back the same way;
// once the sandbox has its request it waits for the answer as long as the
// caller's context lasts, since a save takes as long as the memory takes to
// write.
//
// # Memory images
//
// Checkpoint does what `runsc checkpoint --compression=none` does, itself
// (checkpoint.go says how and why; it falls back to runsc like Pause and
// Resume). Uncompressed, an image is three files (checkpoint.img,
// pages_meta.img, pages.img) whose pages restore reads in parallel;
// compression made checkpoint plus restore 2.4-12x slower on a local disk
// (bench/RESULTS.md). Left out: --exclude-committed-zero-pages, with which
// the sentry compares every page it knows to be in use with zeros, not
// only the others, and leaves the zero ones out. It halves the image and
// takes ~40% off the time when half of memory is such zeros, but the
// comparison costs 50-130 ms per GiB of memory that holds data (~4% of the
// checkpoint, all of it while the sandbox is paused), and zeros the sentry
// has not seen committed (through a read of memory statistics, or a save
// while they held data) are left out without it.
//
// Restore runs plain `runsc restore`, which returns once all pages are
// loaded. Measured on a btrfs pool on a loop file, 2 cores, and left out:
// --direct on either side (O_DIRECT bypasses the page cache the image was
// just written to: checkpoint 1.5-1.9x slower, restore 1.1-3x), and
// restore --background, which lets runsc return before the pages are
// loaded. The loader's parallel reads starve the rest of the restore (a
// go-built runsc compiles the sentry's seccomp filter at every start: 20
// ms alone, 0.4-0.6 s beside the loader), so runsc returns at most ~10%
// earlier and the first exec no earlier (-3% to +40%). A page that then
// fails to load kills the restored sandbox instead of failing Restore.
//
// Were --background used: the sandbox holds pages.img and pages_meta.img
// open until the load ends (`runsc wait --restore`) and closes them then.
// Deleting or renaming the image's subvolume meanwhile is safe, since
// btrfs keeps a deleted subvolume until its last open file is closed, but
// its space comes back only after the load. TestRestoreOutlivesItsImage
// covers this and the plain restore.
package runsc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/internal/container"
)

// Pinned is the gVisor version cairn is built and tested against.
const Pinned = "gvisor.dev/gvisor/runsc@v0.0.0-20260905035102-160fafc42237"

// ErrNotExist is wrapped by errors about a container runsc does not know.
var ErrNotExist = container.ErrNotExist

// ErrWrongState is returned when a container's status does not allow the
// call: pausing one that is not running, resuming one that is not paused.
var ErrWrongState = errors.New("container is in the wrong state")

// Runsc runs containers with one runsc binary and one state directory.
type Runsc struct {
	binary    string
	stateRoot string
}

// Find returns the runsc binary to use: configured if set, else runsc on
// PATH, else /usr/local/bin/runsc. The error says how to install it.
func Find(configured string) (string, error) {
	if configured != "" {
		if _, err := os.Stat(configured); err != nil {
			return "", fmt.Errorf("runsc not found at %s: %w", configured, err)
		}
		return configured, nil
	}
	if p, err := exec.LookPath("runsc"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/local/bin/runsc"); err == nil {
		return "/usr/local/bin/runsc", nil
	}
	return "", fmt.Errorf("runsc (gVisor) not found on PATH: install it with `CGO_ENABLED=0 go install %s` (or run scripts/install-deps.sh), or pass --runsc PATH", Pinned)
}

// New returns a driver using binary and keeping container state in stateRoot.
func New(binary, stateRoot string) *Runsc {
	return &Runsc{binary: binary, stateRoot: stateRoot}
}

// Binary is the path of the runsc in use.
func (r *Runsc) Binary() string { return r.binary }

// globalArgs are the flags of every runsc call; network is the
// container's network mode (it matters to run and restore only).
func (r *Runsc) globalArgs(network container.Network) []string {
	if network == "" {
		network = container.NetworkNone
	}
	return []string{"--root=" + r.stateRoot, "--overlay2=none", "--host-uds=open", "--network=" + string(network)}
}

func (r *Runsc) command(ctx context.Context, args ...string) *exec.Cmd {
	return r.commandNet(ctx, container.NetworkNone, args...)
}

func (r *Runsc) commandNet(ctx context.Context, network container.Network, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, r.binary, append(r.globalArgs(network), args...)...)
}

// run runs runsc with args and returns its stdout; its stderr is in the error.
func (r *Runsc) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := r.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "does not exist") {
			return nil, fmt.Errorf("runsc %s: %w", args[0], ErrNotExist)
		}
		if strings.Contains(msg, " in state ") {
			return nil, fmt.Errorf("runsc %s: %w: %s", args[0], ErrWrongState, msg)
		}
		return nil, fmt.Errorf("runsc %s: %w: %s", args[0], err, msg)
	}
	return stdout.Bytes(), nil
}

// Start writes the bundle for spec and runs its container detached, with
// init's output going to spec.LogPath. It returns the host pid of the
// sandbox. On failure nothing of the container is left.
func (r *Runsc) Start(ctx context.Context, spec Spec) (pid int, err error) {
	return r.launch(ctx, spec, "run")
}

// launch runs `runsc run` or `runsc restore` detached for spec.
func (r *Runsc) launch(ctx context.Context, spec Spec, verb string, extra ...string) (pid int, err error) {
	if !spec.Network.Valid() {
		return 0, fmt.Errorf("runsc %s: unknown network mode %q", verb, spec.Network)
	}
	if spec.Network == container.NetworkSandbox && spec.NetNS == "" {
		// Never the host's namespace, nor an empty one by mistake.
		return 0, fmt.Errorf("runsc %s: network mode sandbox without a network namespace", verb)
	}
	if err := WriteBundle(spec); err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, 2)

	defer func() {
		if err != nil {
			r.Delete(context.WithoutCancel(ctx), spec.ID)
		}
	}()
	pidFile := filepath.Join(spec.BundleDir, "pid")
	os.Remove(pidFile)
	// One call creates and starts the container; --detach returns once it
	// runs. The sandbox inherits this command's stdio: spec.Stdin (else
	// /dev/null) and the log file.
	args := append([]string{verb, "--detach", "--bundle=" + spec.BundleDir, "--pid-file=" + pidFile}, extra...)
	cmd := r.commandNet(ctx, spec.Network, append(args, spec.ID)...)
	cmd.Stdin = nil // /dev/null
	if spec.Stdin != nil {
		// runsc gives its standard input to the container's init. A
		// pipe, filled and closed before runsc starts (the bytes fit in
		// its buffer), so they are never on disk.
		stdin, err := pipeWith(spec.Stdin)
		if err != nil {
			return 0, fmt.Errorf("runsc %s: %w", verb, err)
		}
		defer stdin.Close()
		cmd.Stdin = stdin
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a ^C meant for cairnd must not reach the sandbox.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("runsc %s: %w: %s", verb, err, logTail(spec.LogPath, logStart))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("runsc %s: no pid file: %w", verb, err)
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("runsc %s: pid file: %w", verb, err)
	}
	if err := raiseMemoryLimit(spec); err != nil {
		return 0, fmt.Errorf("runsc %s: %w", verb, err)
	}
	return pid, nil
}

// pipeWith returns the read end of a pipe that holds b and then ends; b
// must fit in a pipe's buffer (64 KiB on Linux).
func pipeWith(b []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("fill init's standard input: %w", err)
	}
	return r, nil
}

// Restore writes the bundle for spec and starts its container from the
// memory image in imageDir (made by Checkpoint) instead of booting it: its
// processes resume where they were. Like Start, it returns the host pid and
// leaves nothing behind on failure.
//
// runsc restore returns once every page of the image is in the sandbox's
// memory, and the sandbox closes the image's files then (on a loaded host
// a moment after Restore returns): imageDir may be deleted as soon as
// Restore returns, btrfs keeping a deleted subvolume until its last open
// file is closed. (No --background, which would return before the pages
// are loaded; see "Memory images" in the package comment.)
func (r *Runsc) Restore(ctx context.Context, spec Spec, imageDir string) (pid int, err error) {
	return r.launch(ctx, spec, "restore", "--image-path="+imageDir)
}

// Checkpoint writes the memory image of container id into imageDir:
// checkpoint.img (the sentry's state), pages_meta.img and pages.img (the
// memory pages, uncompressed), all of which Restore needs. With
// leaveRunning the container carries on afterwards (as it was: a paused one
// stays paused); without, it stops.
//
// It talks to the sandbox directly (see checkpoint.go) and runs `runsc
// checkpoint` only if that cannot be done.
func (r *Runsc) Checkpoint(ctx context.Context, id, imageDir string, leaveRunning bool) error {
	err := r.checkpointControl(ctx, id, imageDir, leaveRunning)
	var fb *fallbackError
	if !errors.As(err, &fb) {
		return err
	}
	slog.Warn("runsc: could not checkpoint through the control socket; running runsc", "container", id, "err", fb.err)
	// Uncompressed is runsc's default at Pinned, but older versions
	// compressed by default, into one checkpoint.img without pages.img,
	// which cairn does not restore.
	args := []string{"checkpoint", "--compression=none", "--image-path=" + imageDir}
	if leaveRunning {
		args = append(args, "--leave-running")
	}
	_, err = r.run(ctx, append(args, id)...)
	return err
}

// Status is a container's state as runsc reports it: "created", "running",
// "paused" or "stopped" (package container's states).
type Status = container.Status

// State returns the status and host pid of container id, or ErrNotExist.
func (r *Runsc) State(ctx context.Context, id string) (Status, int, error) {
	out, err := r.run(ctx, "state", id)
	if err != nil {
		return "", 0, err
	}
	var st struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return "", 0, fmt.Errorf("runsc state: %w", err)
	}
	return Status(st.Status), st.Pid, nil
}

// Pause freezes every process of container id. It fails with
// ErrWrongState unless the container is running. It talks to the sandbox
// directly and runs `runsc pause` only if that cannot be done (see the
// package comment).
func (r *Runsc) Pause(ctx context.Context, id string) error {
	return r.change(ctx, id, pauseTransition)
}

// Resume thaws container id. It fails with ErrWrongState unless the
// container is paused. Like Pause, it runs `runsc resume` only as a fallback.
func (r *Runsc) Resume(ctx context.Context, id string) error {
	return r.change(ctx, id, resumeTransition)
}

// change makes t through the control socket, else with runsc.
func (r *Runsc) change(ctx context.Context, id string, t transition) error {
	err := r.control(ctx, id, t)
	var fb *fallbackError
	if !errors.As(err, &fb) {
		return err
	}
	if to, in := r.InDoubt(id); in {
		return fmt.Errorf("runsc %s: %w: container %q (a change to %s was cut short)", t.verb, ErrInDoubt, id, to)
	}
	slog.Warn("runsc: could not "+t.verb+" through the control socket; running runsc", "container", id, "err", fb.err)
	_, err = r.run(ctx, t.verb, id)
	return err
}

// Kill sends sig to the init of container id.
func (r *Runsc) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	_, err := r.run(ctx, "kill", id, fmt.Sprint(int(sig)))
	return err
}

// WaitStopped polls until container id is stopped or gone, or ctx ends.
func (r *Runsc) WaitStopped(ctx context.Context, id string) error {
	for {
		st, _, err := r.State(ctx, id)
		if errors.Is(err, ErrNotExist) || (err == nil && st == "stopped") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Delete removes container id, killing it if it still runs. A container
// that does not exist is not an error, so Delete is safe in undo steps.
func (r *Runsc) Delete(ctx context.Context, id string) error {
	if err := r.killProcesses(ctx, id); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
		slog.Debug("runsc delete: killing the processes first failed; runsc kills them", "container", id, "err", err)
	}
	_, err := r.run(ctx, "delete", "--force", id)
	if errors.Is(err, ErrNotExist) {
		err = nil
	}
	if err == nil {
		if marker, merr := r.transitionMarker(id); merr == nil {
			os.Remove(marker) // a change in doubt ends with the container
		}
	}
	return err
}

// List returns the ids of every container in the state directory.
func (r *Runsc) List(ctx context.Context) ([]string, error) {
	out, err := r.run(ctx, "list", "--quiet")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// logTail returns what was appended to the log at path since offset, at
// most the last 2 KiB, for error messages.
func logTail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	b = b[offset:]
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return strings.TrimSpace(string(b))
}

// RunAttached runs spec's container in the foreground, its process's
// output (stdout and stderr) going to out, and returns the process's exit
// status once it ends. The container is deleted before it returns; if ctx
// ends first, its processes are killed and the error is ctx's. With a
// memory limit, a container that uses all it allows is ended and the
// error wraps ErrOutOfMemory (stepmem.go). spec should have a Process (a
// build step's command).
func (r *Runsc) RunAttached(ctx context.Context, spec Spec, out io.Writer) (exit int, err error) {
	if !spec.Network.Valid() {
		return 0, fmt.Errorf("runsc run: unknown network mode %q", spec.Network)
	}
	if spec.Network == container.NetworkSandbox && spec.NetNS == "" {
		return 0, fmt.Errorf("runsc run: network mode sandbox without a network namespace")
	}
	if err := WriteBundle(spec); err != nil {
		return 0, err
	}
	defer r.Delete(context.WithoutCancel(ctx), spec.ID)
	cmd := r.commandNet(context.WithoutCancel(ctx), spec.Network, "run", "--bundle="+spec.BundleDir, spec.ID)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("runsc run: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatch()
	mem := r.watchMemory(wctx, spec)
	end := func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if r.killProcesses(kctx, spec.ID) != nil {
			r.run(kctx, "kill", "--all", spec.ID, "9")
		}
		cancel()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-waited
		}
	}
	select {
	case err = <-waited:
	case <-ctx.Done():
		end()
		return 0, ctx.Err()
	case <-mem.outOfMemory():
		end()
		return 0, mem.err()
	}
	stopWatch()
	if mem.ended() {
		return 0, mem.err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("runsc run: %w", err)
	}
	return 0, nil
}
