package api

import "time"

// Bounds of the numbers a request may carry. The CLI checks them before it
// sends a request and cairnd checks them again (it does not trust the
// client); a value outside them is refused with CodeInvalidArgument. cairnd
// may allow less than these on a given host (cpus: its cores; memory: its
// RAM).
const (
	MinCPUs = 0.01 // CreateSandboxRequest.CPUs, unless 0 (no limit)
	MaxCPUs = 1024

	MinMemoryBytes = 64 << 20 // gVisor itself needs some
	MaxMemoryBytes = 16 << 40

	MinDiskBytes = 64 << 20 // CreateSandboxRequest.Disk; at most the pool's size
	MaxDiskBytes = 1 << 50

	MinAutoCheckpoint = time.Minute // interval of automatic checkpoints
	MaxAutoCheckpoint = 24 * time.Hour

	MinTimeout = time.Second // a sandbox's --timeout
	MaxTimeout = 30 * 24 * time.Hour

	MaxForkCount = 64 // copies one fork request may make (ForkRequest.Count)

	// A build's RUN steps (BuildImageRequest): memory and CPUs as a
	// sandbox's (but never unlimited), and a time limit per step. cairnd
	// may allow less (its --build-max-memory, --build-max-cpus,
	// --build-max-step-timeout; memory and CPUs at most the host's).
	DefaultBuildMemoryBytes = 2 << 30          // when the build names none
	DefaultBuildStepTimeout = 30 * time.Minute // when the build names none
	MinStepTimeout          = time.Second
	MaxStepTimeout          = 24 * time.Hour
)
