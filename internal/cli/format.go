package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// formatSize renders bytes in binary units: "512MiB", "1.5GiB", "900B".
// Whole multiples print without decimals; others with one.
func formatSize(n int64) string {
	if n < 0 {
		return "-" + formatSize(-n)
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for i < len(units)-1 && n >= int64(1)<<(10*(i+1)) {
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10) + "B"
	}
	unit := int64(1) << (10 * i)
	if n%unit == 0 {
		return strconv.FormatInt(n/unit, 10) + units[i]
	}
	v := float64(n) / float64(unit)
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if s == "1024.0" && i < len(units)-1 {
		// Rounded up into the next unit (e.g. 1023.96KiB).
		return "1" + units[i+1]
	}
	return strings.TrimSuffix(s, ".0") + units[i]
}

// formatAge renders how long ago t was, as of now: "just now", "42 sec
// ago", "3 min ago", "5 hours ago", "2 days ago", "3 weeks ago", "4
// months ago", "2 years ago". The zero time is "-".
func formatAge(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	const day = 24 * time.Hour
	switch {
	case d < time.Second:
		return "just now" // also a little in the future: clock skew
	case d < time.Minute:
		return fmt.Sprintf("%d sec ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	case d < day:
		return plural(int(d/time.Hour), "hour") + " ago"
	case d < 14*day:
		return plural(int(d/day), "day") + " ago"
	case d < 60*day:
		return plural(int(d/(7*day)), "week") + " ago"
	case d < 730*day:
		return plural(int(d/(30*day)), "month") + " ago"
	default:
		return plural(int(d/(365*day)), "year") + " ago"
	}
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// formatTime renders a point in time in UTC with its age as of now:
// "2026-03-01 11:57:00 UTC (3 min ago)". The zero time is "-".
func formatTime(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", t.UTC().Format(time.DateTime+" UTC"), formatAge(now, t))
}

// formatCPUs renders a CPU limit; 0 means none.
func formatCPUs(cpus float64) string {
	if cpus == 0 {
		return "-"
	}
	return strconv.FormatFloat(cpus, 'f', -1, 64)
}

// formatMemory renders a memory limit; 0 means none.
func formatMemory(n int64) string {
	if n == 0 {
		return "-"
	}
	return formatSize(n)
}

// orDash returns s, or "-" if it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// table writes aligned columns. Call Row for each line, then Flush.
type table struct{ tw *tabwriter.Writer }

// newTable starts a table on w with the given header (nil: none).
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)}
	if len(header) > 0 {
		t.Row(header...)
	}
	return t
}

// Row adds one line. Every cell is escaped (safe): a tab, a newline or
// an escape sequence in a cell cannot break the layout or reach the
// terminal.
func (t *table) Row(cells ...string) {
	for i, c := range cells {
		cells[i] = safe(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// Flush writes the table out.
func (t *table) Flush() error { return t.tw.Flush() }

// formatInterval renders an interval of seconds in the largest unit that
// divides it: "90 s", "5 min", "1 h", "90 min" (1h30m).
func formatInterval(seconds int64) string {
	switch {
	case seconds != 0 && seconds%3600 == 0:
		return fmt.Sprintf("%d h", seconds/3600)
	case seconds != 0 && seconds%60 == 0:
		return fmt.Sprintf("%d min", seconds/60)
	}
	return fmt.Sprintf("%d s", seconds)
}

// formatAutoCheckpoint renders a sandbox's automatic checkpoint policy:
// "every 5 min when the disk changed"; "" when the interval is unknown
// (0, from a daemon that does not report it).
func formatAutoCheckpoint(seconds int64) string {
	if seconds <= 0 {
		return ""
	}
	return "every " + formatInterval(seconds) + " when the disk changed"
}

// formatLocationState renders one location's state of a checkpoint:
// "uploaded", "failed: connection refused".
func formatLocationState(l api.OffsiteLocation) string {
	if l.Error != "" {
		return l.State + ": " + l.Error
	}
	return l.State
}

// formatTransfer renders an upload's or a restore's progress: "120MiB of
// 1GiB (11%), 95MiB/s, 312 files".
func formatTransfer(now time.Time, p api.TransferProgress) string {
	s := formatSize(p.BytesDone)
	if p.BytesTotal > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", formatSize(p.BytesTotal), min(100, p.BytesDone*100/p.BytesTotal))
	}
	if p.BytesPerSec > 0 {
		s += ", " + formatSize(int64(p.BytesPerSec)) + "/s"
	}
	if p.BytesSent > 0 {
		s += ", " + formatSize(p.BytesSent) + " sent"
	}
	if !p.StartedAt.IsZero() {
		s += ", started " + formatAge(now, p.StartedAt)
	}
	return s
}
