package initd

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// reaper collects the exit status of every child with wait4(-1) on SIGCHLD
// and hands it to whoever registered for that pid. It must be the only code
// in the process that waits for children: exec.Cmd.Wait would race it.
type reaper struct {
	log *slog.Logger

	// mu is held across cmd.Start and the registration of the new pid, and
	// by the reaper while it waits and dispatches, so a status can never be
	// collected before its waiter is registered.
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
}

func newReaper(log *slog.Logger) *reaper {
	return &reaper{log: log, waiters: make(map[int]chan unix.WaitStatus)}
}

// run reaps until done is closed.
func (r *reaper) run(done <-chan struct{}) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGCHLD)
	defer signal.Stop(sigs)
	for {
		r.reap() // also collects children that exited before Notify
		select {
		case <-sigs:
		case <-done:
			return
		}
	}
}

// reap collects every child that has exited. SIGCHLD coalesces, so one
// signal may stand for many exits.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no children; 0: none exited
			return
		}
		if ch, ok := r.waiters[pid]; ok {
			delete(r.waiters, pid)
			ch <- ws // buffered; one status per pid
		} else {
			r.log.Debug("reaped", "pid", pid, "status", int(ws))
		}
	}
}

// start starts cmd and returns its pid and a channel that receives its
// exit status. The caller must not use cmd.Process or call cmd.Wait.
func (r *reaper) start(cmd *exec.Cmd) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	pid := cmd.Process.Pid
	ch := make(chan unix.WaitStatus, 1)
	r.waiters[pid] = ch
	// The pid is all we keep; drop the handle (a pidfd) os.Process holds.
	_ = cmd.Process.Release()
	return pid, ch, nil
}
