package operation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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

func TestStructuredEvents(t *testing.T) {
	r := NewRegistry(context.Background(), time.Now)
	op := r.Start("test", "thing/x", func(ctx context.Context, op *Op) (any, error) {
		op.Progress("legacy")
		op.Step(api.PhaseFetch, "Fetching %s", "web/v1")
		op.Report(api.Progress{Phase: api.PhaseFetch, Done: 5, Total: 10, Unit: api.UnitBytes}, "Fetched %d of %d", 5, 10)
		op.Notef(api.PhaseFetch, "note")
		op.Record(api.Progress{Phase: api.PhaseSwap}, "Swapping")
		op.Record(api.Progress{Phase: api.PhaseSwap, Done: 1, Total: 1}, "Swapped")
		return nil, nil
	})
	evs := collect(t, op)
	type want struct {
		typ, data, phase string
		done             int64
	}
	wants := []want{
		{api.EventProgress, "legacy", "", 0},
		{api.EventProgress, "Fetching web/v1", api.PhaseFetch, 0},
		{api.EventProgress, "Fetched 5 of 10", api.PhaseFetch, 5},
		{api.EventInfo, "note", api.PhaseFetch, 0},
		{api.EventProgress, "Swapping", api.PhaseSwap, 0},
		{api.EventProgress, "Swapped", api.PhaseSwap, 1},
		{api.EventComplete, "", "", 0},
	}
	if len(evs) != len(wants) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(wants), evs)
	}
	for i, w := range wants {
		ev := evs[i]
		data, _ := ev.Data.(string)
		var phase string
		var done int64
		if ev.Progress != nil {
			phase, done = ev.Progress.Phase, ev.Progress.Done
		}
		if ev.Type != w.typ || data != w.data || phase != w.phase || done != w.done {
			t.Errorf("event %d: %+v (progress %+v), want %+v", i, ev, ev.Progress, w)
		}
		if w.phase == "" && ev.Progress != nil {
			t.Errorf("event %d: unstructured event carries %+v", i, ev.Progress)
		}
	}
	if b, _ := json.Marshal(evs[0]); strings.Contains(string(b), "progress\":") {
		t.Errorf("legacy event encodes a progress field: %s", b)
	}
}

// TestReportsCoalesce sends 10,000 reports: the event list stays small,
// a follower during and one after both see the last counts, and the
// live one never sees them go backwards or out of order.
func TestReportsCoalesce(t *testing.T) {
	const n = 10000
	r := NewRegistry(context.Background(), time.Now)
	started := make(chan struct{})
	op := r.Start("test", "thing/x", func(ctx context.Context, op *Op) (any, error) {
		<-started
		op.Step(api.PhaseFetch, "Fetching")
		locs := []api.LocationProgress{{Name: "a", State: api.LocationRunning}}
		for i := 1; i <= n; i++ {
			locs[0].Done = int64(i)
			op.Report(api.Progress{Phase: api.PhaseFetch, Done: int64(i), Total: n, Unit: api.UnitBytes, Locations: locs}, "Fetched %d", i)
		}
		locs[0].Done = 0 // the reporter reuses its slice
		op.Step(api.PhaseSwap, "Swapping")
		for i := 1; i <= n; i++ {
			op.Report(api.Progress{Phase: api.PhaseVerify, Done: int64(i), Total: n}, "Verified %d", i)
		}
		return nil, nil
	})
	live := make(chan []api.Event)
	go func() { live <- collect(t, op) }()
	time.Sleep(10 * time.Millisecond)
	close(started)
	evs := <-live
	late := collect(t, op)

	op.mu.Lock()
	stored := len(op.events)
	op.mu.Unlock()
	if stored != 5 { // step, report, step, report, complete
		t.Errorf("%d events stored after %d reports, want 5", stored, 2*n)
	}
	if len(late) != 5 || late[1].Progress.Done != n || late[1].Data != fmt.Sprintf("Fetched %d", n) || late[3].Progress.Done != n {
		t.Errorf("late follower: %+v", late)
	}
	if late[1].Progress.Locations[0].Done != n {
		t.Errorf("locations %+v: the reporter's slice was not copied", late[1].Progress.Locations)
	}
	// The live follower: phases in order, counts never go back, each
	// phase ends at its final count.
	order := []string{api.PhaseFetch, api.PhaseSwap, api.PhaseVerify}
	phase, last := 0, map[string]int64{}
	for _, ev := range evs[:len(evs)-1] {
		p := ev.Progress
		for phase < len(order) && order[phase] != p.Phase {
			phase++
		}
		if phase == len(order) {
			t.Fatalf("phase %q out of order in %+v", p.Phase, evs)
		}
		if p.Done < last[p.Phase] {
			t.Fatalf("%s went back from %d to %d", p.Phase, last[p.Phase], p.Done)
		}
		last[p.Phase] = p.Done
	}
	if last[api.PhaseFetch] != n || last[api.PhaseVerify] != n || evs[len(evs)-1].Type != api.EventComplete {
		t.Errorf("live follower ended at %v, last event %+v; want %d of each and complete", last, evs[len(evs)-1], n)
	}
	t.Logf("live follower got %d events of %d reports", len(evs), 2*n)
}

