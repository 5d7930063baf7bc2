package build

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
)

// Limits bound each RUN step of a build: its sandbox's memory (what its
// processes, their files in memory and gVisor's own use), its CPUs, and
// its wall time. A step past its time is ended with I11, one past its
// memory with I12.
type Limits struct {
	MemoryBytes int64
	CPUs        float64
	StepTimeout time.Duration
}

// ErrOutOfMemory is wrapped by a Runner's error when it ended the step's
// command for using more memory than RunSpec.MemoryBytes.
var ErrOutOfMemory = errors.New("out of memory")

// HostLimits returns the most a build may ask on this host, with hostMemory
// bytes of RAM (0: unknown): max's fields, each 0 meaning the host's RAM
// (memory), its cores (CPUs) or api.MaxStepTimeout; memory and CPUs never
// more than the host has, as for a sandbox.
func HostLimits(max Limits, hostMemory int64) Limits {
	hostMax := int64(api.MaxMemoryBytes)
	if hostMemory >= api.MinMemoryBytes {
		hostMax = hostMemory
	}
	if max.MemoryBytes <= 0 || max.MemoryBytes > hostMax {
		max.MemoryBytes = hostMax
	}
	if cores := float64(runtime.NumCPU()); max.CPUs <= 0 || max.CPUs > cores {
		max.CPUs = cores
	}
	if max.StepTimeout <= 0 {
		max.StepTimeout = api.MaxStepTimeout
	}
	return max
}

// ParseLimits reads a build request's bounds of its RUN steps (memory a
// size, "" the default; cpus 0 the default; timeout a duration, "" the
// default), each checked against max (HostLimits): V02 naming the flag
// and the range otherwise. The defaults are api.DefaultBuildMemoryBytes,
// every CPU max allows, and api.DefaultBuildStepTimeout, each at most
// max's.
func ParseLimits(memory string, cpus float64, timeout string, max Limits) (Limits, error) {
	l := Limits{
		MemoryBytes: min(api.DefaultBuildMemoryBytes, max.MemoryBytes),
		CPUs:        max.CPUs,
		StepTimeout: min(api.DefaultBuildStepTimeout, max.StepTimeout),
	}
	var err error
	if memory != "" {
		if l.MemoryBytes, err = bounds.ParseSize("--memory", memory, api.MinMemoryBytes, max.MemoryBytes); err != nil {
			return Limits{}, err
		}
	}
	if cpus != 0 {
		if err := bounds.Float("--cpus", cpus, api.MinCPUs, max.CPUs, false); err != nil {
			return Limits{}, err
		}
		l.CPUs = cpus
	}
	if timeout != "" {
		if l.StepTimeout, err = bounds.ParseDuration("--step-timeout", timeout, api.MinStepTimeout, max.StepTimeout, time.Second); err != nil {
			return Limits{}, err
		}
	}
	return l, nil
}

// withDefaults fills the fields of l that are not set: the defaults, and
// every CPU of the host.
func (l Limits) withDefaults() Limits {
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = api.DefaultBuildMemoryBytes
	}
	if l.CPUs <= 0 {
		l.CPUs = float64(runtime.NumCPU())
	}
	if l.StepTimeout <= 0 {
		l.StepTimeout = api.DefaultBuildStepTimeout
	}
	return l
}

// String says the limits as a build's output shows them.
func (l Limits) String() string {
	return fmt.Sprintf("at most %s of memory, %s CPUs and %s each", bounds.FormatSize(l.MemoryBytes),
		strconv.FormatFloat(l.CPUs, 'g', -1, 64), l.StepTimeout)
}
