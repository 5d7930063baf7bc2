package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0B"},
		{900, "900B"},
		{1023, "1023B"},
		{1024, "1KiB"},
		{1536, "1.5KiB"},
		{512 << 20, "512MiB"},
		{1536 << 20, "1.5GiB"},
		{2 << 30, "2GiB"},
		{1500000, "1.4MiB"},
		{1<<20 - 1, "1MiB"}, // 1023.999KiB rounds into the next unit
		{3 << 40, "3TiB"},
		{-2048, "-2KiB"},
	} {
		if got := formatSize(tc.n); got != tc.want {
			t.Errorf("formatSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestFormatAge(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{
		{0, "just now"},
		{-5 * time.Second, "just now"},
		{42 * time.Second, "42 sec ago"},
		{3*time.Minute + 20*time.Second, "3 min ago"},
		{time.Hour, "1 hour ago"},
		{5*time.Hour + 59*time.Minute, "5 hours ago"},
		{30 * time.Hour, "1 day ago"},
		{13 * 24 * time.Hour, "13 days ago"},
		{21 * 24 * time.Hour, "3 weeks ago"},
		{95 * 24 * time.Hour, "3 months ago"},
		{800 * 24 * time.Hour, "2 years ago"},
	} {
		if got := formatAge(now, now.Add(-tc.ago)); got != tc.want {
			t.Errorf("formatAge(now-%v) = %q, want %q", tc.ago, got, tc.want)
		}
	}
	if got := formatAge(now, time.Time{}); got != "-" {
		t.Errorf("formatAge(zero) = %q, want -", got)
	}
}

func TestTableAlignsAndSanitizes(t *testing.T) {
	var buf bytes.Buffer
	tb := newTable(&buf, "NAME", "STATE")
	tb.Row("web", "running")
	tb.Row("a\tb", "x\ny")
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "NAME   STATE\nweb    running\n" + `a\tb   x\ny` + "\n"
	if buf.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", buf.String(), want)
	}
}

func TestFormatInterval(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{60 * time.Second, "1 min"},
		{90 * time.Second, "90 s"},
		{5 * time.Minute, "5 min"},
		{15 * time.Minute, "15 min"},
		{time.Hour, "1 h"},
		{time.Hour + 30*time.Minute, "90 min"},
		{24 * time.Hour, "24 h"},
	} {
		if got := formatInterval(int64(tc.d / time.Second)); got != tc.want {
			t.Errorf("formatInterval(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := formatAutoCheckpoint(0); got != "" {
		t.Errorf("formatAutoCheckpoint(0) = %q, want empty", got)
	}
}

func TestFormatFill(t *testing.T) {
	if got := formatFill(api.Fill{Done: 512 << 20, Total: 2 << 30}); got != "512MiB of 2GiB (25%)" {
		t.Errorf("fill: %q", got)
	}
	if got := formatFill(api.Fill{Done: 0, Total: 1 << 30, Unavailable: true}); !strings.Contains(got, "0B of 1GiB (0%), waiting") {
		t.Errorf("fill with the locations down: %q", got)
	}
}
