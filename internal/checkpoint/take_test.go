package checkpoint

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakes record the protocol's calls and inject faults; the real runsc,
// cairn-init and btrfs are exercised in test/integration.
type recorder struct {
	mu        sync.Mutex
	calls     []string
	syncDelay time.Duration
	pauseErr  error
	snapErr   error
	paused    bool
}

func (r *recorder) log(s string) { r.mu.Lock(); r.calls = append(r.calls, s); r.mu.Unlock() }

func (r *recorder) Sync(ctx context.Context) error {
	r.log("sync")
	select {
	case <-time.After(r.syncDelay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (r *recorder) Pause(ctx context.Context, id string) error {
	r.log("pause")
	r.paused = true
	return r.pauseErr
}
func (r *recorder) Resume(ctx context.Context, id string) error {
	r.log("resume")
	r.paused = false
	return nil
}
func (r *recorder) Snapshot(ctx context.Context, src, dst string, ro bool) error {
	r.log("snapshot")
	if !ro {
		return errors.New("checkpoint snapshots must be read-only")
	}
	return r.snapErr
}

func request(r *recorder, running bool) Request {
	return Request{Container: "sb", Root: "/root", Dest: "/ck", Running: running, Agent: r, Runtime: r, Pool: r, QuiesceTimeout: 50 * time.Millisecond}
}

func TestTakeQuiescesPausesSnapshotsResumes(t *testing.T) {
	r := &recorder{}
	res, err := Take(context.Background(), request(r, true))
	if err != nil || res.Consistency != Frozen {
		t.Fatalf("Take: %+v %v", res, err)
	}
	if got := r.calls; len(got) != 4 || got[0] != "sync" || got[1] != "pause" || got[2] != "snapshot" || got[3] != "resume" {
		t.Fatalf("calls %v", got)
	}
}

func TestSlowQuiesceGivesACrashConsistentCheckpoint(t *testing.T) {
	r := &recorder{syncDelay: time.Second}
	res, err := Take(context.Background(), request(r, true))
	if err != nil || res.Consistency != Crash {
		t.Fatalf("Take: %+v %v, want a crash-consistent checkpoint", res, err)
	}
	if r.paused {
		t.Fatal("sandbox left paused")
	}
}

func TestSandboxIsResumedWhateverFails(t *testing.T) {
	for name, r := range map[string]*recorder{
		"snapshot fails": {snapErr: errors.New("disk full")},
		"pause fails":    {pauseErr: errors.New("runsc said no")},
	} {
		if _, err := Take(context.Background(), request(r, true)); err == nil {
			t.Errorf("%s: no error", name)
		}
		if r.paused {
			t.Errorf("%s: sandbox left paused (calls %v)", name, r.calls)
		}
	}
}

func TestStoppedSandboxIsNotPaused(t *testing.T) {
	r := &recorder{}
	res, err := Take(context.Background(), request(r, false))
	if err != nil || res.Consistency != Frozen || len(r.calls) != 1 || r.calls[0] != "snapshot" {
		t.Fatalf("stopped: %+v %v calls %v", res, err, r.calls)
	}
}
