package offsite

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

type reported struct {
	p    api.Progress
	line string
}

// RestoreWithProgress reports phase fetch in bytes, never going back, and
// ends at all bytes written.
func TestRestoreWithProgressCountsBytes(t *testing.T) {
	f := newFixture(t)
	ck := f.checkpoint("c1", map[string][]byte{"big": randomBytes(t, 3<<20), "small": []byte("hello")})
	f.drain()
	var got []reported
	err := f.svc.RestoreWithProgress(context.Background(), f.row(ck.ID), filepath.Join(t.TempDir(), "out"),
		func(p api.Progress, line string) { got = append(got, reported{p, line}) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("no progress")
	}
	var done int64
	for _, r := range got {
		if r.p.Phase != api.PhaseFetch || r.p.Unit != api.UnitBytes || r.p.Done < done || !strings.HasPrefix(r.line, "Fetched ") {
			t.Fatalf("report %+v %q after %d bytes", r.p, r.line, done)
		}
		done = r.p.Done
	}
	last := got[len(got)-1]
	if want := int64(3<<20 + 5); last.p.Done != want || last.p.Total != want || last.p.Rate <= 0 {
		t.Errorf("last report %+v, want %d of %d bytes and a rate", last.p, want, want)
	}
	if last.line != "Fetched 3.0 MiB of 3.0 MiB ("+formatBytes(int64(last.p.Rate))+"/s)" {
		t.Errorf("last line %q", last.line)
	}
}

// VerifyWithProgress gives each location's state as it goes: a damaged
// pack in the second fails its verify, the repair brings it to done;
// Verify gives the lines it always gave.
func TestVerifyWithProgressReportsLocations(t *testing.T) {
	f := newFixture(t)
	f.checkpoint("c1", map[string][]byte{"a": randomBytes(t, 200<<10)})
	f.drain()
	a, b := f.cfg.Locations[0].Name, f.cfg.Locations[1].Name
	damage := func() {
		var packs []string
		filepath.WalkDir(filepath.Join(f.locationDir(1), "packs"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				packs = append(packs, p)
			}
			return nil
		})
		if len(packs) == 0 {
			t.Fatal("no pack in the second location")
		}
		if err := os.WriteFile(packs[0], []byte("damaged"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	damage()

	var got []reported
	locs, err := f.svc.VerifyWithProgress(context.Background(), "", false, func(p api.Progress, line string) { got = append(got, reported{p, line}) })
	if err != nil {
		t.Fatal(err)
	}
	if len(locs) != 2 || !locs[0].OK || !locs[1].OK || len(locs[1].Repaired) == 0 {
		t.Fatalf("reports %+v", locs)
	}
	type step struct{ phase, stateA, stateB string }
	var steps []step
	for _, r := range got {
		if len(r.p.Locations) != 2 || r.p.Locations[0].Name != a || r.p.Locations[1].Name != b || r.p.Unit != api.UnitObjects {
			t.Fatalf("report %+v %q", r.p, r.line)
		}
		steps = append(steps, step{r.p.Phase, r.p.Locations[0].State, r.p.Locations[1].State})
	}
	want := []step{
		{api.PhaseVerify, api.LocationRunning, api.LocationPending},
		{api.PhaseVerify, api.LocationDone, api.LocationPending},
		{api.PhaseVerify, api.LocationDone, api.LocationRunning},
		{api.PhaseVerify, api.LocationDone, api.LocationFailed},
		{api.PhaseRepair, api.LocationDone, api.LocationRunning},
		{api.PhaseRepair, api.LocationDone, api.LocationDone},
	}
	if !slices.Equal(steps, want) {
		t.Errorf("steps %+v\nwant %+v", steps, want)
	}
	last := got[len(got)-1].p
	if last.Locations[0].Done != int64(locs[0].Objects) || last.Locations[1].Done != int64(locs[1].Objects) ||
		last.Done != int64(locs[0].Objects+locs[1].Objects) || last.Done == 0 {
		t.Errorf("counts %+v for %+v", last, locs)
	}
	if e := got[3].p.Locations[1].Error; !strings.Contains(e, "problems") {
		t.Errorf("failed location's error %q", e)
	}

	// Verify, damaged again: the lines of before, no more.
	damage()
	var lines []string
	if _, err := f.svc.Verify(context.Background(), "", false, func(format string, args ...any) {
		lines = append(lines, fmt.Sprintf(format, args...))
	}); err != nil {
		t.Fatal(err)
	}
	wantLines := []string{"Verifying location " + a, "Verifying location " + b}
	if len(lines) != 3 || lines[0] != wantLines[0] || lines[1] != wantLines[1] || !strings.HasPrefix(lines[2], "Repairing location "+b+" from the other (") {
		t.Errorf("Verify lines %q", lines)
	}
}

// A location that cannot be read is unavailable, with the error.
func TestVerifyWithProgressUnavailableLocation(t *testing.T) {
	f := newFixture(t)
	f.checkpoint("c1", map[string][]byte{"a": []byte("hello")})
	f.drain()
	fix := f.breakLocation(1)
	defer fix()
	var last api.Progress
	locs, err := f.svc.VerifyWithProgress(context.Background(), "", true, func(p api.Progress, line string) { last = p })
	if err != nil {
		t.Fatal(err)
	}
	if len(locs) != 2 || locs[1].Error == "" {
		t.Fatalf("reports %+v", locs)
	}
	if l := last.Locations[1]; l.State != api.LocationUnavailable || l.Error != locs[1].Error {
		t.Errorf("second location %+v, want unavailable with %q", l, locs[1].Error)
	}
	if last.Locations[0].State != api.LocationDone {
		t.Errorf("first location %+v", last.Locations[0])
	}
}
