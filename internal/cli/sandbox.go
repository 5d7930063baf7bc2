package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// createOptions are the flags of cairn create.
type createOptions struct {
	Name           string
	Image          string
	OnHost         string // --on: the host to create it on
	CPUs           float64
	Memory         string
	Disk           string // size, e.g. "20G"; "" for the daemon's default
	AutoCheckpoint string // interval, e.g. "15m"; "" for the daemon's default
	Inside         *api.InsideChange
	Restart        string // restart policy; "" for on-failure
	Network        *api.NetworkChange
	Settings       settingsFlags
}

func newCreateCommand(g *globalOptions) *cobra.Command {
	var opts createOptions
	var inside insideFlags
	var netFlags networkFlags
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a sandbox and start it",
		Long: `Create a sandbox named NAME from an image and start it.

cairn follows the operation until the sandbox runs, printing its progress on
stderr. The first use of an image builds it, which can take a few minutes.
Ctrl-C stops following; the creation goes on in cairnd.

NAME: up to 63 lowercase letters, digits and dashes, starting with a letter
or digit.
--cpus takes a number of cores from 0.01 to the host's (0: no limit).
--memory takes a size such as 512M or 2G, from 64M to the host's RAM.
--disk takes the size of the sandbox's disk, the image's files included,
from 64M to the pool's size (default: cairnd's --default-disk, 10G). Past
it, writes inside fail with "Disk quota exceeded" (EDQUOT) and nothing
outside the sandbox is touched; its checkpoints go on working. A fork or a
restore as a new sandbox has the size of the original.
--auto-checkpoint sets how often cairnd checkpoints the sandbox's disk on
its own, and only when the disk changed since the last checkpoint: a
duration from 60s to 24h such as 90s, 15m or 1h (default 5m). Automatic
checkpoints cannot be switched off; "cairn config" changes the interval.
--memory is what the sandbox's kernel sees as its memory: a process that
takes more is killed inside (exit 137; "cairn info" shows the last such
kill) and the sandbox lives on.
--restart says what cairnd does when the sandbox dies (its processes
killed on the host, out of host memory): on-failure (default) starts it
again from its disk after 1 s, 2 s, 4 s, 8 s, 16 s, at most 5 times in 10
minutes; always does so also when it ended by itself (kill 1 inside); no
leaves it crashed. "cairn config" changes it.
--on names the host to create it on when several hosts share cairnd's
database ("cairn host list"; default: the least loaded host that is up).

` + networkHelp + ` "cairn network set" changes them.

` + settingsHelp + ` "cairn config" changes them.

` + insideHelp + ` "cairn config" changes them too.`,
		Example: `  cairn create web
  cairn create agent --env OPENAI_BASE_URL=http://proxy:8080 --workdir /work --label team=ml
  cairn create dev --image debian --deny 0.0.0.0/0 --allow '*.debian.org'
  cairn create offline --network none
  cairn create dev --image debian --cpus 2 --memory 2G --disk 20G
  cairn create lab --image python
  cairn create agent --auto-checkpoint 15m --restart no
  cairn create agent --inside-memory --inside-rate 2 --inside-keep 10`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			opts.Inside = inside.change(cmd.Flags())
			var err error
			if opts.Network, err = netFlags.change(cmd.Flags(), "network"); err != nil {
				return err
			}
			return runCreate(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	inside.register(f)
	f.StringVar(&opts.Image, "image", "busybox", "image to start from (busybox, debian, python, node; see \"cairn image list\")")
	boundedFloatVar(f, &opts.CPUs, "cpus", api.MinCPUs, api.MaxCPUs, true, "CPU limit, e.g. 1.5, at most the host's cores (default: no limit)")
	boundedSizeVar(f, &opts.Memory, "memory", api.MinMemoryBytes, api.MaxMemoryBytes, "memory limit, e.g. 512M, 2G; 64M to the host's RAM (default: no limit)")
	boundedSizeVar(f, &opts.Disk, "disk", api.MinDiskBytes, api.MaxDiskBytes, "disk size, the image's files included, e.g. 20G; 64M to the pool's size (default: cairnd's --default-disk)")
	boundedDurationVar(f, &opts.AutoCheckpoint, "auto-checkpoint", api.MinAutoCheckpoint, api.MaxAutoCheckpoint, time.Second, "interval of automatic checkpoints, 60s to 24h, e.g. 15m (default 5m)")
	f.StringVar(&opts.Restart, "restart", "", "what to do when the sandbox dies: on-failure, always, no (default on-failure)")
	f.StringVar(&opts.OnHost, "on", "", "the host to create it on, of those that share the database (default: the least loaded; see \"cairn host list\")")
	netFlags.register(f, "network")
	opts.Settings.register(f, false)
	return cmd
}

func runCreate(ctx context.Context, opts createOptions, g *globalOptions) error {
	c := g.client()
	req := api.CreateSandboxRequest{
		Name:           opts.Name,
		Image:          opts.Image,
		CPUs:           opts.CPUs,
		Memory:         opts.Memory,
		Disk:           opts.Disk,
		AutoCheckpoint: opts.AutoCheckpoint,
		Inside:         opts.Inside,
		Restart:        opts.Restart,
		Network:        opts.Network,
		Host:           opts.OnHost,
	}
	opts.Settings.create(&req)
	op, err := c.CreateSandbox(ctx, req)
	if err != nil {
		return err
	}
	sb, err := waitSandbox(ctx, c, op, opts.Name, g)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(sb)
	}
	g.printf("Sandbox %s created and running (id %s)\n", sb.Name, sb.ID)
	return nil
}

