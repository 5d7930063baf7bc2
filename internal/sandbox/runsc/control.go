package runsc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The fast path of Pause and Resume: what `runsc pause` and `runsc resume`
// do (runsc/container/container.go Pause, Resume), done inside cairnd. The
// package comment says why it is safe and when it gives way to runsc.

// Methods of the sandbox's control server (runsc/boot/controller.go).
const (
	methodPause  = "containerManager.Pause"
	methodResume = "containerManager.Resume"
)

// answerTimeout bounds the wait for the sandbox's answer once the request is
// on its socket. The caller's context does not shorten it: a request the
// sandbox has received is carried out whether or not anyone waits for the
// answer, and the state file must then say so. (A variable for tests.)
var answerTimeout = 30 * time.Second

// urpcUnknownMethod is the error text of urpc's ErrUnknownMethod.
const urpcUnknownMethod = "unknown method"

// idPattern is runsc's validateID: ids that cannot be glob or path syntax.
var idPattern = regexp.MustCompile(`^[\w+\.-]+$`)

// transition is one status change of a container and the control call that
// makes it: the same pairs runsc's changeStatus allows.
type transition struct {
	verb     string // runsc command that does the same: "pause"
	method   string
	from, to string // container status before and after
	undo     string // method that reverses method
	// appliedOnError: the sandbox may have applied the change even when
	// it answers with an error. containerManager.Resume unpauses the
	// kernel first (which cannot fail) and only then runs post-resume
	// hooks, which can; containerManager.Pause cannot fail at all.
	appliedOnError bool
}

var (
	pauseTransition  = transition{verb: "pause", method: methodPause, from: "running", to: "paused", undo: methodResume}
	resumeTransition = transition{verb: "resume", method: methodResume, from: "paused", to: "running", undo: methodPause, appliedOnError: true}
)

// fallbackError says that the fast path could not be taken and changed
// nothing, neither in the sandbox nor in its state file: running runsc
// instead is safe.
type fallbackError struct{ err error }

func (e *fallbackError) Error() string { return e.err.Error() }
func (e *fallbackError) Unwrap() error { return e.err }

func fallback(format string, args ...any) error {
	return &fallbackError{fmt.Errorf(format, args...)}
}

// containerState is what the fast paths (here and in kill.go) read of a
// runsc state file (runsc/container.Container as JSON).
type containerState struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	GoferPid int    `json:"goferPid"`
	Sandbox  *struct {
		ID                string `json:"id"`
		Pid               int    `json:"pid"`
		ControlSocketPath string `json:"controlSocketPath"`
	} `json:"sandbox"`
}

// parseState decodes the state file at path, raw, of container id, which
// must be the root container of its own sandbox.
func parseState(raw []byte, path, id string) (containerState, error) {
	var c containerState
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("state file %s: %w", path, err)
	}
	if !c.isSandboxRoot(id) {
		return c, fmt.Errorf("state file %s is not that of a sandbox's root container %q", path, id)
	}
	return c, nil
}

// isSandboxRoot reports whether c is the root container of its own
// sandbox, named id: the only kind cairn makes, and the only kind the fast
// paths handle.
func (c *containerState) isSandboxRoot(id string) bool {
	return c.ID == id && c.Sandbox != nil && c.Sandbox.ID == id
}

// readState reads and parses the state file runsc keeps for container id.
func (r *Runsc) readState(id string) (containerState, error) {
	base, err := r.stateBase(id)
	if err != nil {
		return containerState{}, err
	}
	raw, err := os.ReadFile(base + ".state")
	if err != nil {
		return containerState{}, err
	}
	return parseState(raw, base+".state", id)
}

// stateBase is the path, less its ".state" or ".lock" extension, of
// container id's state file. cairn's containers are each the root
// container of their own sandbox, which runsc names "<id>_sandbox:<id>"
// (state_file.go buildPath). Ids runsc would refuse are refused.
func (r *Runsc) stateBase(id string) (string, error) {
	if !idPattern.MatchString(id) {
		return "", fmt.Errorf("container id %q is not one runsc accepts", id)
	}
	return filepath.Join(r.stateRoot, id+"_sandbox:"+id), nil
}

