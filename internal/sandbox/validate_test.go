package sandbox

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"a", "web", "web-1", "0", "a-b-c", strings.Repeat("x", 63)} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", "A", "web_1", "a.b", "../x", "a/b", "a b", strings.Repeat("x", 64), "é"} {
		if err := ValidateName(bad); !errdefs.Is(err, api.CodeInvalidName) {
			t.Errorf("%q: got %v, want V01", bad, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	cases := map[string]int64{
		"1024": 1024, "512M": 512 << 20, "512m": 512 << 20, "2G": 2 << 30, "2GiB": 2 << 30,
		"1.5G": 3 << 29, "64Mi": 64 << 20, "10K": 10 << 10, "1T": 1 << 40, "2GB": 2 << 30,
	}
	for in, want := range cases {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1G", "0", "1X", "G", "1e30G", "NaN", "Inf", "9223372036854775808"} {
		if _, err := ParseSize(bad); !errdefs.Is(err, api.CodeInvalidArgument) {
			t.Errorf("ParseSize(%q): %v, want V02", bad, err)
		}
	}
}

// TestParseLimits: the limits of a create request are checked here, in
// cairnd, whatever the client checked: NaN, infinities, negative values,
// overflow and values beyond the host get V02 with the flag and range.
func TestParseLimits(t *testing.T) {
	const hostMem = 8 << 30
	for _, ok := range []struct {
		cpus   float64
		memory string
		want   int64
	}{{0, "", 0}, {1.5, "256M", 256 << 20}, {2, "8G", 8 << 30}, {0.01, "64M", 64 << 20}} {
		got, err := parseLimits(ok.cpus, ok.memory, 2, hostMem)
		if err != nil || got != ok.want {
			t.Errorf("parseLimits(%g, %q) = %d, %v; want %d", ok.cpus, ok.memory, got, err, ok.want)
		}
	}
	for _, c := range []struct {
		cpus   float64
		memory string
		msg    string
	}{
		{-1, "", "invalid --cpus -1: a number from 0.01 to 2, or 0 for no limit"},
		{3, "", "invalid --cpus 3:"},
		{0.001, "", "invalid --cpus 0.001:"},
		{math.NaN(), "", "invalid --cpus NaN:"},
		{math.Inf(1), "", "invalid --cpus +Inf:"},
		{0, "1M", `invalid --memory "1M": a size from 64MiB to 8GiB`},
		{0, "NaN", `invalid --memory "NaN": a size from 64MiB to 8GiB`},
		{0, "4611686018427387904", `invalid --memory "4611686018427387904"`},
		{0, "9G", `invalid --memory "9G"`},
		{0, "-1G", `invalid --memory "-1G"`},
		{0, "99999999999999999999999T", `invalid --memory "99999999999999999999999T"`},
	} {
		_, err := parseLimits(c.cpus, c.memory, 2, hostMem)
		if !errdefs.Is(err, api.CodeInvalidArgument) || !strings.HasPrefix(err.Error(), c.msg) {
			t.Errorf("limits %g %q: %v, want V02 %q", c.cpus, c.memory, err, c.msg)
		}
	}
	// Host RAM unknown: the API's bound holds.
	if _, err := parseLimits(0, "17T", 2, 0); !errdefs.Is(err, api.CodeInvalidArgument) {
		t.Errorf("17T with unknown host RAM: %v, want V02", err)
	}
	if hostMemory() < 64<<20 {
		t.Errorf("hostMemory() = %d: cannot read this host's RAM", hostMemory())
	}
}

func TestParseInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "5m": 5 * time.Minute, "60s": time.Minute, "24h": 24 * time.Hour} {
		if got, err := parseInterval(in); err != nil || got != want {
			t.Errorf("parseInterval(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"NaN", "Inf", "-5m", "10s", "25h", "90.5s", "9999999999999h", "5"} {
		_, err := parseInterval(bad)
		if !errdefs.Is(err, api.CodeInvalidArgument) || !strings.Contains(err.Error(), "invalid --auto-checkpoint") {
			t.Errorf("parseInterval(%q): %v, want V02", bad, err)
		}
	}
}

func TestParseDisk(t *testing.T) {
	const pool = 8 << 30
	for _, c := range []struct {
		in      string
		def     int64
		want    int64
		wantErr bool
	}{
		{"", 10 << 30, pool, false}, // the default is cut to the pool
		{"", 1 << 30, 1 << 30, false},
		{"", 0, 0, false},
		{"2G", 10 << 30, 2 << 30, false},
		{"8G", 0, pool, false},
		{"9G", 0, 0, true}, // larger than the pool
		{"1M", 0, 0, true}, // below the minimum
		{"NaN", 0, 0, true},
		{"-1G", 0, 0, true},
		{"99999999999999999999", 0, 0, true},
	} {
		got, err := parseDisk(c.in, c.def, pool)
		if (err != nil) != c.wantErr || (err == nil && got != c.want) {
			t.Errorf("parseDisk(%q, %d) = %d, %v; want %d, error %v", c.in, c.def, got, err, c.want, c.wantErr)
		}
	}
}
