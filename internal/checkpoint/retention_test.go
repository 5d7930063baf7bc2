package checkpoint

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// retNow is the injected "now" of the retention tests: 12:30 UTC, so that
// hour windows cut clock hours in the middle.
var retNow = time.Date(2026, 11, 29, 12, 30, 0, 0, time.UTC)

// aged is an automatic checkpoint created age before retNow, with the id
// cairn would give it.
func aged(age time.Duration) Candidate {
	t := retNow.Add(-age)
	return Candidate{ID: "auto-" + t.UTC().Format("20060102T150405Z"), CreatedAt: t}
}

func keep(c Candidate, reason string) Decision   { return Decision{ID: c.ID, Keep: true, Reason: reason} }
func remove(c Candidate, reason string) Decision { return Decision{ID: c.ID, Reason: reason} }

const (
	minute = time.Minute
	hour   = time.Hour
	day    = 24 * time.Hour
)

// fresh are three checkpoints a few minutes old: the newest three in every
// boundary case, so the candidate at the boundary is never one of them.
var fresh = []Candidate{aged(1 * minute), aged(2 * minute), aged(3 * minute)}

func withFresh(cs ...Candidate) []Candidate { return append(slices.Clone(fresh), cs...) }

func freshKept() []Decision {
	var ds []Decision
	for _, c := range fresh {
		ds = append(ds, keep(c, "newest 3"))
	}
	return ds
}

