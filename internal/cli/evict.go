package cli

import (
	"context"

	"github.com/spf13/cobra"
)

func newCheckpointEvictCommand(g *globalOptions) *cobra.Command {
	var opts checkpointRef
	return &cobra.Command{
		Use:   "evict NAME ID",
		Short: "Drop a checkpoint's local copy; it restores from off-site",
		Long: `Drop the local copy of checkpoint ID of sandbox NAME, to free its space in
the pool. The checkpoint stays listed ("off-site only" under STORED) and a
restore, or a fork after one, reads it from off-site.

A memory checkpoint's memory image goes too: restored from off-site, its
processes resume from the image fetched there.

Refused unless both off-site locations hold it ("uploaded ×2": its disk
and, for a memory checkpoint, its memory image), and for a sandbox's
current checkpoint and the saved session a stopped sandbox resumes from.
cairnd drops local copies by itself too, by the account's local-tier
policy (default: each sandbox's newest 5 and everything of the last 24
hours stay), and oldest first when the pool runs low. --json prints the
checkpoint.`,
		Example: `  cairn checkpoint list web
  cairn checkpoint evict web v2`,
		Args: exactArgs("NAME", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.ID = args[0], args[1]
			return runCheckpointEvict(cmd.Context(), opts, g)
		},
	}
}

func runCheckpointEvict(ctx context.Context, opts checkpointRef, g *globalOptions) error {
	ck, err := g.client().EvictCheckpoint(ctx, opts.Name, opts.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(ck)
	}
	g.printf("Checkpoint %s of %s: local copy dropped, stored %s\n", ck.ID, opts.Name, ck.Stored)
	return nil
}
