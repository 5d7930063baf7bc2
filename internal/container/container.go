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
	// BundleDir is where the runtime may write its files for this
	// container (an OCI bundle, a pid file).
	BundleDir string
	LogPath   string // file that receives init's stdout and stderr
	// Stdin is what init reads on its standard input, a pipe that ends
	// after it: cairn-init's key for this boot. nil: /dev/null. (A
	// resumed container keeps the standard input it had.)
	Stdin []byte
}

// Options are the settings a sandbox carries into every container it runs
// in: after a restart, a restore and in each fork.
type Options struct {
	CPUs        float64 // 0: no limit
	MemoryBytes int64   // 0: no limit beyond the host's
	Network     Network // "" is NetworkNone
}

// Network is a sandbox's network mode.
type Network string

// Network modes.
const (
	// NetworkNone: a loopback interface only.
	NetworkNone Network = "none"
	// NetworkSandbox: the runtime's own network stack inside the sandbox,
	// in the network namespace the runtime is started in (the networking
	// issue makes one per sandbox).
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
