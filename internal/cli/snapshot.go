package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

func newSnapshotCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Work with checkpoints account-wide",
		Long: `Snapshot commands name checkpoints across the whole account rather than
per sandbox, by any of: the account-wide id (the "global id" of "cairn
checkpoint info", the ID column of "cairn snapshot list"), a snapshot name
("cairn snapshot create --name", "cairn checkpoint create --name"), or
SANDBOX/ID. Named snapshots are never deleted automatically and survive the
deletion of their sandbox.`,
		Example: `  cairn snapshot create web --name before-upgrade
  cairn snapshot list
  cairn snapshot restore before-upgrade web-old
  cairn snapshot restore web/v2 web-v2
  cairn snapshot delete before-upgrade`,
		Args: groupArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(
		newSnapshotCreateCommand(g),
		newSnapshotListCommand(g),
		newSnapshotDeleteCommand(g),
		newSnapshotRestoreCommand(g),
	)
	return cmd
}

// snapshotCreateOptions are the arguments and flags of cairn snapshot
// create.
type snapshotCreateOptions struct {
	Name     string // the sandbox
	Snapshot string // --name; "" for the default NAME-YYYYMMDD-HHMMSS
}

func newSnapshotCreateCommand(g *globalOptions) *cobra.Command {
	var opts snapshotCreateOptions
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Save a named checkpoint of a sandbox",
		Long: `Save a checkpoint of sandbox NAME's disk and give it an account-wide name:
--name, or by default NAME-YYYYMMDD-HHMMSS (UTC). It is a manual checkpoint
of NAME like "cairn checkpoint create" takes (and gets the next v-number),
but never deleted automatically and kept when NAME is deleted. cairn prints
"Snapshot created: SNAPSHOT (NAME/ID)".

The file system is quiesced for the instant of the snapshot as for "cairn
checkpoint create"; if it does not quiesce in time the snapshot is
crash-consistent and cairn warns on stderr. Progress goes to stderr.
Ctrl-C stops following; the snapshot goes on in cairnd.

--json prints the checkpoint.`,
		Example: `  cairn snapshot create web
  cairn snapshot create web --name before-upgrade`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runSnapshotCreate(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().StringVar(&opts.Snapshot, "name", "", "account-wide name of the snapshot (default NAME-YYYYMMDD-HHMMSS)")
	return cmd
}

func runSnapshotCreate(ctx context.Context, opts snapshotCreateOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.CreateSnapshot(ctx, opts.Name, api.CreateCheckpointRequest{Name: opts.Snapshot})
	if err != nil {
		return err
	}
	events := g.events()
	ck, err := c.WaitCheckpoint(ctx, op, events.print)
	events.end()
	if err != nil {
		return followError(ctx, op, "cairn snapshot list", err)
	}
	if g.JSON {
		return g.printJSON(ck)
	}
	warnCrash(g, opts.Name, ck)
	g.printf("Snapshot created: %s (%s/%s)\n", ck.Name, opts.Name, ck.ID)
	return nil
}

func newSnapshotListCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List every checkpoint of the account",
		Long: `List every checkpoint of the account (named, manual and automatic),
those of deleted sandboxes included: ID (account-wide, accepted by the other
snapshot commands), NAME (of a named snapshot, or -), SANDBOX (the sandbox
it was taken of, "(deleted)" when that no longer exists), CHECKPOINT (its
id in that sandbox), TRIGGER (manual, interval, stop, restart, fork,
delete, restore), STATE, CONSISTENCY (frozen or crash), AGE, SIZE (what
deleting it frees) and OFF-SITE (pending, uploading, uploaded ×1, uploaded
×2 when both locations hold all of it, failed, or unstorable: not retried).

--json prints an array of checkpoint objects.`,
		Example: `  cairn snapshot list
  cairn snapshot list --json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSnapshotList(cmd.Context(), g)
		},
	}
}

// snapshotStateReady is the STATE of every listed checkpoint: cairnd only
// lists checkpoints whose snapshot is complete.
const snapshotStateReady = "ready"

func runSnapshotList(ctx context.Context, g *globalOptions) error {
	cks, err := g.client().Snapshots(ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		if cks == nil {
			cks = []api.Checkpoint{}
		}
		return g.printJSON(cks)
	}
	now := g.now()
	t := newTable(g.stdout, "ID", "NAME", "SANDBOX", "CHECKPOINT", "TRIGGER", "STATE", "CONSISTENCY", "AGE", "SIZE", "OFF-SITE", "STORED")
	for _, ck := range cks {
		sandbox := ck.Sandbox
		if ck.SandboxDeleted {
			sandbox += " (deleted)"
		}
		t.Row(ck.GlobalID, orDash(ck.Name), sandbox, ck.ID, ck.Trigger, snapshotStateReady, ck.Consistency,
			formatAge(now, ck.CreatedAt), formatSize(ck.SizeExclusive), orDash(ck.Offsite), orDash(ck.Stored))
	}
	return t.Flush()
}

// snapshotDeleteOptions are the arguments of cairn snapshot delete.
type snapshotDeleteOptions struct {
	Ref string // global id, snapshot name or SANDBOX/ID
}

func newSnapshotDeleteCommand(g *globalOptions) *cobra.Command {
	var opts snapshotDeleteOptions
	return &cobra.Command{
		Use:     "delete ID_OR_NAME",
		Aliases: []string{"rm"},
		Short:   "Delete a checkpoint named account-wide and free its space",
		Long: `Delete a checkpoint given by its account-wide id, snapshot name or
SANDBOX/ID; it may belong to a deleted sandbox. The space only it holds
(its SIZE in "cairn snapshot list") is freed at once, locally and
off-site. A sandbox's current checkpoint cannot be deleted.

--json prints the deleted checkpoint.`,
		Example: `  cairn snapshot delete before-upgrade
  cairn snapshot delete web/auto-20260301T120000Z`,
		Args: exactArgs("ID_OR_NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			return runSnapshotDelete(cmd.Context(), opts, g)
		},
	}
}

func runSnapshotDelete(ctx context.Context, opts snapshotDeleteOptions, g *globalOptions) error {
	ck, err := g.client().DeleteSnapshot(ctx, opts.Ref)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(ck)
	}
	g.printf("Snapshot %s deleted\n", opts.Ref)
	return nil
}

// snapshotRestoreOptions are the arguments of cairn snapshot restore.
type snapshotRestoreOptions struct {
	Ref         string // global id, snapshot name or SANDBOX/ID
	NewName     string
	DiskOnly    bool // restore only the disk of a memory checkpoint: boot, do not resume
	FromOffsite bool // rebuild the disk from the off-site repository
	Whole       bool // from off-site, fetch the whole disk before the start
}

func newSnapshotRestoreCommand(g *globalOptions) *cobra.Command {
	var opts snapshotRestoreOptions
	cmd := &cobra.Command{
		Use:   "restore ID_OR_NAME NEW_NAME",
		Short: "Restore a snapshot as a new sandbox",
		Long: `Make a new, independent sandbox NEW_NAME from a checkpoint and start it.
ID_OR_NAME is an account-wide checkpoint id, a snapshot name or SANDBOX/ID;
the checkpoint may belong to a sandbox that was deleted. Neither the
checkpoint nor its sandbox is touched. If the checkpoint holds memory, the
new sandbox resumes its processes where they were instead of booting.

` + diskOnlyHelp + `

` + fromOffsiteHelp + `

` + lazyHelp + `

cairn follows the operation until the sandbox runs, printing its progress
on stderr. Ctrl-C stops following; the restore goes on in cairnd.`,
		Example: `  cairn snapshot restore before-upgrade web-old
  cairn snapshot restore web/auto-20260301T120000Z web-noon
  cairn snapshot restore web/v3 web-v3 --disk-only
  cairn snapshot restore web/v3 web-v3 --from-offsite
  cairn snapshot restore web/v3 web-v3 --from-offsite --whole`,
		Args: exactArgs("ID_OR_NAME", "NEW_NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref, opts.NewName = args[0], args[1]
			return runSnapshotRestore(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().BoolVar(&opts.DiskOnly, "disk-only", false, diskOnlyUsage)
	cmd.Flags().BoolVar(&opts.FromOffsite, "from-offsite", false, fromOffsiteUsage)
	addWholeFlag(cmd.Flags(), &opts.Whole)
	return cmd
}

func runSnapshotRestore(ctx context.Context, opts snapshotRestoreOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.RestoreSnapshot(ctx, opts.Ref, api.SnapshotRestoreRequest{
		Name:        opts.NewName,
		DiskOnly:    opts.DiskOnly,
		FromOffsite: opts.FromOffsite,
		Whole:       opts.Whole,
	})
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
