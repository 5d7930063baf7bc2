package api

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// The wire form of an event with progress, and of one without (which
// older cairnd sent and unstructured events still are).
func TestEventProgressWireForm(t *testing.T) {
	at := time.Date(2026, 11, 29, 9, 20, 1, 0, time.UTC)
	ev := Event{Type: EventProgress, Data: "Verifying location b", Time: at, Progress: &Progress{
		Phase: PhaseVerify, Done: 1204, Unit: UnitObjects,
		Locations: []LocationProgress{{Name: "a", State: LocationDone, Done: 1204}, {Name: "b", State: LocationUnavailable, Error: "refused"}},
	}}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"progress","data":"Verifying location b","time":"2026-11-29T09:20:01Z","progress":{"phase":"verify","done":1204,"unit":"objects",` +
		`"locations":[{"name":"a","state":"done","done":1204},{"name":"b","state":"unavailable","error":"refused"}]}}`
	if string(b) != want {
		t.Errorf("encoded\n%s\nwant\n%s", b, want)
	}
	var back Event
	if err := json.Unmarshal([]byte(`{"type":"info","data":"old","time":"2026-11-29T09:20:01Z"}`), &back); err != nil {
		t.Fatal(err)
	}
	if back.Progress != nil || back.Data != "old" {
		t.Errorf("an event without progress decodes as %+v", back)
	}
	if (Progress{Phase: PhaseStart}).Counted() || !(Progress{Phase: PhaseFetch, Total: 1}).Counted() ||
		!(Progress{Phase: PhaseVerify, Locations: []LocationProgress{{Name: "a"}}}).Counted() {
		t.Error("Counted")
	}
}

// Every phase is documented in docs/api.md's table of phases, and the
// table lists no other.
func TestPhasesAreDocumented(t *testing.T) {
	phases := []string{PhaseImage, PhaseCreate, PhaseCheckpoint, PhaseQuiesce, PhaseSnapshot, PhaseMemory,
		PhaseSafety, PhaseWait, PhaseStop, PhaseFetch, PhaseSwap, PhaseStart, PhaseResume, PhaseFork,
		PhaseDelete, PhaseRevoke, PhaseOffsite, PhaseVerify, PhaseRepair, PhaseEvacuate, PhaseDone}
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i := strings.Index(text, "| phase | what happens | counts |")
	if i < 0 {
		t.Fatal("docs/api.md has no table of phases")
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(text[i:], "\n")[2:] {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		documented[strings.Trim(strings.Split(line, "|")[1], " `")] = true
	}
	for _, p := range phases {
		if !documented[p] {
			t.Errorf("phase %q is not in docs/api.md", p)
		}
		delete(documented, p)
	}
	for p := range documented {
		t.Errorf("docs/api.md lists phase %q, which api does not define", p)
	}
}
