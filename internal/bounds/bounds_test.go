package bounds

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// wantV02 checks err is a V02 error naming field and holding each of has.
func wantV02(t *testing.T, what string, err error, field string, has ...string) {
	t.Helper()
	if !errdefs.Is(err, api.CodeInvalidArgument) {
		t.Errorf("%s: %v, want V02", what, err)
		return
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "invalid "+field+" ") {
		t.Errorf("%s: message %q does not name %s", what, msg, field)
	}
	for _, h := range has {
		if !strings.Contains(msg, h) {
			t.Errorf("%s: message %q lacks %q", what, msg, h)
		}
	}
}

func TestParseSize(t *testing.T) {
	const lo, hi = 1, math.MaxInt64
	for in, want := range map[string]int64{
		"1024": 1024, "512M": 512 << 20, "512m": 512 << 20, "2G": 2 << 30, "2GiB": 2 << 30,
		"1.5G": 3 << 29, "64Mi": 64 << 20, "10K": 10 << 10, "10kb": 10 << 10, "1T": 1 << 40, "2GB": 2 << 30,
		"1P": 1 << 50, "100B": 100, ".5K": 512, "1.": 1, "0.3K": 307, // a fraction of a byte is dropped
		"9223372036854775807": math.MaxInt64, // exact: no float in between
		"4611686018427387905": 1<<62 + 1,
		"8191P":               8191 << 50,
	} {
		got, err := ParseSize("--size", in, lo, hi)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{
		"", " 1G", "1G ", "lots", "-1G", "-0", "+1G", "0", "0.1", "1X", "G", "B", "iB", "5iB", "5i",
		"1e30G", "1e3", "0x10", "1_000", "NaN", "nan", "Inf", "+Inf", "-Inf", "infinity", "1..5G", "1.5.G",
		"9223372036854775808", "8192P", "99999999999999999999999999999G", "1\x00G",
	} {
		_, err := ParseSize("--size", bad, lo, hi)
		wantV02(t, "ParseSize("+bad+")", err, "--size", "a size from 1B to")
	}
	_, err := ParseSize("--memory", "4611686018427387904", 64<<20, 16<<40)
	wantV02(t, "4 EiB of memory", err, "--memory", `"4611686018427387904"`, "from 64MiB to 16TiB")
	_, err = ParseSize("--memory", "NaN", 64<<20, 16<<40)
	wantV02(t, "NaN memory", err, "--memory", `"NaN"`, "from 64MiB to 16TiB")
	_, err = ParseSize("--memory", "63M", 64<<20, 16<<40)
	wantV02(t, "too little memory", err, "--memory", `"63M"`)
}

func TestFloat(t *testing.T) {
	for _, ok := range []float64{0, 0.01, 1, 1.5, 2} {
		if err := Float("--cpus", ok, 0.01, 2, true); err != nil {
			t.Errorf("Float(%g): %v", ok, err)
		}
	}
	if err := Float("--cpus", 0, 0.01, 2, false); err == nil {
		t.Error("0 accepted without zeroOK")
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, -0.5, 0.001, 2.0001, math.MaxFloat64} {
		wantV02(t, "Float", Float("--cpus", bad, 0.01, 2, true), "--cpus", "a number from 0.01 to 2, or 0 for no limit")
	}
	for in, want := range map[string]float64{"1.5": 1.5, "2": 2, "0": 0, ".5": 0.5} {
		if got, err := ParseFloat("--cpus", in, 0.01, 2, true); err != nil || got != want {
			t.Errorf("ParseFloat(%q) = %g, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "NaN", "nan", "Inf", "-Inf", "+1", "-1", "1e0", "0x1p0", "1e400", "3", "1,5", " 1", "0.001"} {
		_, err := ParseFloat("--cpus", bad, 0.01, 2, true)
		wantV02(t, "ParseFloat("+bad+")", err, "--cpus", "from 0.01 to 2")
	}
}

func TestInt(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "64": 64, "007": 7} {
		if got, err := ParseInt("--count", in, 1, 64); err != nil || got != want {
			t.Errorf("ParseInt(%q) = %d, %v", in, got, err)
		}
	}
	if got, err := ParseInt("--n", "-5", -10, 10); err != nil || got != -5 {
		t.Errorf("ParseInt(-5) = %d, %v", got, err)
	}
	for _, bad := range []string{"", "-", "0", "65", "-1", "+1", "1.0", "1e1", "0x10", " 1", "NaN",
		"9223372036854775807", "9223372036854775808", "-9223372036854775809", "99999999999999999999999"} {
		_, err := ParseInt("--count", bad, 1, 64)
		wantV02(t, "ParseInt("+bad+")", err, "--count", "a whole number from 1 to 64")
	}
	wantV02(t, "Int", Int("tail_bytes", -1, 0, 1<<20), "tail_bytes", "-1", "from 0 to 1048576")
	wantV02(t, "Int", Int("--count", math.MinInt64, 1, 64), "--count")
	if err := Int("--count", 64, 1, 64); err != nil {
		t.Error(err)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"60s": time.Minute, "1m": time.Minute, "90s": 90 * time.Second, "1h30m": 90 * time.Minute, "24h": 24 * time.Hour} {
		if got, err := ParseDuration("--auto-checkpoint", in, time.Minute, 24*time.Hour, time.Second); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "NaN", "Inf", "5", "-5m", "59s", "24h0m1s", "60.5s", "9999999999999h", "1e3s", "0"} {
		_, err := ParseDuration("--auto-checkpoint", bad, time.Minute, 24*time.Hour, time.Second)
		wantV02(t, "ParseDuration("+bad+")", err, "--auto-checkpoint", "a whole number of seconds from 1m to 24h")
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{1: "1B", 1000: "1000B", 1024: "1KiB", 64 << 20: "64MiB", 16 << 40: "16TiB",
		math.MaxInt64: "7.9EiB", 3 << 29: "1.5GiB", 1<<20 + 1: "1.0MiB", 1 << 62: "4EiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