// listOptions are the flags of cairn list.
type listOptions struct {
	Parent string
	Labels []string // key=value or key: all must match
}

func newListCommand(g *globalOptions) *cobra.Command {
	var opts listOptions
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List sandboxes",
		Long: `List the sandboxes of your account with their state, image, limits,
parent (the sandbox a fork came from) and age.

--parent keeps only the forks of one sandbox; --label key=value (or key)
only those with that label (repeatable: all must match). --json prints an
array of sandbox objects.`,
		Example: `  cairn list
  cairn list --parent web
  cairn list --label team=ml
  cairn list --json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runList(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().StringVar(&opts.Parent, "parent", "", "only forks of this sandbox")
	cmd.Flags().StringArrayVar(&opts.Labels, "label", nil, "only sandboxes with this label, key=value or key (repeatable)")
	return cmd
}

func runList(ctx context.Context, opts listOptions, g *globalOptions) error {
	list, err := g.client().SandboxesLabelled(ctx, opts.Parent, opts.Labels)
	if err != nil {
		return err
	}
	if g.JSON {
		if list == nil {
			list = []api.Sandbox{}
		}
		return g.printJSON(list)
	}
	now := g.now()
	t := newTable(g.stdout, "NAME", "STATE", "IMAGE", "CPUS", "MEMORY", "PARENT", "CREATED", "ENDS")
	for _, sb := range list {
		t.Row(sb.Name, sb.State, sb.Image, formatCPUs(sb.CPUs), formatMemory(sb.MemoryBytes),
			orDash(sb.Parent), formatAge(now, sb.CreatedAt), formatEnds(now, sb))
	}
	return t.Flush()
}

// infoOptions are the arguments of cairn info.
type infoOptions struct {
	Name string
}

func newInfoCommand(g *globalOptions) *cobra.Command {
	var opts infoOptions
	return &cobra.Command{
		Use:   "info NAME",
		Short: "Show a sandbox's details",
		Long: `Show what cairnd knows about one sandbox: id, state, image, limits,
parent, creation time, whether cairn-init inside answers, the host pid of
its runsc process while it runs, its checkpoints of reference, how often it
is checkpointed automatically and the disk space it uses.

next start (stopped sandboxes only): "resume saved session (ID)" when
"cairn stop --snapshot" saved its session, so "cairn start" resumes its
processes from memory checkpoint ID; "boot" when "cairn start" boots it.

current checkpoint: the checkpoint its disk was last restored or forked
from (it cannot be deleted). source checkpoint: SANDBOX/ID of the checkpoint
it was forked or restored-as-new from. disk: what its writable layer alone
holds, and what its checkpoints alone hold (what deleting them all frees).`,
		Example: `  cairn info web
  cairn info web --json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runInfo(cmd.Context(), opts, g)
		},
	}
}

