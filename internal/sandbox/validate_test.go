package sandbox

import (
	"strings"
	"testing"

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
	for _, bad := range []string{"", "lots", "-1G", "0", "1X", "G", "1e30G"} {
		if _, err := ParseSize(bad); !errdefs.Is(err, api.CodeInvalidArgument) {
			t.Errorf("ParseSize(%q): %v, want V02", bad, err)
		}
	}
}

func TestValidateLimits(t *testing.T) {
	if err := validateLimits(0, 0, 2); err != nil {
		t.Error(err)
	}
	if err := validateLimits(1.5, 256<<20, 2); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		cpus float64
		mem  int64
	}{{-1, 0}, {3, 0}, {0.001, 0}, {0, 1 << 20}} {
		if err := validateLimits(c.cpus, c.mem, 2); !errdefs.Is(err, api.CodeInvalidArgument) {
			t.Errorf("limits %+v: %v, want V02", c, err)
		}
	}
}
