package initd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
)

// The OOM killer. gVisor's sentry tells the guest its total memory (the
// sandbox's limit: MemTotal) and accounts every page it gives the guest,
// but it has no OOM killer of its own: a guest that allocates past
// MemTotal just grows until the host cgroup kills the whole sandbox. So
// cairn-init does what Linux's OOM killer does: when the guest's memory in
// use (MemTotal - MemFree, the sentry's own accounting) reaches the limit,
// it sends SIGKILL to the process with the largest resident set (never
// itself), logs it and tells cairnd (the events op). It looks every
// oomSlowPoll, every oomFastPoll once more than three quarters of the
// limit are in use, and kills no other process until the memory in use
// has fallen below the limit since its last kill, or oomVictimWait has
// passed (the victim may be dying inside a long system call, and the
// sentry takes a moment to account its memory as free).
//
// The limit is the smaller of MemTotal and Config.MemoryLimit (cairnd
// passes the sandbox's limit in CAIRN_MEMORY_LIMIT).

const (
	oomSlowPoll = 100 * time.Millisecond
	oomFastPoll = 10 * time.Millisecond
	oomCooldown = 250 * time.Millisecond
)

// oomKiller watches the guest's memory and kills when it runs out.
type oomKiller struct {
	s     *server
	limit int64 // 0: MemTotal alone

	mu      sync.Mutex
	last    *api.OOMKill
	changed chan struct{} // closed and replaced at each kill
}

func newOOMKiller(s *server, limit int64) *oomKiller {
	return &oomKiller{s: s, limit: limit, changed: make(chan struct{})}
}

// run watches until ctx ends.
func (k *oomKiller) run(ctx context.Context) {
	wait := oomSlowPoll
	failing := false
	victim, killedAt := 0, time.Time{} // the last process killed, and when
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		limit, used, err := k.usage()
		if err != nil {
			// A failed read (a full fd table…) must not end the watch for
			// good: try again at the slow pace, logging the first failure.
			if !failing {
				k.s.log.Warn("oom killer: read memory usage; retrying", "err", err)
			}
			failing, wait = true, oomSlowPoll
			continue
		}
		failing = false
		wait = oomSlowPoll
		if used > limit/4*3 {
			wait = oomFastPoll
		}
		if used < limit {
			victim = 0 // the last kill freed what was needed
			continue
		}
		if victim > 0 && time.Since(killedAt) < oomVictimWait {
			// As Linux: no second victim while the first is still
			// dying (one killed inside a long system call exits only
			// when the call ends), nor while the memory it freed is not
			// yet accounted as free (the sentry frees lazily: under load
			// it took over 500 ms, and an innocent exec was killed).
			continue
		}
		if kill, ok := k.killLargest(used, limit); ok {
			k.record(kill)
			victim, killedAt = kill.PID, time.Now()
			wait = oomCooldown
		}
	}
}

// oomVictimWait is how long the OOM killer waits at most, after a kill,
// for the memory in use to fall below the limit before it may choose
// another victim.
const oomVictimWait = 3 * time.Second

// usage returns the limit and the guest's memory in use, in bytes.
func (k *oomKiller) usage() (limit, used int64, err error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	total, free := meminfoField(b, "MemTotal:"), meminfoField(b, "MemFree:")
	if total <= 0 || free < 0 {
		return 0, 0, fmt.Errorf("no MemTotal/MemFree in /proc/meminfo")
	}
	limit = total
	if k.limit > 0 && k.limit < limit {
		limit = k.limit
	}
	return limit, total - free, nil
}

// meminfoField returns the value of a /proc/meminfo line in bytes, -1 if
// missing.
func meminfoField(b []byte, name string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == name {
			if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return v << 10 // kB
			}
		}
	}
	return -1
}

// killLargest sends SIGKILL to the process with the largest resident set
// other than cairn-init, and says whom.
func (k *oomKiller) killLargest(used, limit int64) (api.OOMKill, bool) {
	self := os.Getpid()
	pageSize := int64(os.Getpagesize())
	best, bestRSS := 0, int64(-1)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(d + "/statm")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		rss, err := strconv.ParseInt(f[1], 10, 64)
		if err == nil && rss*pageSize > bestRSS {
			best, bestRSS = pid, rss*pageSize
		}
	}
	if best == 0 {
		k.s.log.Warn("out of memory, and no process to kill", "used", used, "limit", limit)
		return api.OOMKill{}, false
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", best))
	kill := api.OOMKill{PID: best, Command: strings.TrimSpace(string(comm)), RSSBytes: bestRSS, At: time.Now().UTC(),
		UsedBytes: used, LimitBytes: limit}
	if err := unix.Kill(best, unix.SIGKILL); err != nil {
		return api.OOMKill{}, false // gone meanwhile: look again
	}
	k.s.log.Warn("out of memory: killed the largest process", "pid", kill.PID, "command", kill.Command,
		"rss", kill.RSSBytes, "used", used, "limit", limit)
	return kill, true
}

func (k *oomKiller) record(kill api.OOMKill) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.last = &kill
	close(k.changed)
	k.changed = make(chan struct{})
}

// latest returns the last kill (nil if none) and a channel closed at the
// next.
func (k *oomKiller) latest() (*api.OOMKill, <-chan struct{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last, k.changed
}
