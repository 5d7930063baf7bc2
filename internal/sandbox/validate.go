package sandbox

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidateName checks a sandbox name: lower-case letters, digits and dashes,
// starting with a letter or digit, at most 63 characters.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return errdefs.New(api.CodeInvalidName,
			"invalid name %q: use 1-63 lower-case letters, digits and dashes, starting with a letter or digit", name)
	}
	return nil
}

// ParseSize parses a memory size: a number of bytes, or a number with a
// suffix K, M, G, T (powers of 1024; "Ki", "MiB", "GB"… are accepted too).
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(s)
	t := strings.ToUpper(in)
	t = strings.TrimSuffix(t, "B")
	t = strings.TrimSuffix(t, "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || v*float64(mult) > float64(1<<62) {
		return 0, errdefs.New(api.CodeInvalidArgument, "invalid size %q: use a positive number with an optional K, M, G or T suffix, e.g. 512M", in)
	}
	return int64(v * float64(mult)), nil
}

// minMemory is the smallest memory limit a sandbox may have: gVisor itself
// needs some.
const minMemory = 64 << 20

func validateLimits(cpus float64, memory int64, hostCPUs int) error {
	if cpus < 0 || cpus > float64(hostCPUs) {
		return errdefs.New(api.CodeInvalidArgument, "invalid --cpus %g: use a number between 0.01 and %d (this host's cores), or 0 for no limit", cpus, hostCPUs)
	}
	if cpus > 0 && cpus < 0.01 {
		return errdefs.New(api.CodeInvalidArgument, "invalid --cpus %g: at least 0.01", cpus)
	}
	if memory != 0 && memory < minMemory {
		return errdefs.New(api.CodeInvalidArgument, "invalid --memory %d bytes: at least 64M", memory)
	}
	return nil
}

// Bounds of the automatic checkpoint interval.
const (
	MinAutoCheckpoint = time.Minute
	MaxAutoCheckpoint = 24 * time.Hour
)

// parseInterval parses an automatic checkpoint interval ("15m", "1h",
// "90s"); "" is the default. Automatic checkpoints cannot be switched off.
func parseInterval(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < MinAutoCheckpoint || d > MaxAutoCheckpoint || d%time.Second != 0 {
		return 0, errdefs.New(api.CodeInvalidArgument,
			"invalid --auto-checkpoint %q: a whole number of seconds between 60s and 24h, e.g. 5m or 1h (automatic checkpoints cannot be switched off)", s)
	}
	return d, nil
}