// control makes transition t of container id without running runsc: under
// the container's state file lock it checks the recorded status, sends the
// control call to the sandbox and records the new status. Errors wrapping
// *fallbackError mean nothing happened and runsc may be run instead.
func (r *Runsc) control(ctx context.Context, id string, t transition) error {
	c, err := r.lockState(ctx, id, t.verb)
	if err != nil {
		return err
	}
	defer c.release()
	if to, in := r.InDoubt(id); in {
		return fmt.Errorf("runsc %s: %w: container %q (a change to %s was cut short)", t.verb, ErrInDoubt, id, to)
	}
	if c.Status != t.from {
		return fmt.Errorf("runsc %s: %w: container %q is %s", t.verb, ErrWrongState, id, c.Status)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(c.raw, &doc); err != nil {
		return fallback("state file %s: %w", c.path, err)
	}

	// Until the new status is recorded, a crash leaves it in doubt
	// (indoubt.go).
	clear, err := r.markTransition(id, t.to)
	if err != nil {
		// runsc, which writes its files here too, would fail as well.
		return fmt.Errorf("runsc %s: record the change in flight: %w", t.verb, err)
	}
	keepMarker := false
	defer func() {
		if !keepMarker {
			clear()
		}
	}()
	sockets := []string{c.Sandbox.ControlSocketPath, filepath.Join(r.stateRoot, "runsc-"+id+".sock")}
	err = call(ctx, sockets, t.method)
	var unknown *unknownOutcomeError
	switch {
	case err == nil:
	case errors.As(err, &unknown):
		// The sandbox has the request and will carry it out: record it.
	case errors.Is(err, errRemote) && t.appliedOnError:
		// Applied, then failed after: record it, and report the failure.
	case ctx.Err() != nil:
		return fmt.Errorf("runsc %s: %w", t.verb, err)
	default:
		return &fallbackError{fmt.Errorf("control call %s: %w", t.method, err)}
	}

	status, _ := json.Marshal(t.to)
	doc["status"] = status
	out, merr := json.Marshal(doc)
	werr := merr
	if merr == nil {
		werr = replaceFile(c.path, out, 0o640)
	}
	if werr != nil {
		// The sandbox changed but its state file does not say so: undo
		// the change, so that the two agree again.
		uerr := call(context.WithoutCancel(ctx), sockets, t.undo)
		if uerr != nil {
			// Which it is, only the sandbox can tell: the marker
			// stays, and the change is in doubt until Settle.
			keepMarker = true
			return fmt.Errorf("runsc %s: %w: container %q is %s but its state file still says %s (%v), and undoing failed (%v)",
				t.verb, ErrInDoubt, id, t.to, t.from, werr, uerr)
		}
		return fmt.Errorf("runsc %s: recording the new status (undone): %w", t.verb, werr)
	}
	if err != nil {
		return fmt.Errorf("runsc %s: container %q recorded as %s: %w", t.verb, id, t.to, err)
	}
	return nil
}

// heldState is a container's state file, read under its lock.
type heldState struct {
	containerState
	path string // of the state file
	raw  []byte // the state file as read
	lock *os.File
}

// release lets go of the state file lock.
func (h *heldState) release() { h.lock.Close() }

// lockState takes container id's state file lock (for runsc command verb,
// in errors) and reads the state file under it; it checks that the
// container is the root container of its own sandbox. Call release when
// done. Errors wrapping *fallbackError mean that the file layout is not
// what the fast paths know.
func (r *Runsc) lockState(ctx context.Context, id, verb string) (*heldState, error) {
	base, err := r.stateBase(id)
	if err != nil {
		return nil, &fallbackError{err}
	}
	h := &heldState{path: base + ".state"}
	h.lock, err = lockFile(ctx, base+".lock")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(h.path); errors.Is(serr, fs.ErrNotExist) {
				return nil, fmt.Errorf("runsc %s: %w", verb, ErrNotExist)
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("runsc %s: waiting for the state file lock: %w", verb, err)
		}
		return nil, fallback("state file lock: %w", err)
	}
	h.raw, err = os.ReadFile(h.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = fmt.Errorf("runsc %s: %w", verb, ErrNotExist)
	case err != nil:
		err = fallback("read state file: %w", err)
	default:
		if h.containerState, err = parseState(h.raw, h.path, id); err != nil {
			err = &fallbackError{err}
		}
	}
	if err != nil {
		h.release()
		return nil, err
	}
	return h, nil
}

