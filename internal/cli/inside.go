package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/cairn-sandbox/cairn/api"
)

// insideFlags are the flags of cairn create and cairn config that set what
// processes inside a sandbox may create through /.cairn/api.sock.
type insideFlags struct {
	memory, names bool
	rate, keep    int
}

// insideHelp explains the flags, for the commands' long help.
const insideHelp = `What processes inside the sandbox may create through /.cairn/api.sock
(cairn-env) is yours to set, never theirs: --inside-memory allows memory
checkpoints, --inside-names named snapshots (which are never deleted
automatically); --inside-rate is how many checkpoints they may make in
any minute (0: none; default 10; past it: error L06), --inside-keep how
many of those (unnamed) are kept (default 20; 0: all): beyond it the
oldest are deleted, as automatic ones are. "cairn checkpoint list" shows
them with the trigger "inside"; to keep one for good, use "cairn
checkpoint keep NAME ID".`

func (o *insideFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&o.memory, "inside-memory", false, "allow memory checkpoints from inside (--inside-memory=false forbids them)")
	f.BoolVar(&o.names, "inside-names", false, "allow named snapshots from inside (--inside-names=false forbids them)")
	boundedIntVar(f, &o.rate, "inside-rate", 0, 0, 60, "checkpoints from inside allowed per minute, 0 (none) to 60 (default 10)")
	boundedIntVar(f, &o.keep, "inside-keep", 0, 0, 1000, "checkpoints made from inside that are kept, 0 (all) to 1000 (default 20)")
}

// change returns the flags given on the command line as a change; nil
// when none was.
func (o *insideFlags) change(f *pflag.FlagSet) *api.InsideChange {
	var ch api.InsideChange
	set := false
	if f.Changed("inside-memory") {
		ch.Memory, set = &o.memory, true
	}
	if f.Changed("inside-names") {
		ch.Names, set = &o.names, true
	}
	if f.Changed("inside-rate") {
		ch.CheckpointsPerMinute, set = &o.rate, true
	}
	if f.Changed("inside-keep") {
		ch.CheckpointsKept, set = &o.keep, true
	}
	if !set {
		return nil
	}
	return &ch
}

// formatInside renders what processes inside may create, for cairn info:
// "disk checkpoints, 10 a minute, newest 20 kept; memory; names".
func formatInside(in api.InsideSettings) string {
	if in.CheckpointsPerMinute == 0 {
		return "no checkpoints"
	}
	s := fmt.Sprintf("checkpoints, %d a minute, ", in.CheckpointsPerMinute)
	if in.CheckpointsKept == 0 {
		s += "all kept"
	} else {
		s += fmt.Sprintf("newest %d kept", in.CheckpointsKept)
	}
	what := "disk only"
	if in.Memory {
		what = "memory allowed"
	}
	names := "no names"
	if in.Names {
		names = "names allowed"
	}
	return s + "; " + what + "; " + names
}