func runInfo(ctx context.Context, opts infoOptions, g *globalOptions) error {
	sb, err := g.client().Sandbox(ctx, opts.Name)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(sb)
	}
	pid := "-"
	if sb.Pid != 0 {
		pid = fmt.Sprint(sb.Pid)
	}
	t := newTable(g.stdout)
	t.Row("name", sb.Name)
	t.Row("id", sb.ID)
	t.Row("state", sb.State)
	if next := formatNextStart(sb); next != "" {
		t.Row("next start", next)
	}
	t.Row("image", sb.Image)
	t.Row("cpus", formatCPUs(sb.CPUs))
	t.Row("memory", formatMemory(sb.MemoryBytes))
	t.Row("disk size", formatDiskSize(sb))
	t.Row("parent", orDash(sb.Parent))
	t.Row("created", formatTime(g.now(), sb.CreatedAt))
	t.Row("agent connected", yesNo(sb.AgentConnected))
	t.Row("pid", pid)
	t.Row("runsc container", orDash(sb.Container))
	t.Row("current checkpoint", orDash(sb.CurrentCheckpoint))
	t.Row("source checkpoint", orDash(sb.SourceCheckpoint))
	t.Row("auto-checkpoint", orDash(formatAutoCheckpoint(sb.AutoCheckpointSeconds)))
	t.Row("from inside", formatInside(sb.Inside))
	t.Row("restart", orDash(sb.Restart))
	t.Row("timeout", formatTimeout(g.now(), sb))
	t.Row("sleeps when idle", formatIdle(sb.IdleSeconds))
	t.Row("defaults", formatSettings(sb))
	t.Row("network", formatNetwork(sb.Network))
	t.Row("last crash", formatEvent(g.now(), sb.LastCrash))
	t.Row("last OOM kill", formatEvent(g.now(), sb.LastOOMKill))
	if sb.Disk != nil {
		t.Row("disk", formatDisk(*sb.Disk))
	}
	if sb.Fill != nil {
		t.Row("fill", formatFill(*sb.Fill))
	}
	return t.Flush()
}

// formatFill renders a lazy restore's fill: "1.2 GiB of 4.0 GiB (30%)",
// and why it waits when no location answers.
func formatFill(f api.Fill) string {
	s := formatSize(f.Done) + " of " + formatSize(f.Total)
	if f.Total > 0 {
		s += fmt.Sprintf(" (%d%%)", f.Done*100/f.Total)
	}
	if f.Unavailable {
		s += ", waiting: no location answers (reads of data not in fail with EIO)"
	}
	return s
}

// formatEvent renders a sandbox event: "3 min ago: WHAT", "-" for none.
func formatEvent(now time.Time, ev *api.SandboxEvent) string {
	if ev == nil {
		return "-"
	}
	return formatTime(now, ev.At) + ": " + ev.What
}

// formatNextStart says what "cairn start" will do with a stopped sandbox:
// "resume saved session (v4)" or "boot"; "" when the sandbox is not
// stopped.
func formatNextStart(sb api.Sandbox) string {
	switch {
	case sb.State != api.StateStopped:
		return ""
	case sb.SavedSession != "":
		return "resume saved session (" + sb.SavedSession + ")"
	}
	return "boot"
}

// formatDisk renders a sandbox's disk usage: "1.2GiB in the sandbox,
// 300MiB in 4 checkpoints".
func formatDisk(d api.DiskUsage) string {
	return fmt.Sprintf("%s in the sandbox, %s in %s", formatSize(d.Sandbox), formatSize(d.Checkpoints), plural(d.CheckpointCount, "checkpoint"))
}

// formatDiskSize renders a sandbox's disk size, with what it holds when
// known: "10GiB (1.3GiB used, 13%)", "10GiB", or "none" without a size.
func formatDiskSize(sb api.Sandbox) string {
	if sb.DiskBytes <= 0 {
		return "none (the pool's space)"
	}
	if sb.Disk == nil {
		return formatSize(sb.DiskBytes)
	}
	return fmt.Sprintf("%s (%s used, %.0f%%)", formatSize(sb.DiskBytes), formatSize(sb.Disk.Used), 100*float64(sb.Disk.Used)/float64(sb.DiskBytes))
}

// statusOptions are the arguments of cairn status.
type statusOptions struct {
	Name string
}

