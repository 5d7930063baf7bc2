package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// series is one measured thing: a label and its samples.
type series struct {
	name string
	ds   []time.Duration
}

// compare prints p50/p90 of the floor and of each cairn series, and the
// ratio and overhead of each cairn series against the floor (p50).
func compare(what string, floor series, cairn ...series) {
	fmt.Printf("%s\n", what)
	for _, s := range cairn {
		printSeries(s)
	}
	printSeries(floor)
	fp50, _ := percentiles(floor.ds)
	for _, s := range cairn {
		cp50, _ := percentiles(s.ds)
		prefix := "ratio cairn/floor (p50)"
		if len(cairn) > 1 {
			prefix = "ratio " + s.name + " / floor (p50)"
		}
		fmt.Printf("  %s: %.2f×, overhead %s\n", prefix, float64(cp50)/float64(fp50), round(cp50-fp50))
	}
}

func printSeries(s series) {
	p50, p90 := percentiles(s.ds)
	fmt.Printf("  %-62s p50 %8s  p90 %8s  (n=%d)\n", s.name, round(p50), round(p90), len(s.ds))
}

// report prints p50/p90 of both series and the ratio of the medians.
func report(what string, cairn []time.Duration, floorName string, floor []time.Duration) {
	compare(what, series{floorName, floor}, series{"cairn", cairn})
	fmt.Println()
}

// percentiles returns p50 and p90 of ds (the samples at ranks n/2 and
// 9n/10, counted from 0, of the sorted series).
func percentiles(ds []time.Duration) (p50, p90 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)*9/10]
}

func round(d time.Duration) time.Duration {
	if d >= 10*time.Second || d <= -10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}

// goal prints one goal line: met or missed, and what it compares.
func goal(met bool, format string, args ...any) {
	mark := "MISSED"
	if met {
		mark = "met"
	}
	fmt.Printf("  goal %-6s %s\n", mark+":", fmt.Sprintf(format, args...))
}

// ms formats milliseconds as a duration.
func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// mib formats a byte count in MiB or GiB.
func mib(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func trimOut(b []byte) string { return strings.TrimSpace(string(b)) }

// timeline collects an operation's events (Follow's callback) to split its
// duration into phases by the server's event times.
type timeline []api.Event

func (t *timeline) record(ev api.Event) { *t = append(*t, ev) }

// at returns the time of the first event whose text starts with prefix.
func (t timeline) at(prefix string) (time.Time, bool) {
	for _, ev := range t {
		if s, ok := ev.Data.(string); ok && strings.HasPrefix(s, prefix) {
			return ev.Time, true
		}
	}
	return time.Time{}, false
}

// phases is the per-iteration duration of each named phase of a
// measurement, in the order they happen.
type phases struct {
	names []string
	ds    map[string][]time.Duration
}

func (p *phases) add(name string, d time.Duration) {
	if p.ds == nil {
		p.ds = map[string][]time.Duration{}
	}
	if _, ok := p.ds[name]; !ok {
		p.names = append(p.names, name)
	}
	p.ds[name] = append(p.ds[name], d)
}

// merge adds the samples of q.
func (p *phases) merge(q phases) {
	for _, n := range q.names {
		for _, d := range q.ds[n] {
			p.add(n, d)
		}
	}
}

// print prints the p50 of every phase on one line. Medians of phases need
// not add up to the median of the whole.
func (p *phases) print(label string) {
	if len(p.names) == 0 {
		return
	}
	var parts []string
	for _, n := range p.names {
		p50, _ := percentiles(p.ds[n])
		parts = append(parts, fmt.Sprintf("%s %s", n, round(p50)))
	}
	fmt.Printf("  phases, %s (p50 each): %s\n", label, strings.Join(parts, " · "))
}