// lockFile takes the exclusive flock(2) on the runsc lock file at path, the
// lock every runsc command holds while it reads or writes the state file
// (github.com/gofrs/flock). It does not create the file: runsc removes it
// with the container. It waits while another holds the lock, until ctx
// ends. Closing the file releases the lock.
func lockFile(ctx context.Context, path string) (*os.File, error) {
	delay := time.Millisecond
	for {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			// runsc unlinks the lock file while holding the lock when it
			// deletes the container; a lock on an unlinked file locks
			// nothing, and a new container may have made a new one.
			var held, now unix.Stat_t
			if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &now) == nil &&
				held.Dev == now.Dev && held.Ino == now.Ino {
				return f, nil
			}
			f.Close()
			if _, serr := os.Stat(path); serr != nil {
				return nil, serr
			}
			continue
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// replaceFile writes data to path through a temporary file and a rename, so
// that a crash leaves either the old or the new state file, never a torn
// one. The temporary name does not end in ".state": runsc's listings
// (`*_sandbox:*.state`) never see it.
func replaceFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// errRemote marks an error the sandbox answered with.
var errRemote = errors.New("sandbox answered with an error")

// unknownOutcomeError: the request reached the sandbox but no answer came
// within answerTimeout.
type unknownOutcomeError struct{ err error }

func (e *unknownOutcomeError) Error() string {
	return fmt.Sprintf("no answer within %s: %v", answerTimeout, e.err)
}
func (e *unknownOutcomeError) Unwrap() error { return e.err }

// call makes one urpc call of method, which takes and returns nothing, on
// the first of sockets that accepts a connection, and waits up to
// answerTimeout for the answer (see callWith).
func call(ctx context.Context, sockets []string, method string) error {
	return callWith(ctx, sockets, method, nil, nil, answerTimeout)
}

// callWith makes one urpc call of method with arg (JSON) and files on the
// first of sockets that accepts a connection. The wire format is gvisor's
// pkg/urpc over a pkg/unet stream socket: the request is the JSON object
// {"method":M,"arg":A}, sent with files as SCM_RIGHTS on its first bytes;
// the answer is {"success":B,"err":S,"result":R}; no delimiters. It waits
// for the answer up to wait after sending, or, with wait 0, until ctx
// ends.
//
// Errors: if the request could not be sent, or the sandbox closed the
// connection without answering (it answers before it closes, so it died or
// is shutting down), nothing happened. An answer with success false wraps
// errRemote; "unknown method" happens before any method runs. No answer
// within wait is *unknownOutcomeError.
func callWith(ctx context.Context, sockets []string, method string, arg any, files []*os.File, wait time.Duration) error {
	conn, err := dialControl(ctx, sockets)
	if err != nil {
		return err
	}
	defer conn.Close()
	req, err := json.Marshal(struct {
		Method string `json:"method"`
		Arg    any    `json:"arg"`
	}{method, arg})
	if err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok {
		conn.SetWriteDeadline(d)
	}
	// A stream socket takes the whole request in one write or fails; a
	// partial write would leave the sandbox waiting for the rest, and the
	// close below ends that without a call.
	if err := send(conn, req, files); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if wait > 0 {
		conn.SetReadDeadline(time.Now().Add(wait))
	} else {
		conn.SetReadDeadline(time.Time{})
		stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
		defer stop()
	}
	var ans struct {
		Success bool   `json:"success"`
		Err     string `json:"err"`
	}
	if err := json.NewDecoder(conn).Decode(&ans); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if wait == 0 && ctx.Err() != nil {
				return fmt.Errorf("waiting for the answer: %w", ctx.Err())
			}
			return &unknownOutcomeError{err}
		}
		return fmt.Errorf("answer: %w", err)
	}
	if !ans.Success {
		if ans.Err == urpcUnknownMethod {
			return fmt.Errorf("sandbox does not know %s", method)
		}
		return fmt.Errorf("%w: %s", errRemote, ans.Err)
	}
	return nil
}

// send writes req to conn, with files' descriptors as SCM_RIGHTS on its
// first bytes (urpc's marshal does the same).
func send(conn net.Conn, req []byte, files []*os.File) error {
	if len(files) == 0 {
		_, err := conn.Write(req)
		return err
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("files can only travel over a unix socket, not %T", conn)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n, _, err := uc.WriteMsgUnix(req, unix.UnixRights(fds...), nil)
	runtime.KeepAlive(files)
	if err == nil && n < len(req) {
		_, err = uc.Write(req[n:])
	}
	return err
}

// dialControl connects to the first of paths that accepts: runsc's
// getControlSocketPath tries the recorded path, then its name in the state
// root. A path too long for sockaddr_un is reached through /proc/self/fd,
// as runsc does.
func dialControl(ctx context.Context, paths []string) (net.Conn, error) {
	var errs []error
	var d net.Dialer
	for _, p := range slices.Compact(paths) {
		if p == "" {
			continue
		}
		addr := p
		if len(p) >= len(unix.RawSockaddrUnix{}.Path) {
			fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				errs = append(errs, fmt.Errorf("open %s: %w", p, err))
				continue
			}
			defer unix.Close(fd)
			addr = "/proc/self/fd/" + strconv.Itoa(fd)
		}
		conn, err := d.DialContext(ctx, "unix", addr)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("no control socket recorded")
	}
	return nil, fmt.Errorf("connect to control socket: %w", errors.Join(errs...))
}
