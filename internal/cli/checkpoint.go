package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cairn-sandbox/cairn/api"
)

func newCheckpointCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Save, list, inspect, delete and restore a sandbox's checkpoints",
		Long: `A checkpoint is a saved, immutable state of one sandbox's disk (its writable
layer). A memory checkpoint ("cairn checkpoint create --memory") holds its
running processes and their memory too: restoring it resumes them where
they were instead of booting, unless --disk-only. Manual checkpoints are numbered per sandbox: v0, v1, v2… (never
reused); automatic ones are named auto-<UTC time> and are listed only with
--include-auto. A checkpoint given a name with --name is also a snapshot:
it survives the deletion of its sandbox (see "cairn snapshot").

The current checkpoint is the one the sandbox's disk was last restored or
forked from; it cannot be deleted.

Checkpoints made from inside the sandbox (cairn-env checkpoint) show the
trigger "inside": beyond the sandbox's --inside-keep the oldest unnamed of
them are deleted. "cairn checkpoint keep" keeps one for good.`,
		Example: `  cairn checkpoint create web --comment "before the upgrade"
  cairn checkpoint create web --memory
  cairn checkpoint list web
  cairn checkpoint keep web v7
  cairn checkpoint evict web v2
  cairn checkpoint restore web v2 --wait`,
		Args: groupArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(
		newCheckpointCreateCommand(g),
		newCheckpointListCommand(g),
		newCheckpointInfoCommand(g),
		newCheckpointDeleteCommand(g),
		newCheckpointKeepCommand(g),
		newCheckpointEvictCommand(g),
		newRestoreCommand(g, "cairn checkpoint restore"),
	)
	return cmd
}

// checkpointCreateOptions are the arguments and flags of cairn checkpoint
// create.
type checkpointCreateOptions struct {
	Name     string // the sandbox
	Comment  string
	Label    string
	Snapshot string // --name: make it a named snapshot
	Memory   bool   // also save the processes and their memory
}

func newCheckpointCreateCommand(g *globalOptions) *cobra.Command {
	var opts checkpointCreateOptions
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Save a checkpoint of a sandbox's disk, and with --memory its processes",
		Long: `Save a checkpoint of sandbox NAME's disk and print its id ("Checkpoint
created: v3").

The file system is quiesced (synced, then the sandbox paused) for the
instant of the snapshot, and the sandbox resumes at once. If the quiesce
does not finish in time the checkpoint is taken anyway and marked "crash"
consistent (every flushed write is in it, as after a power cut); cairn then
warns on stderr. Progress goes to stderr. Ctrl-C stops following; the
checkpoint goes on in cairnd.

--comment and --label are free text shown by "cairn checkpoint list".
--name also makes it a named snapshot, unique in the account, kept when the
sandbox is deleted.

--memory also saves the running processes and their memory (the sandbox
must run): restoring, rolling back to or forking the checkpoint resumes
them where they were instead of booting. The sandbox is paused for as long
as writing its memory takes (it grows with the memory the processes use),
not only for the instant of the disk snapshot. Open TCP connections to the
outside do not survive a restore of it (the peer sees them broken); "cairn
exec" sessions attached while it is taken reconnect on their own, losing
and repeating no output.`,
		Example: `  cairn checkpoint create web
  cairn checkpoint create web --comment "before the upgrade" --label stable
  cairn checkpoint create web --name before-upgrade
  cairn checkpoint create web --memory --label "tests half done"`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runCheckpointCreate(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Comment, "comment", "", "a note saying what the checkpoint holds")
	f.StringVar(&opts.Label, "label", "", "a short tag, shown when there is no comment")
	f.StringVar(&opts.Snapshot, "name", "", "also make it a named snapshot with this account-wide name")
	f.BoolVar(&opts.Memory, "memory", false, "also save the running processes and their memory (pauses the sandbox while memory is written)")
	return cmd
}

