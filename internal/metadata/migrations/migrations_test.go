package migrations

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// TestDialectsInStep checks that every dialect has the same numbered
// migrations with the same names: version N must mean the same change
// whichever engine holds the database.
func TestDialectsInStep(t *testing.T) {
	want, err := Load(Dialects[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Dialects[1:] {
		got, err := Load(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s has %d migrations, %s has %d", d, len(got), Dialects[0], len(want))
		}
		for i := range want {
			if got[i].Version != want[i].Version || got[i].Name != want[i].Name {
				t.Errorf("%s: migration %d is %04d_%s, %s has %04d_%s", d, i,
					got[i].Version, got[i].Name, Dialects[0], want[i].Version, want[i].Name)
			}
			if strings.TrimSpace(got[i].SQL) == "" {
				t.Errorf("%s: %04d_%s is empty", d, got[i].Version, got[i].Name)
			}
		}
	}
}

func TestLoadRejectsBadSets(t *testing.T) {
	sql := &fstest.MapFile{Data: []byte("SELECT 1;")}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"d/0001_a.sql": sql, "d/0003_c.sql": sql},
		"duplicate": {"d/0001_a.sql": sql, "d/0001_b.sql": sql},
		"not one":   {"d/0002_b.sql": sql},
		"bad name":  {"d/0001_a.sql": sql, "d/2_b.sql": sql},
		"other ext": {"d/0001_a.sql": sql, "d/README": sql},
		"empty":     {"d/.keep": &fstest.MapFile{}},
	} {
		if ms, err := load(fsys, "d"); err == nil {
			t.Errorf("%s: load = %v, want an error", name, ms)
		}
	}

	ms, err := load(fstest.MapFS{"d/0002_b.sql": sql, "d/0001_a.sql": sql}, "d")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "a" || ms[1].Version != 2 || ms[1].SQL != "SELECT 1;" {
		t.Errorf("load = %+v", ms)
	}
}

func TestPending(t *testing.T) {
	ms := []Migration{{Version: 1, Name: "a"}, {Version: 2, Name: "b"}, {Version: 3, Name: "c"}}
	for current, want := range map[int]int{0: 3, 1: 2, 3: 0} {
		got, err := Pending(ms, current)
		if err != nil || len(got) != want {
			t.Errorf("Pending(at %d) = %d migrations, %v; want %d", current, len(got), err, want)
		}
		if len(got) > 0 && got[0].Version != current+1 {
			t.Errorf("Pending(at %d) starts at %d", current, got[0].Version)
		}
	}
	_, err := Pending(ms, 4)
	if !errors.Is(err, metadata.ErrSchemaTooNew) {
		t.Fatalf("Pending(at 4) = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "version is 4") || !strings.Contains(err.Error(), "up to 3") {
		t.Errorf("error %q does not name both versions", err)
	}
}
