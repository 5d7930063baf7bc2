package runsc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/container"
)

// The memory guard. cairn-init kills inside a sandbox that reaches its
// memory limit, but it looks every 10 ms: memory committed inside one
// system call (`dd bs=400M` in a 256 MiB sandbox) outruns it and the
// host cgroup's headroom, and the host's OOM killer would kill the whole
// sandbox. So, with cgroup v1, a sandbox's memory cgroup runs with the
// OOM killer off (memory.oom_control's oom_kill_disable): at its limit a
// task waits instead of dying, the kernel signals it (an eventfd
// registered in cgroup.event_control), and the guard raises the limit by
// a step, up to twice the usual host limit. The system call completes,
// cairn-init then kills the largest process if the memory is still held,
// and once usage is back under the usual limit the guard sets it back.
// A burst past the cap turns the OOM killer on again: the host kills the
// sandbox, which is then crashed, as before.
//
// With cgroup v2 the same is said once, when the limit is raised:
// memory.high (throttle and reclaim) at the usual host limit, memory.max
// at the cap.
//
// While cairnd is down nobody raises: a sandbox at its limit waits until
// cairnd is back and adopts it (its guard raises at once).

// memoryCap is the most the guard lets the host cgroup of a sandbox with
// usual host limit normal reach, and memoryStep what it adds each time.
func memoryCap(normal int64) int64 { return 2 * normal }

func memoryStep(guest int64) int64 { return max(64<<20, guest/2) }

// guestMemory returns the memory limit the container was created with
// (its spec's, which runsc keeps in the state file), 0 if none.
func (r *Runsc) guestMemory(id string) (int64, error) {
	base, err := r.stateBase(id)
	if err != nil {
		return 0, err
	}
	raw, err := os.ReadFile(base + ".state")
	if err != nil {
		return 0, err
	}
	var st struct {
		Spec struct {
			Linux *struct {
				Resources *struct {
					Memory *struct {
						Limit *int64 `json:"limit"`
					} `json:"memory"`
				} `json:"resources"`
			} `json:"linux"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return 0, err
	}
	if l := st.Spec.Linux; l != nil && l.Resources != nil && l.Resources.Memory != nil && l.Resources.Memory.Limit != nil {
		return *l.Resources.Memory.Limit, nil
	}
	return 0, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func writeInt(path string, v int64) error {
	return os.WriteFile(path, []byte(strconv.FormatInt(v, 10)), 0o644)
}

// underOOM reports memory.oom_control's under_oom.
func underOOM(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return false, err
	}
	return strings.Contains(string(b), "under_oom 1"), nil
}

// guardMemory guards container id's memory cgroup (see above) until ctx
// ends or the cgroup goes (the sandbox died); then it turns the OOM
// killer on again. Only cgroup v1 needs it.
func (r *Runsc) guardMemory(ctx context.Context, id string) {
	guest, err := r.guestMemory(id)
	if err != nil || guest <= 0 {
		return
	}
	dir, v2 := memoryCgroup(id)
	if dir == "" || v2 {
		return
	}
	normal := container.HostMemoryLimit(guest)
	g := &memoryGuard{id: id, dir: dir, normal: normal, cap: memoryCap(normal), step: memoryStep(guest)}
	if err := g.run(ctx); err != nil && ctx.Err() == nil {
		if _, serr := os.Stat(dir); serr == nil {
			slog.Warn("memory guard stopped; the host's OOM killer applies again", "container", id, "err", err)
		}
	}
}

type memoryGuard struct {
	id, dir           string
	normal, cap, step int64
	raised            bool // the limit is above normal
}

// lowerEvery is how often a raised limit is looked at again.
const lowerEvery = 250 * time.Millisecond

func (g *memoryGuard) run(ctx context.Context) error {
	oomControl := filepath.Join(g.dir, "memory.oom_control")
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
	if err := os.WriteFile(filepath.Join(g.dir, "cgroup.event_control"), fmt.Appendf(nil, "%d %d", efd, ctl.Fd()), 0o200); err != nil {
		return fmt.Errorf("register for OOM events: %w", err)
	}
	if err := os.WriteFile(oomControl, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("turn the OOM killer off: %w", err)
	}
	defer os.WriteFile(oomControl, []byte("0"), 0o644) // the host's OOM killer again
	for {
		if ctx.Err() != nil {
			return nil
		}
		if err := g.check(); err != nil {
			return err
		}
		// Wait for an OOM event, at most lowerEvery (for the lowering,
		// and to see ctx end).
		fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(lowerEvery/time.Millisecond)); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if fds[0].Revents != 0 {
			var buf [8]byte
			unix.Read(efd, buf[:])
		}
		if _, err := os.Stat(g.dir); err != nil {
			return nil // the sandbox is gone
		}
	}
}

// check raises the limit of a cgroup under OOM, by a step up to the cap
// (past it, the OOM killer is turned on again and ErrMemoryCap returned),
// and sets a raised limit back once usage is under the usual one.
func (g *memoryGuard) check() error {
	limitFile := filepath.Join(g.dir, "memory.limit_in_bytes")
	under, err := underOOM(g.dir)
	if err != nil {
		return err
	}
	limit, err := readInt(limitFile)
	if err != nil {
		return err
	}
	if under {
		if limit >= g.cap {
			slog.Error("sandbox memory: a burst past twice its host limit; the host's OOM killer ends it", "container", g.id, "limit", limit)
			os.WriteFile(filepath.Join(g.dir, "memory.oom_control"), []byte("0"), 0o644)
			return errMemoryCap
		}
		next := min(g.cap, max(limit, g.normal)+g.step)
		if err := writeInt(limitFile, next); err != nil {
			return fmt.Errorf("raise the memory limit: %w", err)
		}
		if !g.raised {
			slog.Warn("sandbox memory: a burst past its limit within one system call; host limit raised for it", "container", g.id, "usual", g.normal, "now", next)
		}
		g.raised = true
		return nil
	}
	if g.raised || limit > g.normal {
		usage, err := readInt(filepath.Join(g.dir, "memory.usage_in_bytes"))
		if err != nil {
			return err
		}
		if usage < g.normal {
			if err := writeInt(limitFile, g.normal); err == nil {
				slog.Info("sandbox memory: back under its limit; host limit set back", "container", g.id, "limit", g.normal)
				g.raised = false
			}
		}
	}
	return nil
}

var errMemoryCap = errors.New("memory burst past the guard's cap")
