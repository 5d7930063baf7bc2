package localtier

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
)

func ids(cks []metadata.Checkpoint) []string {
	var out []string
	for _, ck := range cks {
		out = append(out, ck.ID)
	}
	return out
}

func TestPlan(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	// Sandbox s: eight checkpoints a day apart, c0 oldest; all off-site ×2
	// but c3, which is not yet.
	var cks []metadata.Checkpoint
	for i := range 8 {
		cks = append(cks, metadata.Checkpoint{ID: fmt.Sprintf("c%d", i), SandboxID: "s", DiskPath: fmt.Sprintf("checkpoints/c%d", i),
			CreatedAt: now.Add(-time.Duration(8-i) * 24 * time.Hour).Add(time.Hour)})
	}
	both := func(ck metadata.Checkpoint) bool { return ck.ID != "c3" }
	sbs := []metadata.Sandbox{{ID: "s"}}

	evict, ifLow := Plan(Policy{}, Facts{Checkpoints: cks, Sandboxes: sbs, Both: both, Now: now})
	// Newest 5 are c3..c7 (c7 is 23 h old, inside 24 h too): c0, c1, c2 go.
	if got := ids(evict); !slices.Equal(got, []string{"c0", "c1", "c2"}) {
		t.Fatalf("evict %v, want c0 c1 c2", got)
	}
	// Kept by the policy but spare when the pool runs low: all but c3 (not
	// off-site ×2), oldest first.
	if got := ids(ifLow); !slices.Equal(got, []string{"c4", "c5", "c6", "c7"}) {
		t.Fatalf("ifLow %v, want c4..c7", got)
	}

	// A current checkpoint, the saved session a sandbox resumes from and
	// one already without a local copy never show; a memory checkpoint
	// goes as any other (its memory image is off-site too).
	cks[0].HasMemory, cks[0].MemoryPath = true, "memory/c0"
	cks[2].DiskPath = ""
	sbs = []metadata.Sandbox{{ID: "s", CurrentCheckpoint: "c1"}, {ID: "other", ResumeCheckpoint: "c4"}}
	evict, ifLow = Plan(Policy{KeepNewest: -1, KeepFor: -1}, Facts{Checkpoints: cks, Sandboxes: sbs, Both: both, Now: now})
	if got := ids(evict); !slices.Equal(got, []string{"c0", "c5", "c6", "c7"}) || len(ifLow) != 0 {
		t.Fatalf("evict %v ifLow %v, want c0 c5 c6 c7 and none", got, ids(ifLow))
	}

	// Only by age: keep 3 days.
	cks[0].HasMemory, cks[0].MemoryPath, cks[2].DiskPath = false, "", "checkpoints/c2"
	evict, _ = Plan(Policy{KeepNewest: -1, KeepFor: offsite.Duration(72 * time.Hour)}, Facts{Checkpoints: cks, Sandboxes: []metadata.Sandbox{{ID: "s"}}, Both: both, Now: now})
	if got := ids(evict); !slices.Equal(got, []string{"c0", "c1", "c2", "c4"}) {
		t.Fatalf("evict by age %v, want c0 c1 c2 c4", got)
	}
}

func TestRefuse(t *testing.T) {
	ck := metadata.Checkpoint{ID: "c", DiskPath: "checkpoints/c"}
	yes := func(metadata.Checkpoint) bool { return true }
	no := func(metadata.Checkpoint) bool { return false }
	for _, tc := range []struct {
		ck   metadata.Checkpoint
		sbs  []metadata.Sandbox
		both func(metadata.Checkpoint) bool
		want string
	}{
		{ck, nil, yes, ""},
		{ck, nil, no, NotOffsite},
		{ck, nil, nil, NotOffsite},
		{ck, []metadata.Sandbox{{CurrentCheckpoint: "c"}}, yes, Current},
		{ck, []metadata.Sandbox{{ResumeCheckpoint: "c"}}, yes, Resumes},
		{metadata.Checkpoint{ID: "c", DiskPath: "checkpoints/c", HasMemory: true, MemoryPath: "memory/c"}, nil, yes, ""},
		{metadata.Checkpoint{ID: "c", DiskPath: "checkpoints/c", HasMemory: true, MemoryPath: "memory/c"}, []metadata.Sandbox{{ResumeCheckpoint: "c"}}, yes, Resumes},
	} {
		if got := Refuse(tc.ck, tc.sbs, tc.both); got != tc.want {
			t.Errorf("Refuse(%+v, %+v) = %q, want %q", tc.ck, tc.sbs, got, tc.want)
		}
	}
}