func TestRetain(t *testing.T) {
	var (
		// Boundaries of "last hour": the target shares its clock hour
		// (11:xx) with a newer sibling, so only the last-hour rule can keep it.
		sib45m = aged(45 * minute) // 11:45
		at59m  = aged(59 * minute) // 11:31
		at60m  = aged(60 * minute) // 11:30
		at61m  = aged(61 * minute) // 11:29
		// Boundaries of the hourly window: the target shares its UTC day
		// (11-28) with a newer sibling, so only the hourly rule can keep it.
		sib16h  = aged(16*hour + 30*minute) // 2026-11-28 20:00
		at23h59 = aged(23*hour + 59*minute) // 2026-11-28 12:31
		at24h   = aged(24 * hour)           // 2026-11-28 12:30
		at24h01 = aged(24*hour + 1*minute)  // 2026-11-28 12:29
		// Boundaries of the daily window: alone in its day.
		at13d23h = aged(13*day + 23*hour) // 2026-11-15 13:30
		at14d    = aged(14 * day)         // 2026-11-15 12:30
		at14d01h = aged(14*day + 1*hour)  // 2026-11-15 11:30
	)
	old := func(days int) Candidate { return aged(time.Duration(days) * day) }

	tests := []struct {
		name  string
		cands []Candidate
		want  []Decision
	}{
		{"empty", nil, []Decision{}},
		{
			"fewer than three are all kept, however old",
			[]Candidate{old(400), old(100)},
			[]Decision{keep(old(400), "newest 3"), keep(old(100), "newest 3")},
		},
		{
			"exactly the newest three are kept when all are 30 days old",
			[]Candidate{old(34), old(30), old(33), old(31), old(32)},
			[]Decision{
				remove(old(34), "older than 14 days"), keep(old(30), "newest 3"),
				remove(old(33), "older than 14 days"), keep(old(31), "newest 3"),
				keep(old(32), "newest 3"),
			},
		},
		{
			"59 min old: within the last hour",
			withFresh(sib45m, at59m),
			append(freshKept(), keep(sib45m, "within the last hour"), keep(at59m, "within the last hour")),
		},
		{
			"exactly 60 min old: not in the last hour",
			withFresh(sib45m, at60m),
			append(freshKept(), keep(sib45m, "within the last hour"), remove(at60m, "not the newest of its hour")),
		},
		{
			"61 min old: not in the last hour",
			withFresh(sib45m, at61m),
			append(freshKept(), keep(sib45m, "within the last hour"), remove(at61m, "not the newest of its hour")),
		},
		{
			"61 min old and alone in its hour: newest of the hour",
			withFresh(at61m),
			append(freshKept(), keep(at61m, "newest of hour 2026-11-29T11")),
		},
		{
			"23 h 59 old: newest of its (cut) hour",
			withFresh(sib16h, at23h59),
			append(freshKept(), keep(sib16h, "newest of hour 2026-11-28T20"), keep(at23h59, "newest of hour 2026-11-28T12")),
		},
		{
			"exactly 24 h old: outside the hourly window",
			withFresh(sib16h, at24h),
			append(freshKept(), keep(sib16h, "newest of hour 2026-11-28T20"), remove(at24h, "not the newest of its day")),
		},
		{
			"24 h 01 old: outside the hourly window",
			withFresh(sib16h, at24h01),
			append(freshKept(), keep(sib16h, "newest of hour 2026-11-28T20"), remove(at24h01, "not the newest of its day")),
		},
		{
			"24 h 01 old and alone in its day: newest of the day",
			withFresh(at24h01),
			append(freshKept(), keep(at24h01, "newest of day 2026-11-28")),
		},
		{
			"13 d 23 h old: newest of its day",
			withFresh(at13d23h),
			append(freshKept(), keep(at13d23h, "newest of day 2026-11-15")),
		},
		{
			"exactly 14 d old: removed",
			withFresh(at14d),
			append(freshKept(), remove(at14d, "older than 14 days")),
		},
		{
			"14 d 01 h old: removed",
			withFresh(at14d01h),
			append(freshKept(), remove(at14d01h, "older than 14 days")),
		},
		{
			"two in the same hour, more than an hour old: the newer is kept",
			withFresh(aged(3*hour+20*minute), aged(2*hour+40*minute)), // 09:10, 09:50
			append(freshKept(),
				remove(aged(3*hour+20*minute), "not the newest of its hour"),
				keep(aged(2*hour+40*minute), "newest of hour 2026-11-29T09")),
		},
		{
			"two in the same day beyond 24 h: the newer is kept",
			withFresh(aged(2*day+4*hour+30*minute), aged(day+19*hour+30*minute)), // 11-27 08:00, 17:00
			append(freshKept(),
				remove(aged(2*day+4*hour+30*minute), "not the newest of its day"),
				keep(aged(day+19*hour+30*minute), "newest of day 2026-11-27")),
		},
		{
			// The newest of day 11-28 (23:55) is also the newest of its hour
			// and lies within 24 h: it reports the hour, the earlier rule.
			// 11-28 08:00 is beyond 24 h and no longer the newest of its day.
			"calendar days: the newest of a day may be kept by the hourly rule",
			withFresh(aged(day+4*hour+30*minute), aged(12*hour+35*minute)), // 11-28 08:00, 23:55
			append(freshKept(),
				remove(aged(day+4*hour+30*minute), "not the newest of its day"),
				keep(aged(12*hour+35*minute), "newest of hour 2026-11-28T23")),
		},
		{
			// A checkpoint kept as one of the newest three is still the
			// newest of its hour: an older one of the same hour, beyond the
			// last hour, is removed.
			"the newest three claim their hour too",
			[]Candidate{aged(40 * minute), aged(35 * minute), aged(32 * minute), aged(70 * minute)}, // 11:50, 11:55, 11:58, 11:20
			[]Decision{
				keep(aged(40*minute), "newest 3"), keep(aged(35*minute), "newest 3"), keep(aged(32*minute), "newest 3"),
				remove(aged(70*minute), "not the newest of its hour"),
			},
		},
		{
			"reason order: newest 3 before last hour before hour before day",
			[]Candidate{aged(5 * minute), aged(6 * minute), aged(7 * minute), aged(8 * minute), aged(2 * hour), aged(2 * day)},
			[]Decision{
				keep(aged(5*minute), "newest 3"), keep(aged(6*minute), "newest 3"), keep(aged(7*minute), "newest 3"),
				keep(aged(8*minute), "within the last hour"),
				keep(aged(2*hour), "newest of hour 2026-11-29T10"),
				keep(aged(2*day), "newest of day 2026-11-27"),
			},
		},
		{
			// A checkpoint from the future takes no place among the newest
			// three: the three newest of the past are still kept.
			"from the future: kept, and not one of the newest three",
			[]Candidate{old(40), aged(-5 * minute), old(41), old(42), old(43)},
			[]Decision{
				keep(old(40), "newest 3"), keep(aged(-5*minute), "newer than now"),
				keep(old(41), "newest 3"), keep(old(42), "newest 3"), remove(old(43), "older than 14 days"),
			},
		},
		{
			// A checkpoint from the future claims no hour: the one of the
			// current hour is still the newest of it.
			"from the future: claims no hour",
			withFresh(aged(-5*minute), aged(55*minute), aged(65*minute)), // 12:35 (future), 11:35, 11:25
			append(freshKept(),
				keep(aged(-5*minute), "newer than now"),
				keep(aged(55*minute), "within the last hour"),
				remove(aged(65*minute), "not the newest of its hour")),
		},
		{
			"created exactly now: not from the future",
			[]Candidate{aged(0)},
			[]Decision{keep(aged(0), "newest 3")},
		},
		{
			// 2026-11-27 22:00 at UTC-5 is 2026-11-28 03:00 UTC: day 11-28.
			// It is not the newest of 11-28 (that is the 08:00 UTC one) and
			// its zone's day 11-27 is not a bucket of its own.
			"buckets are UTC whatever the location",
			withFresh(
				Candidate{ID: "east", CreatedAt: time.Date(2026, 11, 27, 22, 0, 0, 0, time.FixedZone("X", -5*3600))},
				aged(day+4*hour+30*minute), // 2026-11-28 08:00 UTC
			),
			append(freshKept(),
				Decision{ID: "east", Reason: "not the newest of its day"},
				keep(aged(day+4*hour+30*minute), "newest of day 2026-11-28")),
		},
		{
			// Equal times: the greater id counts as the newer.
			"ties broken by id",
			[]Candidate{
				{ID: "b", CreatedAt: retNow.Add(-30 * day)}, {ID: "d", CreatedAt: retNow.Add(-30 * day)},
				{ID: "a", CreatedAt: retNow.Add(-30 * day)}, {ID: "c", CreatedAt: retNow.Add(-30 * day)},
			},
			[]Decision{
				{ID: "b", Keep: true, Reason: "newest 3"}, {ID: "d", Keep: true, Reason: "newest 3"},
				{ID: "a", Reason: "older than 14 days"}, {ID: "c", Keep: true, Reason: "newest 3"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Retain(tt.cands, retNow)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Retain:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

// series is one automatic checkpoint every 5 minutes for 72 hours, the
// newest created exactly now (ages 0, 5 min, …, 71 h 55), newest first.
func series(now time.Time) []Candidate {
	var cs []Candidate
	for k := range 72 * 12 {
		t := now.Add(-time.Duration(k) * 5 * time.Minute)
		cs = append(cs, Candidate{ID: "auto-" + t.UTC().Format("20060102T150405Z"), CreatedAt: t})
	}
	return cs
}

func reasonCounts(ds []Decision) map[string]int {
	n := map[string]int{}
	for _, d := range ds {
		r := d.Reason
		switch {
		case strings.HasPrefix(r, "newest of hour "):
			r = "hourly"
		case strings.HasPrefix(r, "newest of day "):
			r = "daily"
		}
		n[r]++
	}
	return n
}

// TestRetainThreeDaysEveryFiveMinutes: 864 checkpoints, now = 2026-11-29
// 12:00 UTC, oldest 2026-11-26 12:05.
//
//   - newest 3: 12:00, 11:55, 11:50.
//   - last hour, age < 60 min: 11:05 … 12:00 is 12 checkpoints; 3 of them
//     already counted, so 9 more. (11:00 is exactly 60 min old: out.)
//   - hourly, age < 24 h, i.e. after 11-28 12:00: clock hours 11-28 12 …
//     11-29 12, 25 of them (11-28 12 counts 12:05 … 12:55 only). The
//     newest of 11-29 12 (12:00) and of 11-29 11 (11:55) are already kept,
//     so 23 more: 11-28 12 … 23 (12) and 11-29 00 … 10 (11), each at :55.
//   - daily, age < 14 d: days 11-26 … 11-29. 11-29 (12:00) and 11-28
//     (23:55) are already kept; 11-27 23:55 (age 36 h 05) and 11-26 23:55
//     (age 60 h 05) are 2 more.
//
// Kept 3 + 9 + 23 + 2 = 37; removed 864 - 37 = 827, all younger than 14
// days: 11-28 12:00 and newer ones not the newest of their hour (the
// 24 h window holds 288 checkpoints, 3 + 9 + 23 of them kept: 253), the
// older ones not the newest of their day (576 - 2 = 574).
func TestRetainThreeDaysEveryFiveMinutes(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cs := series(now)
	got := Retain(cs, now)

	want := map[string]int{
		"newest 3":                   3,
		"within the last hour":       9,
		"hourly":                     23,
		"daily":                      2,
		"not the newest of its hour": 253,
		"not the newest of its day":  574,
	}
	if n := reasonCounts(got); !maps.Equal(n, want) {
		t.Errorf("reasons: got %v, want %v", n, want)
	}
	kept := 0
	for _, d := range got {
		if d.Keep {
			kept++
		}
	}
	if kept != 37 {
		t.Errorf("kept %d, want 37", kept)
	}

	// The exact checkpoints kept by the hourly and daily rules.
	var wantKept []string
	for h := 12; h <= 23; h++ {
		wantKept = append(wantKept, fmt.Sprintf("auto-20261128T%02d5500Z newest of hour 2026-11-28T%02d", h, h))
	}
	for h := 0; h <= 10; h++ {
		wantKept = append(wantKept, fmt.Sprintf("auto-20261129T%02d5500Z newest of hour 2026-11-29T%02d", h, h))
	}
	wantKept = append(wantKept,
		"auto-20261127T235500Z newest of day 2026-11-27",
		"auto-20261126T235500Z newest of day 2026-11-26")
	var gotKept []string
	for _, d := range got {
		if d.Keep && d.Reason != "newest 3" && d.Reason != "within the last hour" {
			gotKept = append(gotKept, d.ID+" "+d.Reason)
		}
	}
	slices.Sort(gotKept)
	slices.Sort(wantKept)
	if !slices.Equal(gotKept, wantKept) {
		t.Errorf("kept by hour/day:\n got %v\nwant %v", gotKept, wantKept)
	}
}

// The decisions follow the input order, and each candidate gets the same
// decision however the input is ordered; repeated calls agree.
func TestRetainOrderAndDeterminism(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 17, 0, 0, time.UTC)
	sorted := series(now.Add(-2 * time.Minute))
	// Add one checkpoint on each of 17 older days (before the series) and
	// one from the future, so that every rule is exercised.
	for d := 4; d <= 20; d++ {
		sorted = append(sorted, Candidate{ID: fmt.Sprintf("old-%02d", d), CreatedAt: now.Add(-time.Duration(d)*day - 7*hour)})
	}
	sorted = append(sorted, Candidate{ID: "future", CreatedAt: now.Add(time.Minute)})
	ref := Retain(sorted, now)
	byID := map[string]Decision{}
	for _, d := range ref {
		byID[d.ID] = d
	}
	if len(byID) != len(sorted) {
		t.Fatalf("ids not unique: %d decisions for %d candidates", len(byID), len(sorted))
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		in := slices.Clone(sorted)
		if round == 0 {
			slices.Reverse(in) // oldest first
		} else {
			rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		}
		snapshot := slices.Clone(in)
		got := Retain(in, now)
		if !slices.Equal(in, snapshot) {
			t.Fatal("Retain modified its input")
		}
		if len(got) != len(in) {
			t.Fatalf("%d decisions for %d candidates", len(got), len(in))
		}
		for i, d := range got {
			if d.ID != in[i].ID {
				t.Fatalf("round %d: decision %d is for %s, candidate is %s", round, i, d.ID, in[i].ID)
			}
			if d != byID[d.ID] {
				t.Errorf("round %d: %s: got %+v, sorted input gave %+v", round, d.ID, d, byID[d.ID])
			}
		}
		if again := Retain(in, now); !slices.Equal(got, again) {
			t.Errorf("round %d: a second call differs", round)
		}
	}
	// The old days: each is alone in its day, kept while younger than 14 days.
	for d := 4; d <= 20; d++ {
		got := byID[fmt.Sprintf("old-%02d", d)]
		if want := d <= 13; got.Keep != want {
			t.Errorf("old-%02d: %+v, want keep=%v", d, got, want)
		}
	}
	if got := byID["future"]; got != (Decision{ID: "future", Keep: true, Reason: "newer than now"}) {
		t.Errorf("future: %+v", got)
	}
}

func TestExpiredAfterDelete(t *testing.T) {
	deleted := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		deletedAt time.Time
		now       time.Time
		want      bool
	}{
		{"just deleted", deleted, deleted, false},
		{"13 d 23 h after", deleted, deleted.Add(13*day + 23*hour), false},
		{"a nanosecond short of 14 d", deleted, deleted.Add(DeletedRetention - 1), false},
		{"exactly 14 d after", deleted, deleted.Add(DeletedRetention), true},
		{"14 d 01 h after", deleted, deleted.Add(14*day + hour), true},
		{"deleted in the future (clock skew)", deleted.Add(hour), deleted, false},
		{"not deleted (zero time)", time.Time{}, deleted, false},
		{"other location, same instant", deleted.In(time.FixedZone("X", 9*3600)), deleted.Add(DeletedRetention), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExpiredAfterDelete(tt.deletedAt, tt.now); got != tt.want {
				t.Errorf("ExpiredAfterDelete(%v, %v) = %v, want %v", tt.deletedAt, tt.now, got, tt.want)
			}
		})
	}
}
