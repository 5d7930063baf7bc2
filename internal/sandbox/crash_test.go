package sandbox

import (
	"testing"
	"time"
)

// Restarts after crashes: 1 s, 2 s, 4 s, 8 s, 16 s, then none until the
// oldest of the last five is 10 minutes old.
func TestRestartBackoffAndLimit(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &Manager{cfg: Config{Now: func() time.Time { return now }}, restarts: map[string][]time.Time{}}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second} {
		got, ok := m.nextRestart("a")
		if !ok || got != want {
			t.Fatalf("restart %d: %v, %v; want %v", i+1, got, ok, want)
		}
		now = now.Add(time.Minute)
	}
	if d, ok := m.nextRestart("a"); ok {
		t.Fatalf("a 6th restart within 10 minutes was allowed (after %v)", d)
	}
	if d, ok := m.nextRestart("b"); !ok || d != time.Second {
		t.Fatalf("another sandbox: %v, %v", d, ok)
	}
	now = now.Add(5*time.Minute + 30*time.Second) // the first restart is now 10.5 minutes old
	if d, ok := m.nextRestart("a"); !ok || d != 16*time.Second {
		t.Fatalf("after the oldest left the window: %v, %v; want 16s", d, ok)
	}
	m.forgetRestarts("a")
	if d, ok := m.nextRestart("a"); !ok || d != time.Second {
		t.Fatalf("after forgetRestarts: %v, %v", d, ok)
	}
}
