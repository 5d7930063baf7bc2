package initd

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// groups is the set of process groups of the commands initd started. Each
// command leads its own group (Setpgid, or Setsid on a tty), so a signal
// sent to the group also reaches what the command started in it.
type groups struct {
	mu   sync.Mutex
	pgid map[int]struct{}
}

func newGroups() *groups {
	return &groups{pgid: make(map[int]struct{})}
}

func (g *groups) add(pgid int) {
	g.mu.Lock()
	g.pgid[pgid] = struct{}{}
	g.mu.Unlock()
}

// signal sends sig to every group and forgets the groups that are gone.
// It reports whether any group was still there. Signal 0 only checks.
func (g *groups) signal(sig unix.Signal) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pgid := range g.pgid {
		if err := unix.Kill(-pgid, sig); errors.Is(err, unix.ESRCH) {
			delete(g.pgid, pgid)
		}
	}
	return len(g.pgid) > 0
}
