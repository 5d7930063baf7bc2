package cli

import (
	"context"

	"github.com/spf13/cobra"
)

func newSnapshotCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Work with checkpoints account-wide",
		Long: `Snapshot commands name checkpoints across the whole account rather than
per sandbox, by any of: the account-wide id (the "global id" of "cairn
checkpoint info"), a snapshot name ("cairn checkpoint create --name"), or
SANDBOX/ID. Named snapshots are never deleted automatically and survive the
deletion of their sandbox.`,
		Example: `  cairn snapshot restore before-upgrade web-old
  cairn snapshot restore web/v2 web-v2`,
		Args: groupArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(newSnapshotRestoreCommand(g))
	return cmd
}

// snapshotRestoreOptions are the arguments of cairn snapshot restore.
type snapshotRestoreOptions struct {
	Ref     string // global id, snapshot name or SANDBOX/ID
	NewName string
}

func newSnapshotRestoreCommand(g *globalOptions) *cobra.Command {
	var opts snapshotRestoreOptions
	return &cobra.Command{
		Use:   "restore ID_OR_NAME NEW_NAME",
		Short: "Restore a snapshot as a new sandbox",
		Long: `Make a new, independent sandbox NEW_NAME from a checkpoint and start it.
ID_OR_NAME is an account-wide checkpoint id, a snapshot name or SANDBOX/ID;
the checkpoint may belong to a sandbox that was deleted. Neither the
checkpoint nor its sandbox is touched.

cairn follows the operation until the sandbox runs, printing its progress
on stderr. Ctrl-C stops following; the restore goes on in cairnd.`,
		Example: `  cairn snapshot restore before-upgrade web-old
  cairn snapshot restore web/auto-20260301T120000Z web-noon`,
		Args: exactArgs("ID_OR_NAME", "NEW_NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref, opts.NewName = args[0], args[1]
			return runSnapshotRestore(cmd.Context(), opts, g)
		},
	}
}

func runSnapshotRestore(ctx context.Context, opts snapshotRestoreOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.RestoreSnapshot(ctx, opts.Ref, opts.NewName)
	if err != nil {
		return err
	}
	sb, err := waitSandbox(ctx, c, op, opts.NewName, g)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(sb)
	}
	g.printf("Sandbox %s created from snapshot %s and running\n", opts.NewName, opts.Ref)
	return nil
}
