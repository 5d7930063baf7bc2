package runsc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/container"
)

// The memory of a container run in the foreground (RunAttached: a build
// step's command, with no cairn-init inside to kill within the guest).
// gVisor tells the guest its limit as its total memory but kills nothing
// past it: the host cgroup is the bound. As for a sandbox, the cgroup
// starts at the guest's limit (runsc reads it for the guest's total) and
// is given the sentry's headroom (container.HostMemoryLimit) once the
// sandbox process runs, its total memory fixed. Then:
//
//   - cgroup v1: the OOM killer is off in the cgroup and an eventfd is
//     registered for its OOM events (cgroup.event_control). At the limit,
//     once the kernel could reclaim nothing, the container's tasks wait
//     instead of being killed; the watch sees the cgroup under OOM and
//     says so, and RunAttached kills the container's processes and
//     returns ErrOutOfMemory. The OOM killer is turned on again when the
//     watch ends, so nothing is left waiting even if the kill failed.
//   - cgroup v2: memory.max at the host limit, memory.oom.group set (the
//     kernel kills the whole container at once), and the watch reads
//     memory.events' oom_kill counter while the container runs and once
//     more as it ends.
//
// A container whose cgroup never shows up (no memory controller) runs
// bounded by nothing but the guest's total memory, as a sandbox would.

// ErrOutOfMemory is wrapped by RunAttached's error when the container
// used all the memory its spec allows and was ended for it.
var ErrOutOfMemory = errors.New("the container ran out of memory")

// memoryWatch watches one foreground container's memory cgroup.
type memoryWatch struct {
	r     *Runsc
	id    string
	guest int64
	oom   chan struct{} // closed once the container was seen out of memory
	once  sync.Once
	done  chan struct{} // closed when run returns
	// v2: the cgroup and its oom_kill count before the container ran.
	mu       sync.Mutex
	v2dir    string
	v2before int
}

// watchMemory starts watching the cgroup of spec's container until ctx
// ends; nil if spec has no memory limit.
func (r *Runsc) watchMemory(ctx context.Context, spec Spec) *memoryWatch {
	if spec.MemoryBytes <= 0 {
		return nil
	}
	w := &memoryWatch{r: r, id: spec.ID, guest: spec.MemoryBytes, oom: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.run(ctx)
	}()
	return w
}

// outOfMemory is closed once the container was seen out of memory (a nil
// watch's never is).
func (w *memoryWatch) outOfMemory() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.oom
}

// ended reports, once the container has ended and the watch's context
// with it, whether it ran out of memory.
func (w *memoryWatch) ended() bool {
	if w == nil {
		return false
	}
	<-w.done
	w.mu.Lock()
	dir, before := w.v2dir, w.v2before
	w.mu.Unlock()
	if dir != "" {
		if n, err := oomKills(dir, true); err == nil && n > before {
			w.sawOOM()
		}
	}
	select {
	case <-w.oom:
		return true
	default:
		return false
	}
}

func (w *memoryWatch) sawOOM() { w.once.Do(func() { close(w.oom) }) }

// err is the error of a container that ran out of memory.
func (w *memoryWatch) err() error {
	return fmt.Errorf("%w: its processes and gVisor's own memory reached the host's limit of %d MiB", ErrOutOfMemory, container.HostMemoryLimit(w.guest)>>20)
}

// watchPoll is how often the watch looks for the cgroup and the started
// sandbox, and reads memory.events (v2).
const watchPoll = 10 * time.Millisecond

func (w *memoryWatch) run(ctx context.Context) {
	var dir string
	var v2 bool
	for dir == "" {
		if dir, v2 = memoryCgroup(w.id); dir != "" {
			break
		}
		if !sleepCtx(ctx, watchPoll) {
			return
		}
	}
	host := container.HostMemoryLimit(w.guest)
	if v2 {
		w.runV2(ctx, dir, host)
		return
	}
	if err := w.runV1(ctx, dir, host); err != nil && ctx.Err() == nil {
		if _, serr := os.Stat(dir); serr == nil {
			slog.Warn("memory watch stopped; the host's OOM killer applies", "container", w.id, "err", err)
		}
	}
}

func (w *memoryWatch) runV1(ctx context.Context, dir string, host int64) error {
	oomControl := filepath.Join(dir, "memory.oom_control")
	ctl, err := os.Open(oomControl)
	if err != nil {
		return err
	}
	defer ctl.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return err
	}
	defer unix.Close(efd)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), fmt.Appendf(nil, "%d %d", efd, ctl.Fd()), 0o200); err != nil {
		return fmt.Errorf("register for OOM events: %w", err)
	}
	if err := os.WriteFile(oomControl, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("turn the OOM killer off: %w", err)
	}
	defer os.WriteFile(oomControl, []byte("0"), 0o644) // on again, whatever happens next
	raised := false
	for {
		if !raised && w.r.sandboxStarted(w.id) {
			if err := writeInt(filepath.Join(dir, "memory.limit_in_bytes"), host); err != nil {
				return fmt.Errorf("raise the memory limit: %w", err)
			}
			raised = true
		}
		under, err := underOOM(dir)
		if err != nil {
			return nil // the container is gone
		}
		if under {
			w.sawOOM()
			return nil
		}
		wait := 5 * watchPoll // the watch's end is seen this late at most
		if !raised {
			wait = watchPoll
		}
		fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(wait/time.Millisecond)); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if fds[0].Revents != 0 {
			var buf [8]byte
			unix.Read(efd, buf[:])
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (w *memoryWatch) runV2(ctx context.Context, dir string, host int64) {
	before, err := oomKills(dir, true)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.v2dir, w.v2before = dir, before
	w.mu.Unlock()
	os.WriteFile(filepath.Join(dir, "memory.oom.group"), []byte("1"), 0o644)
	raised := false
	for {
		if !raised && w.r.sandboxStarted(w.id) {
			if err := writeInt(filepath.Join(dir, "memory.max"), host); err != nil {
				return
			}
			raised = true
		}
		n, err := oomKills(dir, true)
		if err != nil {
			return
		}
		if n > before {
			w.sawOOM()
			return
		}
		if !sleepCtx(ctx, watchPoll) {
			return
		}
	}
}

// sandboxStarted reports whether container id's sandbox process runs
// (its state file names it): its guest's total memory is fixed then.
func (r *Runsc) sandboxStarted(id string) bool {
	st, err := r.readState(id)
	return err == nil && st.Sandbox != nil && st.Sandbox.Pid > 0
}

// sleepCtx waits d, and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
