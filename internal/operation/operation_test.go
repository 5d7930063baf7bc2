package operation

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

func collect(t *testing.T, op *Op) []api.Event {
	t.Helper()
	var evs []api.Event
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := op.Follow(ctx, func(ev api.Event) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestFollowReplaysFromTheStartAndEndsWithComplete(t *testing.T) {
	r := NewRegistry(context.Background(), time.Now)
	release := make(chan struct{})
	op := r.Start("test", "thing/x", func(ctx context.Context, op *Op) (any, error) {
		op.Progress("step %d", 1)
		<-release
		op.Infof("step %d", 2)
		return "result", nil
	})
	early := make(chan []api.Event)
	go func() { early <- collect(t, op) }()
	time.Sleep(20 * time.Millisecond)
	close(release)
	for _, evs := range [][]api.Event{<-early, collect(t, op)} { // a follower during and one after
		if len(evs) != 3 || evs[0].Data != "step 1" || evs[1].Type != api.EventInfo || evs[2].Type != api.EventComplete || evs[2].Data != "result" {
			t.Fatalf("events %+v", evs)
		}
	}
	if info := op.Info(); info.Status != api.OpSuccess {
		t.Fatalf("status %s", info.Status)
	}
	got, err := r.Get(op.Info().ID)
	if err != nil || got != op {
		t.Fatalf("Get: %v", err)
	}
}

func TestFailedOperationCarriesTheErrorCode(t *testing.T) {
	r := NewRegistry(context.Background(), time.Now)
	op := r.Start("test", "thing/x", func(ctx context.Context, op *Op) (any, error) {
		return nil, errdefs.New(api.CodeRuntimeFailed, "runsc said no")
	})
	evs := collect(t, op)
	last := evs[len(evs)-1]
	info, ok := last.Data.(*api.ErrorInfo)
	if last.Type != api.EventError || !ok || info.Code != api.CodeRuntimeFailed {
		t.Fatalf("last event %+v", last)
	}
	if _, err := op.Wait(context.Background()); !errdefs.Is(err, api.CodeRuntimeFailed) {
		t.Fatalf("Wait: %v", err)
	}
	if op.Info().Status != api.OpFailure || op.Info().Error.Code != api.CodeRuntimeFailed {
		t.Fatalf("info %+v", op.Info())
	}
}

func TestUnknownOperation(t *testing.T) {
	r := NewRegistry(context.Background(), time.Now)
	if _, err := r.Get("nope"); !errdefs.Is(err, api.CodeNoOperation) {
		t.Fatalf("Get unknown: %v", err)
	}
}

func TestOldFinishedOperationsArePruned(t *testing.T) {
	r := NewRegistry(context.Background(), time.Now)
	var first *Op
	for i := 0; i < keep+10; i++ {
		op := r.Start("test", "x", func(context.Context, *Op) (any, error) { return nil, errors.New("x") })
		op.Wait(context.Background())
		if first == nil {
			first = op
		}
	}
	r.Start("test", "x", func(context.Context, *Op) (any, error) { return nil, nil }).Wait(context.Background())
	if n := len(r.List()); n > keep+1 {
		t.Fatalf("%d operations kept, want at most %d", n, keep+1)
	}
	if _, err := r.Get(first.Info().ID); err == nil {
		t.Fatal("the oldest finished operation was not pruned")
	}
}
