package initd

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// minPrune is the size of the group set at which add first forgets the
// groups that are gone.
const minPrune = 64

// groups is the set of process groups of the commands initd started. Each
// command leads its own group (Setpgid, or Setsid on a tty), so a signal
// sent to the group also reaches what the command started in it.
type groups struct {
	mu      sync.Mutex
	pgid    map[int]struct{}
	pruneAt int // size at which add prunes, so the set stays bounded
}

func newGroups() *groups {
	return &groups{pgid: make(map[int]struct{}), pruneAt: minPrune}
}

func (g *groups) add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pgid) >= g.pruneAt {
		g.signalLocked(0)
		g.pruneAt = max(minPrune, 2*len(g.pgid))
	}
	g.pgid[pgid] = struct{}{}
}

// signal sends sig to every group and forgets the groups that are gone.
// It reports whether any group was still there. Signal 0 only checks.
func (g *groups) signal(sig unix.Signal) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.signalLocked(sig)
}

func (g *groups) signalLocked(sig unix.Signal) bool {
	for pgid := range g.pgid {
		if err := unix.Kill(-pgid, sig); errors.Is(err, unix.ESRCH) {
			delete(g.pgid, pgid)
		}
	}
	return len(g.pgid) > 0
}
