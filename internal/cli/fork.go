package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

// forkOptions are the arguments and flags of cairn fork.
type forkOptions struct {
	Name           string
	FromCheckpoint string
	Count          int
	NamePrefix     string
	Memory         bool // fork the running processes too
	DiskOnly       bool // of a memory checkpoint, fork only the disk: the copies boot
	Whole          bool // from off-site, fetch each copy's whole disk before it starts
}

func newForkCommand(g *globalOptions) *cobra.Command {
	var opts forkOptions
	cmd := &cobra.Command{
		Use:   "fork NAME",
		Short: "Make running copies of a sandbox",
		Long: `Make --count new, independent sandboxes from sandbox NAME and start them.

By default each copy starts from a new checkpoint of NAME's current state
(trigger "fork") and boots; --from-checkpoint starts them from an existing
one instead. The copies are named PREFIX-1 … PREFIX-N, PREFIX being
--name-prefix (default NAME-fork); "cairn list --parent NAME" shows them.
NAME itself is not touched. Progress goes to stderr; Ctrl-C stops
following, the fork goes on in cairnd.

--memory forks the live processes: a memory checkpoint of the running
sandbox is taken first (NAME is paused while its memory is written, then
runs on), and every copy continues its processes from that instant. With
--from-checkpoint of a memory checkpoint the copies continue its processes
anyway, unless --disk-only: then only its disk is forked and the copies
boot. What the processes held in memory (keys, tokens, random state
already drawn) is the same in every copy. Open TCP connections to the
outside do not survive in the copies.

A --from-checkpoint whose local copy is gone (off-site only) is restored
from off-site into each copy, lazily: the copies start at once and fetch
their files' data as they read it, each its own, the rest in the
background; --whole fetches each copy's disk whole first.

--json prints an array of the new sandboxes.`,
		Example: `  cairn fork web
  cairn fork web --count 3 --name-prefix trial
  cairn fork web --from-checkpoint v2
  cairn fork web --memory --count 3
  cairn fork web --from-checkpoint v3 --disk-only`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if opts.Memory && opts.DiskOnly {
				return usageErrorf("--memory forks the processes, --disk-only only the disk: give one of them")
			}
			return runFork(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.FromCheckpoint, "from-checkpoint", "", "start the copies from this checkpoint (default: a new checkpoint of the current state)")
	boundedIntVar(f, &opts.Count, "count", 1, 1, api.MaxForkCount, "how many copies to make, 1 to 64")
	f.StringVar(&opts.NamePrefix, "name-prefix", "", "name the copies PREFIX-1…PREFIX-N (default NAME-fork)")
	f.BoolVar(&opts.Memory, "memory", false, "fork the live processes too (a memory checkpoint of the running sandbox is taken first)")
	f.BoolVar(&opts.DiskOnly, "disk-only", false, diskOnlyUsage)
	f.BoolVar(&opts.Whole, "whole", false, wholeUsage)
	return cmd
}

func runFork(ctx context.Context, opts forkOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.Fork(ctx, opts.Name, api.ForkRequest{
		FromCheckpoint: opts.FromCheckpoint,
		Count:          opts.Count,
		NamePrefix:     opts.NamePrefix,
		Memory:         opts.Memory,
		DiskOnly:       opts.DiskOnly,
		Whole:          opts.Whole,
	})
	if err != nil {
		return err
	}
	events := g.events()
	children, err := c.WaitSandboxes(ctx, op, events.print)
	events.end()
	if err != nil {
		return followError(ctx, op, "cairn list --parent "+opts.Name, err)
	}
	if g.JSON {
		if children == nil {
			children = []api.Sandbox{}
		}
		return g.printJSON(children)
	}
	for _, sb := range children {
		g.printf("Forked %s → %s (id %s)\n", opts.Name, sb.Name, sb.ID)
	}
	return nil
}
