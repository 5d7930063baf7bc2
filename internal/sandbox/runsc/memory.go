package runsc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cairn-sandbox/cairn/internal/container"
)

// The host cgroup of a sandbox. runsc makes one per sandbox at
// /<container id> in every controller (cgroup v1: /sys/fs/cgroup/memory/ID;
// v2: /sys/fs/cgroup/ID) with the spec's limits, and reads its memory
// limit to tell the guest kernel its total memory (runsc --total-memory).
// So the spec carries the guest's limit, and once the sandbox runs
// raiseMemoryLimit gives the cgroup the headroom the sentry needs above it
// (container.HostMemoryLimit).
//
// A restore loads the memory image before `runsc restore` returns, still
// under the guest's limit: a sandbox saved with its guest memory within
// the sentry's own few MB of its limit could be killed by the host while
// it loads (it then fails to restore, nothing else).

// cgroupRoot is where the host's cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// memoryCgroup returns the directory of container id's memory cgroup and
// whether it is cgroup v2's ("" if it has none).
func memoryCgroup(id string) (dir string, v2 bool) {
	if d := filepath.Join(cgroupRoot, "memory", id); isDir(d) {
		return d, false
	}
	if d := filepath.Join(cgroupRoot, id); isDir(d) {
		if _, err := os.Stat(filepath.Join(d, "memory.max")); err == nil {
			return d, true
		}
	}
	return "", false
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// raiseMemoryLimit sets the host cgroup of spec's sandbox to
// container.HostMemoryLimit of its memory limit.
func raiseMemoryLimit(spec Spec) error {
	host := container.HostMemoryLimit(spec.MemoryBytes)
	if host == 0 {
		return nil
	}
	dir, v2 := memoryCgroup(spec.ID)
	if dir == "" {
		return fmt.Errorf("no memory cgroup for %s to raise to %d bytes", spec.ID, host)
	}
	if v2 {
		// Past the usual limit the kernel throttles and reclaims
		// (memory.high) instead of killing, up to the cap (memguard.go).
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatInt(memoryCap(host), 10)), 0o644); err != nil {
			return fmt.Errorf("raise the memory cgroup limit: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "memory.high"), []byte(strconv.FormatInt(host, 10)), 0o644); err != nil {
			return fmt.Errorf("raise the memory cgroup limit: %w", err)
		}
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(host, 10)), 0o644); err != nil {
		return fmt.Errorf("raise the memory cgroup limit: %w", err)
	}
	return nil
}

// HostOOMKills returns how many processes the host's OOM killer killed in
// container id's memory cgroup (oom_kill of memory.oom_control in v1,
// memory.events in v2); an error if the cgroup or the counter is missing.
func HostOOMKills(id string) (int, error) {
	dir, v2 := memoryCgroup(id)
	if dir == "" {
		return 0, errors.New("no memory cgroup")
	}
	return oomKills(dir, v2)
}

// oomKills is the oom_kill counter of the memory cgroup dir.
func oomKills(dir string, v2 bool) (int, error) {
	file := "memory.oom_control"
	if v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("%s has no oom_kill counter", file)
}
