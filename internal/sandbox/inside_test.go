package sandbox

import (
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// What a process inside may ask for is what the policy allows: memory
// and names only when allowed, nothing at all at rate 0.
func TestCheckInsideRequest(t *testing.T) {
	def := metadata.DefaultInsidePolicy
	all := metadata.InsidePolicy{Memory: true, Names: true, PerMinute: 5}
	for _, c := range []struct {
		p    metadata.InsidePolicy
		req  api.CreateCheckpointRequest
		code string // "" allowed
	}{
		{def, api.CreateCheckpointRequest{Comment: "c", Label: "l"}, ""},
		{def, api.CreateCheckpointRequest{Name: "golden"}, api.CodeInvalidArgument},
		{def, api.CreateCheckpointRequest{Memory: true}, api.CodeInvalidArgument},
		{all, api.CreateCheckpointRequest{Name: "golden", Memory: true}, ""},
		{metadata.InsidePolicy{Names: true, PerMinute: 1}, api.CreateCheckpointRequest{Name: "golden", Memory: true}, api.CodeInvalidArgument},
		{metadata.InsidePolicy{Memory: true, Names: true}, api.CreateCheckpointRequest{}, api.CodeInsideQuota},
	} {
		err := checkInsideRequest("sb", c.p, c.req)
		if got := errdefs.CodeOf(err); (c.code == "" && err != nil) || (c.code != "" && got != c.code) {
			t.Errorf("policy %+v, request %+v: %v, want code %q", c.p, c.req, err, c.code)
		}
	}
}

// At most perMinute in any minute: the window slides.
func TestInsideRate(t *testing.T) {
	var r insideRate
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if !r.take("a", 3, t0.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("checkpoint %d of 3 refused", i)
		}
	}
	if r.take("a", 3, t0.Add(10*time.Second)) {
		t.Error("a fourth in the minute was allowed")
	}
	if !r.take("b", 3, t0.Add(10*time.Second)) {
		t.Error("another sandbox was refused")
	}
	if r.take("a", 3, t0.Add(59*time.Second)) {
		t.Error("allowed before the first left the window")
	}
	if !r.take("a", 3, t0.Add(60*time.Second)) {
		t.Error("refused once the first left the window")
	}
	if r.take("a", 0, t0.Add(time.Hour)) {
		t.Error("allowed at rate 0")
	}
}

func TestApplyInsideChange(t *testing.T) {
	yes, n, keep := true, 7, 0
	p, err := applyInsideChange(metadata.DefaultInsidePolicy, &api.InsideChange{Memory: &yes, CheckpointsPerMinute: &n, CheckpointsKept: &keep})
	if want := (metadata.InsidePolicy{Memory: true, PerMinute: 7, Keep: 0}); err != nil || p != want {
		t.Errorf("change = %+v, %v; want %+v", p, err, want)
	}
	if p, err := applyInsideChange(metadata.DefaultInsidePolicy, nil); err != nil || p != metadata.DefaultInsidePolicy {
		t.Errorf("no change = %+v, %v", p, err)
	}
	for _, v := range []int{-1, MaxInsidePerMinute + 1} {
		if _, err := applyInsideChange(metadata.DefaultInsidePolicy, &api.InsideChange{CheckpointsPerMinute: &v}); errdefs.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("rate %d: %v, want V02", v, err)
		}
	}
	for _, v := range []int{-1, MaxInsideKeep + 1} {
		if _, err := applyInsideChange(metadata.DefaultInsidePolicy, &api.InsideChange{CheckpointsKept: &v}); errdefs.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("keep %d: %v, want V02", v, err)
		}
	}
}