func newStatusCommand(g *globalOptions) *cobra.Command {
	var opts statusOptions
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show a sandbox's state and checkpoints at a glance",
		Long: `Show a short summary of one sandbox: its state and image; when its disk
was last saved (by a checkpoint of any trigger), its off-site state and how
often it is checkpointed automatically; why the last automatic checkpoint
was skipped, if it was (note); whether "cairn start" resumes its saved
session or boots it, if it is stopped (next start); and the disk space it
and its checkpoints use. "cairn info" has the details, "cairn checkpoint list" the checkpoints.

  checkpoints   Saved 3 min ago · off-site — · every 5 min when the disk changed
  next start    resume saved session (v4)

--json prints {"sandbox":{…},"checkpoints":[…]}, automatic checkpoints
included, oldest first.`,
		Example: `  cairn status web
  cairn status web --json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runStatus(cmd.Context(), opts, g)
		},
	}
}

// statusJSON is the --json output of cairn status.
type statusJSON struct {
	Sandbox     api.Sandbox      `json:"sandbox"`
	Checkpoints []api.Checkpoint `json:"checkpoints"` // oldest first, automatic ones included
}

func runStatus(ctx context.Context, opts statusOptions, g *globalOptions) error {
	c := g.client()
	sb, err := c.Sandbox(ctx, opts.Name)
	if err != nil {
		return err
	}
	if g.JSON {
		cks, err := c.Checkpoints(ctx, opts.Name, true)
		if err != nil {
			return err
		}
		if cks == nil {
			cks = []api.Checkpoint{}
		}
		return g.printJSON(statusJSON{Sandbox: sb, Checkpoints: cks})
	}
	g.printf("%s  %s  (image %s)\n", sb.Name, sb.State, sb.Image)
	t := newTable(g.stdout)
	if sb.State == api.StateCrashed {
		t.Row("crashed", formatEvent(g.now(), sb.LastCrash))
	}
	t.Row("checkpoints", formatCheckpointStatus(g.now(), sb))
	if sb.AutoCheckpointNote != "" {
		t.Row("note", sb.AutoCheckpointNote)
	}
	if next := formatNextStart(sb); next != "" {
		t.Row("next start", next)
	}
	if sb.Disk != nil {
		t.Row("disk", formatDisk(*sb.Disk))
	}
	return t.Flush()
}

// formatCheckpointStatus renders the checkpoints line of cairn status:
// "Saved 3 min ago · off-site 4 min ago · every 5 min when the disk
// changed", with "Never saved" before the first checkpoint and "off-site —"
// before the first one both locations hold ("off-site off" when off-site
// copies are disabled).
func formatCheckpointStatus(now time.Time, sb api.Sandbox) string {
	saved := "Never saved"
	if sb.LastCheckpointAt != nil && !sb.LastCheckpointAt.IsZero() {
		saved = "Saved " + formatAge(now, *sb.LastCheckpointAt)
	}
	offsite := "off-site —"
	switch {
	case sb.OffsiteOff:
		offsite = "off-site off"
	case sb.LastOffsiteAt != nil && !sb.LastOffsiteAt.IsZero():
		offsite = "off-site " + formatAge(now, *sb.LastOffsiteAt)
	}
	parts := []string{saved, offsite}
	if every := formatAutoCheckpoint(sb.AutoCheckpointSeconds); every != "" {
		parts = append(parts, every)
	}
	return strings.Join(parts, " · ")
}

// configOptions are the arguments and flags of cairn config.
type configOptions struct {
	Name           string
	AutoCheckpoint string // new interval of automatic checkpoints, e.g. "15m"
	Inside         *api.InsideChange
	Restart        string // new restart policy
	Settings       settingsFlags
	flags          *pflag.FlagSet // to tell a flag given empty from one not given
}

func newConfigCommand(g *globalOptions) *cobra.Command {
	var opts configOptions
	var inside insideFlags
	cmd := &cobra.Command{
		Use:   "config NAME [--auto-checkpoint DURATION] [--restart POLICY] [--inside-…]",
		Short: "Change a sandbox's settings",
		Long: `Change settings of sandbox NAME; settings not given stay as they are, and
at least one must be given.

--auto-checkpoint sets how often cairnd checkpoints the sandbox's disk on
its own, and only when the disk changed since the last checkpoint: a
duration from 60s to 24h such as 90s, 15m or 1h. Automatic checkpoints
cannot be switched off. The sandbox need not be running.

--restart sets what cairnd does when the sandbox dies: on-failure, always
or no (see "cairn create --help").

` + settingsHelp + ` --unset-env KEY and --unlabel KEY remove them; --user ""
and --workdir "" go back to the image's. New execs see a change at once,
services at the sandbox's next start.

` + insideHelp + ` A change applies to the next request from inside.

--json prints the sandbox.`,
		Example: `  cairn config web --auto-checkpoint 15m
  cairn config web --auto-checkpoint 1h --json
  cairn config web --restart no
  cairn config agent --inside-names --inside-rate 1
  cairn config agent --inside-memory=false
  cairn config agent --env MODEL=small --unset-env DEBUG --label stage=test`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			opts.Inside = inside.change(cmd.Flags())
			opts.flags = cmd.Flags()
			if opts.AutoCheckpoint == "" && opts.Restart == "" && opts.Inside == nil && !opts.Settings.change(cmd.Flags(), &api.ConfigureSandboxRequest{}) {
				return usageErrorf("nothing to change: give --auto-checkpoint DURATION, --restart POLICY, an --inside-… flag, --env, --user, --workdir or --label")
			}
			return runConfig(cmd.Context(), opts, g)
		},
	}
	inside.register(cmd.Flags())
	boundedDurationVar(cmd.Flags(), &opts.AutoCheckpoint, "auto-checkpoint", api.MinAutoCheckpoint, api.MaxAutoCheckpoint, time.Second, "interval of automatic checkpoints, 60s to 24h, e.g. 15m")
	cmd.Flags().StringVar(&opts.Restart, "restart", "", "what to do when the sandbox dies: on-failure, always, no")
	opts.Settings.register(cmd.Flags(), true)
	return cmd
}

func runConfig(ctx context.Context, opts configOptions, g *globalOptions) error {
	req := api.ConfigureSandboxRequest{
		AutoCheckpoint: opts.AutoCheckpoint,
		Inside:         opts.Inside,
		Restart:        opts.Restart,
	}
	settings := opts.flags != nil && opts.Settings.change(opts.flags, &req)
	sb, err := g.client().ConfigureSandbox(ctx, opts.Name, req)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(sb)
	}
	if opts.AutoCheckpoint != "" {
		every := formatAutoCheckpoint(sb.AutoCheckpointSeconds)
		if every == "" {
			every = "every " + opts.AutoCheckpoint + " when the disk changed"
		}
		g.printf("Sandbox %s: automatic checkpoints %s\n", opts.Name, every)
	}
	if opts.Restart != "" {
		g.printf("Sandbox %s: restart %s\n", opts.Name, sb.Restart)
	}
	if opts.Inside != nil {
		g.printf("Sandbox %s: from inside: %s\n", opts.Name, formatInside(sb.Inside))
	}
	if settings {
		g.printf("Sandbox %s: %s\n", opts.Name, formatSettings(sb))
	}
	return nil
}

// startOptions are the arguments of cairn start.
type startOptions struct {
	Name string
}

func newStartCommand(g *globalOptions) *cobra.Command {
	var opts startOptions
	return &cobra.Command{
		Use:   "start NAME",
		Short: "Start a stopped sandbox",
		Long: `Start a stopped sandbox and wait until cairn-init inside answers.

If "cairn stop --snapshot" saved its session, its processes resume from
that memory checkpoint where they were, and cairn says "resumed from its
saved session"; otherwise it boots, its services start anew. "cairn info"
says which will happen (next start). Ctrl-C stops waiting; the start goes
on in cairnd.`,
		Example: `  cairn start web`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runStart(cmd.Context(), opts, g)
		},
	}
}

func runStart(ctx context.Context, opts startOptions, g *globalOptions) error {
	c := g.client()
	// Whether the start resumes or boots depends on the saved session the
	// sandbox holds before it (the start clears it).
	sb, err := c.Sandbox(ctx, opts.Name)
	if err != nil {
		return err
	}
	op, err := c.StartSandbox(ctx, opts.Name)
	if err != nil {
		return err
	}
	done := "started"
	if sb.SavedSession != "" {
		done = "resumed from its saved session"
	}
	return finishLifecycle(ctx, c, op, opts.Name, done, g)
}

// stopOptions are the arguments and flags of cairn stop.
type stopOptions struct {
	Name     string
	Snapshot bool // save the session (memory and disk): the next start resumes it
}

func newStopCommand(g *globalOptions) *cobra.Command {
	var opts stopOptions
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a running sandbox",
		Long: `Stop a running sandbox: its processes end, its disk (writable layer) is
kept, and "cairn start" boots it again.

With --snapshot its session is saved instead: the processes and their
memory are checkpointed with the disk (a memory checkpoint, trigger stop)
and the sandbox stops; the next "cairn start" resumes the processes where
they were instead of booting. Open TCP connections to the outside do not
survive. "cairn info" shows which start comes next.

Ctrl-C stops waiting; the stop goes on in cairnd.`,
		Example: `  cairn stop web
  cairn stop web --snapshot`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runStop(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().BoolVar(&opts.Snapshot, "snapshot", false, "save the session (processes, memory and disk): the next start resumes it")
	return cmd
}

func runStop(ctx context.Context, opts stopOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.StopSandbox(ctx, opts.Name, api.StopRequest{Snapshot: opts.Snapshot})
	if err != nil {
		return err
	}
	done := "stopped"
	if opts.Snapshot {
		done = fmt.Sprintf(`stopped; its session is saved: "cairn start %s" resumes its processes`, opts.Name)
	}
	return finishLifecycle(ctx, c, op, opts.Name, done, g)
}

// restartOptions are the arguments of cairn restart.
type restartOptions struct {
	Name string
}

func newRestartCommand(g *globalOptions) *cobra.Command {
	var opts restartOptions
	return &cobra.Command{
		Use:   "restart NAME",
		Short: "Stop a sandbox (if running) and start it again",
		Long: `Stop a sandbox if it runs, then start it again; services start anew,
hand-started processes do not come back. Ctrl-C stops waiting; the restart
goes on in cairnd.`,
		Example: `  cairn restart web`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runRestart(cmd.Context(), opts, g)
		},
	}
}

func runRestart(ctx context.Context, opts restartOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.RestartSandbox(ctx, opts.Name)
	if err != nil {
		return err
	}
	return finishLifecycle(ctx, c, op, opts.Name, "restarted", g)
}

// deleteOptions are the arguments of cairn delete.
type deleteOptions struct {
	Name string
}

func newDeleteCommand(g *globalOptions) *cobra.Command {
	var opts deleteOptions
	return &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Stop and remove a sandbox",
		Long: `Stop a sandbox if it runs and remove it with its writable layer.
Ctrl-C stops waiting; the deletion goes on in cairnd.`,
		Example: `  cairn delete web`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runDelete(cmd.Context(), opts, g)
		},
	}
}

func runDelete(ctx context.Context, opts deleteOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.DeleteSandbox(ctx, opts.Name)
	if err != nil {
		return err
	}
	raw, err := follow(ctx, c, op, opts.Name, g)
	if err != nil {
		return err
	}
	if g.JSON {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			return g.printJSON(map[string]string{"deleted": opts.Name})
		}
		return g.printJSON(raw)
	}
	g.printf("Sandbox %s deleted\n", opts.Name)
	return nil
}

// finishLifecycle follows an operation whose result is the sandbox and
// prints "Sandbox NAME <done>", or the sandbox with --json.
func finishLifecycle(ctx context.Context, c *client.Client, op api.Operation, name, done string, g *globalOptions) error {
	sb, err := waitSandbox(ctx, c, op, name, g)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(sb)
	}
	g.printf("Sandbox %s %s\n", name, done)
	return nil
}

// waitSandbox is follow for operations whose result is a sandbox.
func waitSandbox(ctx context.Context, c *client.Client, op api.Operation, name string, g *globalOptions) (api.Sandbox, error) {
	var sb api.Sandbox
	raw, err := follow(ctx, c, op, name, g)
	if err != nil {
		return sb, err
	}
	if err := json.Unmarshal(raw, &sb); err != nil {
		return sb, fmt.Errorf("operation %s: bad result: %w", op.ID, err)
	}
	return sb, nil
}

// follow streams op's events to stderr until it ends and returns its
// result, printing the events as eventPrinter does (--json: each event as
// a JSON line). If ctx ends first (Ctrl-C) the error says
// which operation was left running; name is the sandbox it works on.
func follow(ctx context.Context, c *client.Client, op api.Operation, name string, g *globalOptions) (json.RawMessage, error) {
	check := ""
	if name != "" {
		check = "cairn info " + name
	}
	events := g.events()
	raw, err := c.Follow(ctx, op, events.print)
	events.end()
	return raw, followError(ctx, op, check, err)
}