// TestFollowerGetsTheReplacementOfWhatItSaw: a follower has been given a
// report; the report is replaced and another event follows: the follower
// gets the replacement first.
func TestFollowerGetsTheReplacementOfWhatItSaw(t *testing.T) {
	r := NewRegistry(context.Background(), time.Now)
	reported, moved := make(chan struct{}), make(chan struct{})
	op := r.Start("test", "thing/x", func(ctx context.Context, op *Op) (any, error) {
		op.Report(api.Progress{Phase: api.PhaseFetch, Done: 1, Total: 2}, "1 of 2")
		<-reported
		op.Report(api.Progress{Phase: api.PhaseFetch, Done: 2, Total: 2}, "2 of 2")
		op.Step(api.PhaseSwap, "Swapping")
		close(moved)
		return nil, nil
	})
	var got []string
	err := op.Follow(context.Background(), func(ev api.Event) error {
		s, _ := ev.Data.(string)
		got = append(got, ev.Type+":"+s)
		if len(got) == 1 {
			close(reported)
			<-moved
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"progress:1 of 2", "progress:2 of 2", "progress:Swapping", "complete:"}
	if !slices.Equal(got, want) {
		t.Fatalf("follower got %q, want %q", got, want)
	}
}

// BenchmarkReport is the cost of a Report that replaces the previous one,
// with no follower.
func BenchmarkReport(b *testing.B) {
	r := NewRegistry(context.Background(), time.Now)
	release := make(chan struct{})
	op := r.Start("test", "x", func(ctx context.Context, op *Op) (any, error) { <-release; return nil, nil })
	defer close(release)
	p := api.Progress{Phase: api.PhaseFetch, Total: int64(b.N), Unit: api.UnitBytes}
	for i := 0; i < b.N; i++ {
		p.Done = int64(i)
		op.Report(p, "Fetched %d", i)
	}
}

// An operation of an earlier cairnd, which the registry never ran, answers
// from the archive: as it ended, with its one final event, its error
// carrying its code; an id the archive does not know is O01.
func TestArchiveAnswersForEarlierOperations(t *testing.T) {
	r := NewRegistry(context.Background(), time.Now)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	asked := 0
	r.SetArchive(func(id string) (api.Operation, bool) {
		asked++
		switch id {
		case "undone":
			return api.Operation{ID: id, Kind: "sandbox.fork", Status: api.OpFailure, UpdatedAt: at,
				Error: &api.ErrorInfo{Code: api.CodeInterrupted, Message: "interrupted by a cairnd restart; undone"}}, true
		case "done":
			return api.Operation{ID: id, Kind: "sandbox.create", Status: api.OpSuccess, UpdatedAt: at}, true
		}
		return api.Operation{}, false
	})
	op, err := r.Get("undone")
	if err != nil {
		t.Fatal(err)
	}
	if info := op.Info(); info.Status != api.OpFailure || info.Error.Code != api.CodeInterrupted {
		t.Errorf("undone: %+v", info)
	}
	evs := collect(t, op)
	if len(evs) != 1 || evs[0].Type != api.EventError || !evs[0].Time.Equal(at) {
		t.Errorf("undone: events %+v, want its error alone", evs)
	}
	if _, err := op.Wait(context.Background()); errdefs.CodeOf(err) != api.CodeInterrupted {
		t.Errorf("undone: Wait = %v, want an O02 error", err)
	}
	if again, _ := r.Get("undone"); again != op || asked != 1 {
		t.Errorf("a second Get asked the archive again (%d) or gave another op", asked)
	}
	op, err = r.Get("done")
	if err != nil {
		t.Fatal(err)
	}
	if evs := collect(t, op); op.Info().Status != api.OpSuccess || len(evs) != 1 || evs[0].Type != api.EventComplete {
		t.Errorf("done: %+v, events %+v", op.Info(), evs)
	}
	if _, err := r.Get("nothing"); errdefs.CodeOf(err) != api.CodeNoOperation {
		t.Errorf("unknown id: %v, want O01", err)
	}
}
