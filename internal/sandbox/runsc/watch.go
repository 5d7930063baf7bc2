package runsc

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Watch reports the death of container id's processes as it happens: it
// holds pidfds of the sandbox process (the gVisor sentry, whose host pid
// `runsc run --detach` reports) and of the gofer, as the state file
// records them, and waits in poll(2) until one of them exits. Then it
// sends one line on the channel saying which process ended (and whether
// the host's OOM killer killed it) and closes it. The end of ctx stops
// the watch: the channel is closed without a line. A process already gone
// is reported at once. While the watch runs, the container's memory
// guard runs too (memguard.go).
func (r *Runsc) Watch(ctx context.Context, id string) (<-chan string, error) {
	st, err := r.readState(id)
	if err != nil {
		return nil, err
	}
	type watched struct {
		fd   int
		pid  int
		name string
	}
	var procs []watched
	closeAll := func() {
		for _, p := range procs {
			unix.Close(p.fd)
		}
	}
	gone := ""
	for _, p := range []struct {
		pid  int
		name string
	}{{st.Sandbox.Pid, "runsc-sandbox"}, {st.GoferPid, "runsc-gofer"}} {
		if p.pid <= 0 {
			continue
		}
		fd, err := openOwnProcess(p.pid, p.name, id)
		if errors.Is(err, unix.ESRCH) {
			if gone == "" {
				gone = fmt.Sprintf("the %s process (pid %d) is gone", p.name, p.pid)
			}
			continue
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		procs = append(procs, watched{fd, p.pid, p.name})
	}
	if st.Sandbox.Pid <= 0 {
		closeAll()
		return nil, fmt.Errorf("container %q records no sandbox process", id)
	}
	out := make(chan string, 1)
	if gone != "" {
		closeAll()
		out <- r.deathReason(id, gone)
		close(out)
		return out, nil
	}
	// While it is watched, a burst of memory does not kill it (memguard.go).
	go r.guardMemory(ctx, id)
	// An eventfd wakes the poll when ctx ends.
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		closeAll()
		return nil, err
	}
	woken := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(woken)
		var one = [8]byte{1}
		unix.Write(wake, one[:])
	})
	go func() {
		defer close(out)
		defer unix.Close(wake)
		defer closeAll()
		// wake is closed only once the callback cannot write to it any
		// more: a write to a closed (and reused) fd number would land in
		// another file.
		defer func() {
			if !stop() {
				<-woken
			}
		}()
		fds := []unix.PollFd{{Fd: int32(wake), Events: unix.POLLIN}}
		for _, p := range procs {
			fds = append(fds, unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN})
		}
		for {
			for i := range fds {
				fds[i].Revents = 0
			}
			_, err := unix.Poll(fds, -1)
			if err != nil && !errors.Is(err, unix.EINTR) {
				out <- fmt.Sprintf("watching the sandbox's processes failed: %v", err)
				return
			}
			if fds[0].Revents != 0 {
				return
			}
			for i, p := range procs {
				if fds[i+1].Revents != 0 {
					out <- r.deathReason(id, fmt.Sprintf("the %s process (pid %d) exited", p.name, p.pid))
					return
				}
			}
		}
	}()
	return out, nil
}

// deathReason adds to what, the process that ended, whether the host's
// OOM killer killed in the container's cgroup.
func (r *Runsc) deathReason(id, what string) string {
	if n, err := HostOOMKills(id); err == nil && n > 0 {
		return what + ": killed by the host's out-of-memory killer (the sandbox went past its memory limit and the sentry's headroom)"
	}
	return what
}
