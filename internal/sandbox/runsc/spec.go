package runsc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/cairn-sandbox/cairn/internal/container"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Spec and Mount are cairn's own (package container): the driver turns
// them into runsc's terms.
type (
	Spec  = container.Spec
	Mount = container.Mount
)

// capabilities of the sandbox's init: Docker's default set, enough for
// package managers, plus CAP_SYS_ADMIN, which cairn-init keeps for itself
// and drops from the bounding set of everything it starts. gVisor is the
// isolation boundary either way.
var capabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	"CAP_SYS_ADMIN",
}

func oci(s Spec) *specs.Spec {
	caps := &specs.LinuxCapabilities{
		Bounding: capabilities, Effective: capabilities, Permitted: capabilities,
	}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	if s.MemoryBytes > 0 {
		// Both tmpfs, each half the limit as Linux sizes tmpfs by default
		// (container.ShmSize): gVisor would mount /tmp itself, sized after
		// the host's memory.
		size := "size=" + strconv.FormatInt(container.ShmSize(s.MemoryBytes), 10)
		mounts = append(mounts, specs.Mount{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "nodev", "mode=1777", size}})
		if !s.RuntimeTmp {
			mounts = append(mounts, specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", size}})
		}
	}
	for _, m := range s.Mounts {
		opts := []string{"rbind"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		mounts = append(mounts, specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: opts})
	}
	res := &specs.LinuxResources{}
	if s.CPUs > 0 {
		period := uint64(100000)
		quota := int64(s.CPUs * float64(period))
		res.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	if s.MemoryBytes > 0 {
		// runsc tells the guest kernel the cgroup's limit as its total
		// memory, so the cgroup starts at the guest's limit; once the
		// sandbox runs, raiseMemoryLimit gives it the sentry's headroom.
		limit := s.MemoryBytes
		res.Memory = &specs.LinuxMemory{Limit: &limit}
	}
	proc := &specs.Process{
		User:         specs.User{UID: 0, GID: 0},
		Args:         s.Args,
		Env:          s.Env,
		Cwd:          "/",
		Capabilities: caps,
		Rlimits:      []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1 << 20, Soft: 1 << 20}},
	}
	if p := s.Process; p != nil {
		proc.User = specs.User{UID: p.UID, GID: p.GID, AdditionalGids: p.Groups}
		if p.Cwd != "" {
			proc.Cwd = p.Cwd
		}
		step := slices.DeleteFunc(slices.Clone(capabilities), func(c string) bool { return c == "CAP_SYS_ADMIN" })
		proc.Capabilities = &specs.LinuxCapabilities{Bounding: step, Effective: step, Permitted: step}
		if p.UID != 0 {
			// As for any other user's process: none in effect.
			proc.Capabilities.Effective, proc.Capabilities.Permitted = nil, nil
		}
	}
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: s.Hostname,
		Root:     &specs.Root{Path: s.Root},
		Process:  proc,
		Mounts:   mounts,
		Linux: &specs.Linux{
			Resources: res,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace, Path: s.NetNS}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
			},
		},
	}
}

// WriteBundle writes the OCI bundle (config.json) for s into s.BundleDir.
func WriteBundle(s Spec) error {
	if err := os.MkdirAll(s.BundleDir, 0o700); err != nil {
		return err
	}
	cfg, err := json.MarshalIndent(oci(s), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.BundleDir, "config.json"), cfg, 0o600)
}
