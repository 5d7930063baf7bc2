// Package container says, in cairn's own words, what cairn asks of a
// container runtime for one sandbox: the spec of its container (root,
// init, binds) with the sandbox's own options (resources, network mode),
// and the container's status. The runtime driver (package runsc) turns it
// into its runtime's terms; the sandbox manager's Runtime interface speaks
// it, so another runtime or a test double needs nothing of runsc.
package container

import "errors"

// Spec says how to run one sandbox's container.
type Spec struct {
	ID       string   // container id (see sandbox/container.go for how it is named)
	Hostname string   // the sandbox's name
	Root     string   // root file system: the sandbox's writable subvolume
	Args     []string // init's argv: cairn-init
	Env      []string
	Mounts   []Mount
	Options  // the sandbox's own settings
	// NetNS is the network namespace (a bound file) the container joins
	// in mode NetworkSandbox; "": a new one of its own.
	NetNS string
	// BundleDir is where the runtime may write its files for this
	// container (an OCI bundle, a pid file).
	BundleDir string
	LogPath   string // file that receives init's stdout and stderr
	// Stdin is what init reads on its standard input, a pipe that ends
	// after it: cairn-init's key for this boot. nil: /dev/null. (A
	// resumed container keeps the standard input it had.)
	Stdin []byte
	// Process, when set, makes the container's one process a command of
	// its own instead of a sandbox's init: a build step's.
	Process *Process
}

// Process is how a container's own command runs (Spec.Process): as whom,
// where, with Docker's default capabilities (not CAP_SYS_ADMIN, which only
// cairn-init keeps).
type Process struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups
	Cwd      string   // absolute, inside the root; "": /
}

// Options are the settings a sandbox carries into every container it runs
// in: after a restart, a restore and in each fork.
type Options struct {
	CPUs        float64 // 0: no limit
	MemoryBytes int64   // 0: no limit beyond the host's
	Network     Network // "" is NetworkNone
	// RuntimeTmp leaves /tmp to the runtime (gVisor mounts a tmpfs there
	// sized after the host's memory) instead of a tmpfs of ShmSize: only to
	// resume a memory image saved by a container started that way (before
	// cairn sized /tmp), whose mounts a resume must match.
	RuntimeTmp bool
}

// Network is a sandbox's network mode.
type Network string

// Network modes.
const (
	// NetworkNone: a loopback interface only.
	NetworkNone Network = "none"
	// NetworkSandbox: the runtime's own network stack inside the sandbox,
	// on the interfaces of the network namespace Spec.NetNS (package
	// network makes one per container).
	NetworkSandbox Network = "sandbox"
)

// Valid reports whether n is a known mode ("" counts as NetworkNone).
func (n Network) Valid() bool { return n == "" || n == NetworkNone || n == NetworkSandbox }

// Mount binds a host path into the sandbox.
type Mount struct {
	Source      string
	Destination string
	ReadOnly    bool
}

// Status is a container's state.
type Status string

// Container states.
const (
	Created Status = "created"
	Running Status = "running"
	Paused  Status = "paused"
	Stopped Status = "stopped"
)

// ErrNotExist is wrapped by a runtime's errors about a container it does
// not know.
var ErrNotExist = errors.New("container does not exist")

// Memory limits. A sandbox's memory limit (Options.MemoryBytes) is what
// its guest kernel is told it has (MemTotal inside) and what cairn-init's
// OOM killer holds the guest's processes to. The host cgroup that holds
// the sandbox's processes (the gVisor sentry and gofer) gets more: the
// sentry's own memory (≈ 15 MB of RSS and ≈ 8 MB of page cache measured
// idle, flat up to 500 MiB of guest memory), what the guest can allocate
// while the OOM killer reacts (it looks every 10 ms near the limit; at the
// 0.5-2 GB/s a guest fills memory here, 5-40 MB), and guest memory that
// was freed but that the sentry returns to the host lazily (≈ 1 s
// measured). So the headroom is 64 MiB plus an eighth of the limit: past
// it, the host kills the whole sandbox, which then counts as crashed.

// HostMemoryLimit returns the limit of the host cgroup of a sandbox whose
// memory limit is guest bytes (0: none, and none on the host either).
func HostMemoryLimit(guest int64) int64 {
	if guest <= 0 {
		return 0
	}
	return guest + MemoryHeadroom(guest)
}

// MemoryHeadroom is what the host cgroup allows above a guest limit of
// guest bytes (see above).
func MemoryHeadroom(guest int64) int64 { return 64<<20 + guest/8 }

// ShmSize is the size of /dev/shm and of /tmp (each a tmpfs) in a sandbox
// with memory limit guest: half of it, as Linux sizes tmpfs by default.
// gVisor would size them after the host's memory instead, and a guest
// could fill its whole limit with files no OOM kill frees.
func ShmSize(guest int64) int64 { return guest / 2 }
