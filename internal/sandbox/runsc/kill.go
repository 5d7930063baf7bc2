package runsc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The fast part of Delete. `runsc delete --force` of a running sandbox
// sends SIGKILL to the sandbox and gofer processes and then waits for each
// to be gone by polling every 100 ms (runsc/sandbox waitForStopped,
// runsc/container waitForStopped), so it takes the next multiple of 100 ms
// after the kernel has freed their memory (≈ 0.1 s per 512 MiB). So Delete
// first kills both itself, through pidfds, and waits for their exit on the
// pidfds; runsc then finds them gone at its first look and only removes the
// container's files. KillProcesses alone lets a caller that need not wait
// (a restore in place, see the sandbox package) go on at once.

// exitWait bounds the wait for a killed process to exit (its memory freed).
const exitWait = 10 * time.Second

// killProcesses kills container id's processes and waits until they have
// exited; see KillProcesses.
func (r *Runsc) killProcesses(ctx context.Context, id string) error {
	wait, err := r.KillProcesses(ctx, id)
	if err != nil {
		return err
	}
	return wait(ctx)
}

// KillProcesses sends SIGKILL to the sandbox and gofer processes of
// container id, as recorded in its state file, and returns at once; wait
// waits until they have exited (their memory freed), at most exitWait, and
// must be called once. A process is killed only if it still is the one
// runsc started (its command line names the container). On error Delete
// must do the rest: the processes are gone already (an error wrapping
// syscall.ESRCH, or os.ErrNotExist without a state file), or could not all
// be found or signalled. The container itself remains until Delete.
func (r *Runsc) KillProcesses(ctx context.Context, id string) (wait func(context.Context) error, err error) {
	st, err := r.readState(id)
	if err != nil {
		return nil, err
	}
	var fds []int
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	for _, p := range []struct {
		pid  int
		name string
	}{{st.Sandbox.Pid, "runsc-sandbox"}, {st.GoferPid, "runsc-gofer"}} {
		if p.pid <= 0 {
			continue
		}
		fd, err := openOwnProcess(p.pid, p.name, id)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		fds = append(fds, fd)
	}
	if len(fds) == 0 {
		return nil, fmt.Errorf("container %q has no process left: %w", id, unix.ESRCH)
	}
	for _, fd := range fds {
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			closeAll()
			return nil, fmt.Errorf("kill a process of %q: %w", id, err)
		}
	}
	return func(ctx context.Context) error {
		defer closeAll()
		ctx, cancel := context.WithTimeout(ctx, exitWait)
		defer cancel()
		for _, fd := range fds {
			if err := waitExit(ctx, fd); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// openOwnProcess returns a pidfd of process pid if it is the runsc process
// name of container id: its command line starts with name and ends with id.
// The pidfd is opened first and checked to be alive after the command line
// is read, so the check is of the process the pidfd refers to, not of a
// later one with the same pid.
func openOwnProcess(pid int, name, id string) (int, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, err
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err == nil {
		err = unix.PidfdSendSignal(fd, 0, nil, 0)
	}
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, os.ErrNotExist) {
			err = unix.ESRCH
		}
		return -1, err
	}
	if len(cmdline) == 0 {
		// A zombie: it has exited, and nobody reaped it yet (its parent,
		// runsc, is long gone; kill(2) still reaches it).
		unix.Close(fd)
		return -1, fmt.Errorf("process %d has exited: %w", pid, unix.ESRCH)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if args[0] != name || args[len(args)-1] != id {
		unix.Close(fd)
		return -1, fmt.Errorf("process %d is not %s of %s: %q", pid, name, id, args)
	}
	return fd, nil
}

// waitExit waits until the process of pidfd fd has exited (it becomes
// readable then), or ctx ends.
func waitExit(ctx context.Context, fd int) error {
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 20)
		if n > 0 {
			return nil
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("killed process has not exited: %w", ctx.Err())
		}
	}
}
