package sandbox

import (
	"math"
	"regexp"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
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

// ParseSize parses a size: a number of bytes, or a number with a suffix
// K, M, G, T, P (powers of 1024; "Ki", "MiB", "GB"… are accepted too), as
// bounds.ParseSize reads it, of at least one byte.
func ParseSize(s string) (int64, error) {
	return bounds.ParseSize("size", s, 1, math.MaxInt64)
}

// parseLimits checks a create request's CPU limit and parses its memory
// limit ("" or a size), for a host with hostCPUs cores and hostMemory
// bytes of RAM (0: unknown). 0 means no limit for both.
func parseLimits(cpus float64, memory string, hostCPUs int, hostMemory int64) (int64, error) {
	if err := bounds.Float("--cpus", cpus, api.MinCPUs, min(api.MaxCPUs, float64(hostCPUs)), true); err != nil {
		return 0, err
	}
	if memory == "" {
		return 0, nil
	}
	maxMemory := int64(api.MaxMemoryBytes)
	if hostMemory >= api.MinMemoryBytes {
		maxMemory = min(maxMemory, hostMemory)
	}
	return bounds.ParseSize("--memory", memory, api.MinMemoryBytes, maxMemory)
}

// parseDisk parses a create request's disk size ("" is the default size)
// for a pool of poolSize bytes: no sandbox's disk is larger than the pool.
func parseDisk(s string, def, poolSize int64) (int64, error) {
	if s == "" {
		if poolSize > 0 && def > poolSize {
			return poolSize, nil
		}
		return def, nil
	}
	maxDisk := int64(api.MaxDiskBytes)
	if poolSize >= api.MinDiskBytes {
		maxDisk = min(maxDisk, poolSize)
	}
	return bounds.ParseSize("--disk", s, api.MinDiskBytes, maxDisk)
}

// hostMemory is the RAM of this host, the most a sandbox may be given; 0
// when it cannot be read.
func hostMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// parseInterval parses an automatic checkpoint interval ("15m", "1h",
// "90s"); "" is the default. Automatic checkpoints cannot be switched off.
func parseInterval(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return bounds.ParseDuration("--auto-checkpoint", s, api.MinAutoCheckpoint, api.MaxAutoCheckpoint, time.Second)
}
