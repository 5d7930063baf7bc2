package schedule

import (
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// simulate runs the scheduler's decision every 10 s for span, with the disk
// written at each time write says, and returns how many interval
// checkpoints it takes.
func simulate(every, span time.Duration, write func(elapsed time.Duration) bool) int {
	start := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	last := start // the sandbox was made at start; nothing written yet
	dirty, n := false, 0
	for el := time.Duration(0); el <= span; el += 10 * time.Second {
		if write(el) {
			dirty = true
		}
		now := start.Add(el)
		if IntervalDue(last, every, now, dirty) {
			n++
			last, dirty = now, false
		}
	}
	return n
}

func TestIntervalCheckpointsFollowTheClockAndTheDisk(t *testing.T) {
	idle := func(time.Duration) bool { return false }
	everyMinute := func(el time.Duration) bool { return el%time.Minute == 0 }
	once := func(el time.Duration) bool { return el == 17*time.Minute }
	cases := []struct {
		name  string
		every time.Duration
		write func(time.Duration) bool
		want  int
	}{
		{"idle for an hour", 5 * time.Minute, idle, 0},
		{"written every minute, 5 min interval", 5 * time.Minute, everyMinute, 12},
		{"written every minute, 15 min interval", 15 * time.Minute, everyMinute, 4},
		{"written once", 5 * time.Minute, once, 1},
	}
	for _, c := range cases {
		if got := simulate(c.every, time.Hour, c.write); got != c.want {
			t.Errorf("%s: %d interval checkpoints in an hour, want %d", c.name, got, c.want)
		}
	}
}

func TestDeletedSandboxCheckpointsLastFourteenDays(t *testing.T) {
	m := &Scheduler{}
	deleted := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	cks := []metadata.Checkpoint{
		{ID: "a", Trigger: api.TriggerInterval, CreatedAt: deleted.Add(-48 * time.Hour)},
		{ID: "b", Trigger: api.TriggerDelete, CreatedAt: deleted},
	}
	if got := m.retentionVictims("x", cks, false, deleted.Add(13*24*time.Hour+23*time.Hour)); len(got) != 0 {
		t.Fatalf("13 d 23 h after delete: %d removed, want none", len(got))
	}
	if got := m.retentionVictims("x", cks, false, deleted.Add(14*24*time.Hour+time.Hour)); len(got) != 2 {
		t.Fatalf("14 d 01 h after delete: %d removed, want both", len(got))
	}
	// A live sandbox's are thinned by the policy instead: of two from the
	// same clock hour, hours ago, the older goes once three newer exist.
	now := deleted.Add(24 * time.Hour)
	live := []metadata.Checkpoint{
		{ID: "old", CreatedAt: now.Add(-4*time.Hour - 30*time.Minute)},
		{ID: "older", CreatedAt: now.Add(-4*time.Hour - 40*time.Minute)},
		{ID: "n1", CreatedAt: now.Add(-3 * time.Minute)},
		{ID: "n2", CreatedAt: now.Add(-2 * time.Minute)},
		{ID: "n3", CreatedAt: now.Add(-time.Minute)},
	}
	got := m.retentionVictims("y", live, true, now)
	if len(got) != 1 || got[0].ID != "older" {
		t.Fatalf("live sandbox: removed %+v, want only \"older\"", got)
	}
}