func runCheckpointCreate(ctx context.Context, opts checkpointCreateOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.CreateCheckpoint(ctx, opts.Name, api.CreateCheckpointRequest{
		Comment: opts.Comment,
		Label:   opts.Label,
		Name:    opts.Snapshot,
		Memory:  opts.Memory,
	})
	if err != nil {
		return err
	}
	events := g.events()
	ck, err := c.WaitCheckpoint(ctx, op, events.print)
	events.end()
	if err != nil {
		return followError(ctx, op, "cairn checkpoint list "+opts.Name, err)
	}
	if g.JSON {
		return g.printJSON(ck)
	}
	warnCrash(g, opts.Name, ck)
	g.printf("Checkpoint created: %s\n", ck.ID)
	return nil
}

// warnCrash warns on stderr when a checkpoint just taken of sandbox name
// is only crash-consistent.
func warnCrash(g *globalOptions, name string, ck api.Checkpoint) {
	if ck.Consistency == "crash" {
		g.eprintf("warning: the file system of %s did not quiesce in time: %s is crash-consistent\n", name, ck.ID)
	}
}

// checkpointListOptions are the arguments and flags of cairn checkpoint
// list.
type checkpointListOptions struct {
	Name        string
	IncludeAuto bool
}

func newCheckpointListCommand(g *globalOptions) *cobra.Command {
	var opts checkpointListOptions
	cmd := &cobra.Command{
		Use:     "list NAME",
		Aliases: []string{"ls"},
		Short:   "List a sandbox's checkpoints",
		Long: `List the checkpoints of sandbox NAME, oldest first: id, age, trigger (why it
exists: manual, inside, interval, stop, restart, fork, delete, restore), consistency
(frozen or crash), size, total, whether it holds memory, its comment (or
[label]) and its off-site state. The current checkpoint, the state the disk
was last restored or forked from, is marked with "*". The trigger "inside"
marks a checkpoint made from inside the sandbox (cairn-env checkpoint):
beyond the sandbox's --inside-keep the oldest unnamed of those are deleted,
unless kept with "cairn checkpoint keep".

SIZE is what only this checkpoint holds: what deleting it frees. TOTAL is
all the data it refers to, shared data included. OFF-SITE is pending,
uploading, uploaded ×1 (one location holds all of it), uploaded ×2 (both
do: it is off-site), failed (retried) or unstorable (a reason no retry
changes, shown by checkpoint info; not retried).

Automatic checkpoints are left out unless --include-auto. --json prints an
array of checkpoint objects.`,
		Example: `  cairn checkpoint list web
  cairn checkpoint list web --include-auto --json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runCheckpointList(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().BoolVar(&opts.IncludeAuto, "include-auto", false, "also list automatic checkpoints")
	return cmd
}

func runCheckpointList(ctx context.Context, opts checkpointListOptions, g *globalOptions) error {
	cks, err := g.client().Checkpoints(ctx, opts.Name, opts.IncludeAuto)
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
	current, inside := false, false
	t := newTable(g.stdout, "ID", "CREATED", "TRIGGER", "CONSISTENCY", "SIZE", "TOTAL", "MEMORY", "COMMENT", "OFF-SITE", "STORED")
	for _, ck := range cks {
		id := ck.ID
		if ck.Current {
			id += "*"
			current = true
		}
		memory := "-"
		if ck.HasMemory {
			memory = "yes"
		}
		if ck.FromInside {
			inside = true
		}
		t.Row(id, formatAge(now, ck.CreatedAt), checkpointTrigger(ck), ck.Consistency,
			formatSize(ck.SizeExclusive), formatSize(ck.SizeTotal), memory, checkpointNote(ck), orDash(ck.Offsite), orDash(ck.Stored))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if current {
		g.printf("* current: the state the disk was last restored or forked from\n")
	}
	if inside {
		g.printf("inside: made from inside the sandbox; beyond its --inside-keep the oldest unnamed are deleted (keep one: cairn checkpoint keep %s ID)\n", opts.Name)
	}
	return nil
}

// checkpointTrigger is what the TRIGGER column shows: "inside" for a
// checkpoint made from inside the sandbox (its trigger is manual), else
// its trigger.
func checkpointTrigger(ck api.Checkpoint) string {
	if ck.FromInside {
		return "inside"
	}
	return ck.Trigger
}

// checkpointNote is what the COMMENT column shows: the comment, else the
// label in brackets, else "-".
func checkpointNote(ck api.Checkpoint) string {
	switch {
	case ck.Comment != "":
		return ck.Comment
	case ck.Label != "":
		return "[" + ck.Label + "]"
	}
	return "-"
}

// checkpointRef names one checkpoint of a sandbox: the arguments of cairn
// checkpoint info and delete.
type checkpointRef struct {
	Name string // the sandbox
	ID   string // v3, auto-…
}

func newCheckpointInfoCommand(g *globalOptions) *cobra.Command {
	var opts checkpointRef
	return &cobra.Command{
		Use:     "info NAME ID",
		Aliases: []string{"get"},
		Short:   "Show a checkpoint's details",
		Long: `Show what cairnd knows about checkpoint ID of sandbox NAME: its ids (per
sandbox and account-wide), snapshot name, creation time, trigger,
consistency, comment, label, whether it holds memory, its size (what
deleting it frees), its total (all the data it refers to), its off-site
state, whether it is the current checkpoint and whether it was made from
inside the sandbox (then it may be deleted beyond the sandbox's
--inside-keep, unless kept with "cairn checkpoint keep").`,
		Example: `  cairn checkpoint info web v2
  cairn checkpoint get web auto-20260301T120000Z --json`,
		Args: exactArgs("NAME", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.ID = args[0], args[1]
			return runCheckpointInfo(cmd.Context(), opts, g)
		},
	}
}

func runCheckpointInfo(ctx context.Context, opts checkpointRef, g *globalOptions) error {
	ck, err := g.client().Checkpoint(ctx, opts.Name, opts.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(ck)
	}
	current := "no"
	if ck.Current {
		current = "yes (the disk was last restored or forked from it; it cannot be deleted)"
	}
	t := newTable(g.stdout)
	t.Row("id", ck.ID)
	t.Row("global id", ck.GlobalID)
	t.Row("sandbox", ck.Sandbox)
	t.Row("name", orDash(ck.Name))
	t.Row("image", orDash(ck.Image))
	t.Row("created", formatTime(g.now(), ck.CreatedAt))
	t.Row("trigger", ck.Trigger)
	t.Row("consistency", ck.Consistency)
	t.Row("comment", orDash(ck.Comment))
	t.Row("label", orDash(ck.Label))
	t.Row("memory", yesNo(ck.HasMemory))
	t.Row("size", formatSize(ck.SizeExclusive)+" (freed by deleting it)")
	t.Row("total", formatSize(ck.SizeTotal))
	t.Row("off-site", orDash(ck.Offsite))
	t.Row("stored", orDash(ck.Stored))
	if d := ck.OffsiteDetail; d != nil {
		for _, l := range d.Locations {
			t.Row("  "+l.Name, formatLocationState(l))
		}
		if p := d.Progress; p != nil {
			t.Row("  progress", formatTransfer(g.now(), *p))
		}
		if d.Error != "" {
			t.Row("  error", d.Error)
		}
	}
	t.Row("current", current)
	t.Row("from inside", fromInside(ck))
	return t.Flush()
}

// fromInside is what checkpoint info says of where ck was asked for.
func fromInside(ck api.Checkpoint) string {
	switch {
	case !ck.FromInside:
		return "no"
	case ck.Name != "":
		return "yes (named: never deleted for --inside-keep)"
	}
	return fmt.Sprintf("yes (may be deleted beyond the sandbox's --inside-keep; cairn checkpoint keep %s %s keeps it)", ck.Sandbox, ck.ID)
}

func newCheckpointKeepCommand(g *globalOptions) *cobra.Command {
	var opts checkpointRef
	return &cobra.Command{
		Use:   "keep NAME ID",
		Short: "Keep a checkpoint made from inside the sandbox for good",
		Long: `Keep checkpoint ID of sandbox NAME, made from inside it (cairn-env
checkpoint; trigger "inside" in "cairn checkpoint list"), for good: it no
longer counts toward the sandbox's --inside-keep and is never deleted for
it. From then on it is a manual checkpoint like those taken with "cairn
checkpoint create", deleted only by "cairn checkpoint delete" or with its
sandbox. Keeping a checkpoint not made from inside changes nothing.
--json prints the checkpoint.`,
		Example: `  cairn checkpoint list web
  cairn checkpoint keep web v7`,
		Args: exactArgs("NAME", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.ID = args[0], args[1]
			return runCheckpointKeep(cmd.Context(), opts, g)
		},
	}
}

func runCheckpointKeep(ctx context.Context, opts checkpointRef, g *globalOptions) error {
	ck, err := g.client().KeepCheckpoint(ctx, opts.Name, opts.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(ck)
	}
	if ck.Trigger != api.TriggerManual {
		g.printf("Checkpoint %s of %s is automatic (%s), not made from inside: nothing changed\n", ck.ID, opts.Name, ck.Trigger)
		return nil
	}
	g.printf("Checkpoint %s of %s kept: it is not deleted for the sandbox's --inside-keep\n", ck.ID, opts.Name)
	return nil
}

func newCheckpointDeleteCommand(g *globalOptions) *cobra.Command {
	var opts checkpointRef
	return &cobra.Command{
		Use:     "delete NAME ID",
		Aliases: []string{"rm"},
		Short:   "Delete a checkpoint and free its space",
		Long: `Delete checkpoint ID of sandbox NAME. The space only it holds (its SIZE in
"cairn checkpoint list") is freed at once, locally and off-site. The
current checkpoint cannot be deleted.`,
		Example: `  cairn checkpoint delete web v2`,
		Args:    exactArgs("NAME", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.ID = args[0], args[1]
			return runCheckpointDelete(cmd.Context(), opts, g)
		},
	}
}

func runCheckpointDelete(ctx context.Context, opts checkpointRef, g *globalOptions) error {
	if err := g.client().DeleteCheckpoint(ctx, opts.Name, opts.ID); err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(map[string]string{"sandbox": opts.Name, "deleted": opts.ID})
	}
	g.printf("Checkpoint %s of %s deleted\n", opts.ID, opts.Name)
	return nil
}

// diskOnlyUsage and diskOnlyHelp describe --disk-only in every command
// that restores or forks a checkpoint.
const (
	diskOnlyUsage = "restore only the disk of a memory checkpoint: the sandbox boots instead of resuming"
	diskOnlyHelp  = `--disk-only restores only the disk of a memory checkpoint: the sandbox boots
(services start anew) instead of resuming its processes. Use it when the
memory image is missing or damaged (error K04).`
)

// restoreOptions are the arguments and flags of cairn checkpoint restore,
// cairn restore and cairn rollback.
type restoreOptions struct {
	Name               string // the sandbox
	ID                 string // its checkpoint
	As                 string // restore into a new sandbox of this name
	NoSafetyCheckpoint bool
	Wait               bool   // follow an in-place restore to its end
	DiskOnly           bool   // restore only the disk of a memory checkpoint: boot, do not resume
	FromOffsite        bool   // rebuild the disk from the off-site repository
	Whole              bool   // from off-site, fetch the whole disk before the start
	Latest             bool   // the newest checkpoint (with --on, the newest off-site)
	On                 string // restore on this host: the sandbox's own is down
}

// newRestoreCommand returns "restore NAME ID"; path is how it is called
// ("cairn restore", "cairn checkpoint restore"), for the examples.
func newRestoreCommand(g *globalOptions, path string) *cobra.Command {
	var opts restoreOptions
	cmd := &cobra.Command{
		Use:   "restore NAME [ID | --latest]",
		Short: "Restore a checkpoint, in place or as a new sandbox",
		Long: `Restore checkpoint ID of sandbox NAME (--latest: its newest checkpoint).

In place (without --as), NAME goes back to the checkpoint and keeps its
name and id: running sessions end and the sandbox comes back, booted with
its services started or, if the checkpoint holds memory, with its
processes resumed where they were; "cairn exec" waits meanwhile. First a
checkpoint of the current state is taken (trigger "restore", with memory
if the sandbox runs) so the restore can be undone; --no-safety-checkpoint
skips it. The restore runs in cairnd: cairn prints its operation and
returns at once, or with --wait follows it to the end ("cairn rollback"
does that too).

With --as NEW_NAME, a new, independent sandbox is made from the checkpoint
and started (resuming its processes if it holds memory), and cairn follows
it until it runs; NAME and the checkpoint are not touched.

` + diskOnlyHelp + `

` + fromOffsiteHelp + `

` + lazyHelp + `

With --on HOST, a sandbox whose host is down (cairn host list) is restored
on HOST under its name and id, from a checkpoint's off-site copy: with
--latest the newest checkpoint that has one, with its processes if it
holds memory and the sandbox ran. The checkpoints that only the lost
host's pool holds are listed as lost. cairn follows it to the end. When the
lost host comes back it stops its stale copy. "cairn host evacuate" does
this for every sandbox of a host. See docs/several-hosts.md.

--json prints the operation, or the restored sandbox with --wait or --as
(with --on, what was restored and what was lost).`,
		Example: fmt.Sprintf(`  %[1]s web v2
  %[1]s web --latest --wait
  %[1]s web --latest --on c
  %[1]s web v2 --wait
  %[1]s web auto-20260301T120000Z --as web-before
  %[1]s web v3 --disk-only
  %[1]s web v2 --as web-copy --from-offsite
  %[1]s web v2 --as web-copy --from-offsite --whole`, path),
		Args: optionalArgs([]string{"NAME"}, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			switch {
			case len(args) == 1 && !opts.Latest:
				return usageErrorf("%q needs ID, or --latest", cmd.CommandPath())
			case len(args) == 2 && opts.Latest:
				return usageErrorf("give ID or --latest, not both")
			case len(args) == 2:
				opts.ID = args[1]
			default:
				opts.ID = catalogLatest
			}
			if opts.As != "" && opts.NoSafetyCheckpoint {
				return usageErrorf("--no-safety-checkpoint is for a restore in place; --as leaves %s untouched", opts.Name)
			}
			if opts.On != "" && opts.As != "" {
				return usageErrorf("--on keeps the sandbox's name: it does not go with --as (a restore as a new sandbox runs on the host that gets it)")
			}
			if opts.On != "" {
				if opts.DiskOnly || opts.FromOffsite || opts.NoSafetyCheckpoint || opts.Wait {
					return usageErrorf("--on takes none of --disk-only, --from-offsite, --no-safety-checkpoint and --wait: it reads off-site, resumes a memory checkpoint's processes, has no current state to checkpoint and always waits")
				}
				return runRestoreOn(cmd.Context(), opts, g)
			}
			return runRestore(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Latest, "latest", false, "restore the newest checkpoint (with --on: the newest that has an off-site copy)")
	f.StringVar(&opts.On, "on", "", "restore the sandbox, whose host is down, on this host from off-site, keeping its name and id")
	f.StringVar(&opts.As, "as", "", "restore into a new sandbox of this name instead of in place")
	f.BoolVar(&opts.NoSafetyCheckpoint, "no-safety-checkpoint", false, "do not checkpoint the current state first (the restore cannot be undone)")
	f.BoolVar(&opts.Wait, "wait", false, "follow an in-place restore until the sandbox is back")
	f.BoolVar(&opts.DiskOnly, "disk-only", false, diskOnlyUsage)
	f.BoolVar(&opts.FromOffsite, "from-offsite", false, fromOffsiteUsage)
	addWholeFlag(f, &opts.Whole)
	return cmd
}

// fromOffsiteHelp and fromOffsiteUsage explain --from-offsite.
const (
	fromOffsiteHelp = `--from-offsite rebuilds the checkpoint's disk, and a memory checkpoint's
memory image, from the account's off-site repository, verifying every
chunk, instead of reading the local copy; a restore does that by itself
when the local copy is gone. A memory checkpoint's processes resume from
the fetched image as from a local one (with --disk-only, only the disk is
fetched and the sandbox boots).`
	fromOffsiteUsage = "rebuild the disk (and memory image) from the off-site copy instead of the local one"
	lazyHelp         = `A disk that comes from off-site is restored lazily: the sandbox starts at
once, its files' data is fetched (and verified) as it is read, the rest in
the background, first the files it read first at its last boot; "cairn
info" shows how far the fill is, and checkpoints taken meanwhile wait for
it. --whole fetches the whole disk before the sandbox starts. See
docs/lazy-restore.md.`
	wholeUsage = "from off-site: fetch the whole disk before the sandbox starts (default: start at once, fetch as read)"
)

// addWholeFlag adds --whole, and --lazy, hidden: the default it names
// (accepted for scripts written when it was not).
func addWholeFlag(f *pflag.FlagSet, whole *bool) {
	f.BoolVar(whole, "whole", false, wholeUsage)
	var lazy bool
	f.BoolVar(&lazy, "lazy", false, "restore lazily from off-site (the default)")
	_ = f.MarkHidden("lazy")
}

// newRollbackCommand returns cairn rollback: restore in place and wait
// (its options are restoreOptions with Wait set).
func newRollbackCommand(g *globalOptions) *cobra.Command {
	var opts restoreOptions
	cmd := &cobra.Command{
		Use:   "rollback NAME ID",
		Short: "Restore a sandbox in place to a checkpoint and wait",
		Long: `Put sandbox NAME back to its checkpoint ID, in place (same name and id),
with its memory if the checkpoint holds it, and wait until it is back:
"cairn restore NAME ID --wait".

First a checkpoint of the current state is taken (trigger "restore") so
the rollback can be undone (with memory if the sandbox runs);
--no-safety-checkpoint skips it. Progress goes to stderr. Ctrl-C stops
following; the rollback goes on in cairnd.

` + diskOnlyHelp,
		Example: `  cairn rollback web v2
  cairn rollback web v2 --no-safety-checkpoint
  cairn rollback web v3 --disk-only`,
		Args: exactArgs("NAME", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.ID = args[0], args[1]
			opts.Wait = true
			return runRestore(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.NoSafetyCheckpoint, "no-safety-checkpoint", false, "do not checkpoint the current state first (the rollback cannot be undone)")
	f.BoolVar(&opts.DiskOnly, "disk-only", false, diskOnlyUsage)
	addWholeFlag(f, &opts.Whole)
	return cmd
}

// catalogLatest is the checkpoint id cairnd reads as the newest.
const catalogLatest = "latest"

// runRestoreOn restores a sandbox of a lost host on another and follows
// it to the end.
func runRestoreOn(ctx context.Context, opts restoreOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.RestoreCheckpoint(ctx, opts.Name, opts.ID, api.RestoreRequest{On: opts.On, Whole: opts.Whole})
	if err != nil {
		return err
	}
	raw, err := follow(ctx, c, op, opts.Name, g)
	if err != nil {
		return err
	}
	var ev api.Evacuated
	if err := json.Unmarshal(raw, &ev); err != nil {
		return fmt.Errorf("operation %s: bad result: %w", op.ID, err)
	}
	if g.JSON {
		return g.printJSON(ev)
	}
	printEvacuated(g, ev)
	return nil
}

func runRestore(ctx context.Context, opts restoreOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.RestoreCheckpoint(ctx, opts.Name, opts.ID, api.RestoreRequest{
		As:                 opts.As,
		NoSafetyCheckpoint: opts.NoSafetyCheckpoint,
		DiskOnly:           opts.DiskOnly,
		FromOffsite:        opts.FromOffsite,
		Whole:              opts.Whole,
	})
	if err != nil {
		return err
	}
	if opts.As != "" {
		sb, err := waitSandbox(ctx, c, op, opts.As, g)
		if err != nil {
			return err
		}
		if g.JSON {
			return g.printJSON(sb)
		}
		g.printf("Sandbox %s created from %s/%s and running\n", opts.As, opts.Name, opts.ID)
		return nil
	}
	if !opts.Wait {
		if g.JSON {
			return g.printJSON(op)
		}
		g.printf("Restore of %s to %s started (operation %s)\n", opts.Name, opts.ID, op.ID)
		return nil
	}
	sb, err := waitSandbox(ctx, c, op, opts.Name, g)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(sb)
	}
	g.printf("Sandbox %s restored to %s\n", opts.Name, opts.ID)
	return nil
}
