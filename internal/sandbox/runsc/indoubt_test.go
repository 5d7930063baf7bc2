package runsc

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/container"
)

// cutShort makes transition t of container id as a cairnd killed between
// the control call and the state file's write leaves it: marker written,
// call sent, status not recorded.
func cutShort(t *testing.T, r *Runsc, id string, tr transition) {
	t.Helper()
	c, err := r.lockState(context.Background(), id, tr.verb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if _, err := r.markTransition(id, tr.to); err != nil {
		t.Fatal(err)
	}
	sockets := []string{c.Sandbox.ControlSocketPath, filepath.Join(r.stateRoot, "runsc-"+id+".sock")}
	if err := call(context.Background(), sockets, tr.method); err != nil {
		t.Fatal(err)
	}
}

// A pause or resume cut short is reported in doubt, whatever the state
// file says, and Settle makes the file tell the truth: then Resume and
// Pause work as ever (a resume by the stale file would never have come, or
// would have panicked the sentry).
func TestTransitionsCutShortAreInDoubtUntilSettled(t *testing.T) {
	r, id, counter := counterSandbox(t, "")
	ctx := context.Background()
	if _, in := r.InDoubt(id); in {
		t.Fatal("in doubt before anything happened")
	}

	// Paused, but the file says running.
	cutShort(t, r, id, pauseTransition)
	requireFrozen(t, counter)
	requireStatus(t, r, id, "running")
	if to, in := r.InDoubt(id); !in || to != container.Paused {
		t.Fatalf("after a cut-short pause: InDoubt = %q, %v", to, in)
	}
	if err := r.Resume(ctx, id); !errors.Is(err, ErrInDoubt) {
		t.Fatalf("Resume while in doubt: %v, want ErrInDoubt", err)
	}
	if err := r.Pause(ctx, id); !errors.Is(err, ErrInDoubt) {
		t.Fatalf("Pause while in doubt: %v, want ErrInDoubt", err)
	}
	requireFrozen(t, counter)
	if err := r.Settle(ctx, id, container.Paused); err != nil {
		t.Fatal(err)
	}
	requireStatus(t, r, id, "paused")
	if _, in := r.InDoubt(id); in {
		t.Fatal("still in doubt after Settle")
	}
	if err := r.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitAdvances(t, counter)

	// Running, but the file says paused.
	if err := r.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	cutShort(t, r, id, resumeTransition)
	waitAdvances(t, counter)
	requireStatus(t, r, id, "paused")
	if to, in := r.InDoubt(id); !in || to != container.Running {
		t.Fatalf("after a cut-short resume: InDoubt = %q, %v", to, in)
	}
	if err := r.Settle(ctx, id, container.Running); err != nil {
		t.Fatal(err)
	}
	requireStatus(t, r, id, "running")
	waitAdvances(t, counter)
	if err := r.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	requireFrozen(t, counter)
	if err := r.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitAdvances(t, counter)

	// Settle of what is not in doubt changes nothing; bad statuses are
	// refused; a finished change leaves no marker.
	if err := r.Settle(ctx, id, container.Paused); err != nil {
		t.Fatal(err)
	}
	requireStatus(t, r, id, "running")
	if err := r.Settle(ctx, id, container.Stopped); err == nil {
		t.Error("Settle to stopped accepted")
	}
	markers, _ := filepath.Glob(filepath.Join(r.stateRoot, "*"+transitionSuffix))
	if len(markers) > 0 {
		t.Errorf("markers left: %v", markers)
	}
}
