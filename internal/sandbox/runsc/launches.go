package runsc

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// A container is started by `runsc run --detach` (or restore), in a
// process group of its own so that a ^C meant for cairnd does not reach
// it. So a cairnd killed while it starts containers leaves those runsc
// processes behind, and they go on: a container can appear after the next
// cairnd listed the containers at its start, and then no one owns it.
// SettleLaunches waits for them first.

// launchWait bounds how long SettleLaunches waits for leftover launches
// before it kills them.
const launchWait = 30 * time.Second

// SettleLaunches waits until no `runsc … --detach` of this driver's state
// root is running any more (those of a dead predecessor: call it at start,
// before any launch of this process), killing those still running after
// launchWait. It returns how many it found.
func (r *Runsc) SettleLaunches(ctx context.Context) (int, error) {
	pids := r.launches()
	found := len(pids)
	if found == 0 {
		return 0, nil
	}
	slog.Warn("runsc: waiting for container starts left by the previous cairnd", "count", len(pids))
	deadline := time.Now().Add(launchWait)
	for len(pids) > 0 {
		if time.Now().After(deadline) {
			for _, pid := range pids {
				slog.Warn("runsc: killing a container start left by the previous cairnd", "pid", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
			deadline = time.Now().Add(exitWait)
		}
		select {
		case <-ctx.Done():
			return found, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		pids = r.launches()
	}
	return found, nil
}

// launches returns the pids of the running `runsc … --detach` processes
// of this state root, other than this process.
func (r *Runsc) launches() []int {
	root := []byte("--root=" + r.stateRoot)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		var hasRoot, detached bool
		for _, arg := range bytes.Split(b, []byte{0}) {
			hasRoot = hasRoot || bytes.Equal(arg, root)
			detached = detached || bytes.Equal(arg, []byte("--detach"))
		}
		if hasRoot && detached && !zombie(dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie reports whether the process of /proc/PID dir has exited and
// waits to be reaped.
func zombie(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return true
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}
