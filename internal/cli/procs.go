package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// Background processes: cairn exec --background starts one; ps, attach,
// kill and wait work on them by pid (docs/api.md#processes).

// pidArg reads a PID argument.
func pidArg(v string) (int, error) {
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		return 0, usageErrorf("PID %q: the pid of a process in the sandbox (see `cairn ps NAME`)", v)
	}
	return pid, nil
}

// psOptions are the arguments of cairn ps.
type psOptions struct {
	Name string
}

func newPsCommand(g *globalOptions) *cobra.Command {
	var opts psOptions
	return &cobra.Command{
		Use:   "ps NAME",
		Short: "List the processes started through the API in a sandbox",
		Long: `List the background processes of a running sandbox (cairn exec --background),
running or exited, then the attached execs that run. A process is named by
its pid inside the sandbox: cairn attach, kill and wait take it.

STATE is running, or exited with its exit code (and the signal that killed
it); KIND is background or exec (an attached exec: its output is its
client's); OUTPUT is how many bytes of output it has written (cairn keeps
the last 1 MiB of each background process). An exited background process
is kept until its end is read (cairn wait, or cairn attach to its exit),
then 1 minute more; at most 32 exited ones are kept. Processes started
otherwise (services, children of these, a shell's background jobs) are not
listed. A restart, or a restore that does not resume memory, ends them all.
A sleeping sandbox is woken. --json prints the list as the API gives it.`,
		Example: `  cairn ps web
  cairn ps web --json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runPs(cmd.Context(), opts, g)
		},
	}
}

func runPs(ctx context.Context, opts psOptions, g *globalOptions) error {
	list, err := g.client().Processes(ctx, opts.Name)
	if err != nil {
		return err
	}
	if g.JSON {
		if list == nil {
			list = []api.Process{}
		}
		return g.printJSON(list)
	}
	t := newTable(g.stdout, "PID", "STATE", "KIND", "STARTED", "OUTPUT", "COMMAND")
	now := time.Now()
	for _, p := range list {
		kind, output := "exec", "-"
		if p.Background {
			kind, output = "background", formatSize(p.OutputBytes)
		}
		t.Row(strconv.Itoa(p.PID), processState(p), kind, formatAge(now, p.Started), output, safe(strings.Join(p.Command, " ")))
	}
	return t.Flush()
}

// processState is "running", or "exited (N)" / "exited (137 SIGKILL)".
func processState(p api.Process) string {
	if p.Exit == nil {
		return p.State
	}
	s := fmt.Sprintf("%s (%d", p.State, p.Exit.Code)
	switch {
	case p.Exit.TimedOut:
		s += " timed out"
	case p.Exit.Signal != "":
		s += " " + p.Exit.Signal
	}
	return s + ")"
}

// killOptions are the arguments and flags of cairn kill.
type killOptions struct {
	Name   string
	PID    int
	Signal string
}

func newKillCommand(g *globalOptions) *cobra.Command {
	var opts killOptions
	cmd := &cobra.Command{
		Use:   "kill NAME PID",
		Short: "Send a signal to a process in a sandbox",
		Long: `Send a signal to a process listed by cairn ps (a background process, or an
attached exec that runs): to its whole process group, as cairn exec's own
signals go. The default is TERM; --signal takes a name (KILL, INT, HUP, USR1,
with or without SIG) or a number. A process that has exited cannot be
signalled (error S13). It returns once the signal is sent; cairn wait NAME
PID waits for the exit.`,
		Example: `  cairn kill web 42
  cairn kill web 42 --signal KILL`,
		Args: exactArgs("NAME", "PID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := pidArg(args[1])
			if err != nil {
				return err
			}
			opts.Name, opts.PID = args[0], pid
			return runKill(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().StringVarP(&opts.Signal, "signal", "s", "TERM", "the signal: a name (TERM, KILL, INT…) or a number")
	return cmd
}

func runKill(ctx context.Context, opts killOptions, g *globalOptions) error {
	if err := g.client().SignalProcess(ctx, opts.Name, opts.PID, opts.Signal); err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(api.AgentResult{OK: true})
	}
	return nil
}

// attachOptions are the arguments and flags of cairn attach.
type attachOptions struct {
	Name        string
	PID         int
	From        int64
	Interactive bool
}

func newAttachCommand(g *globalOptions) *cobra.Command {
	var opts attachOptions
	cmd := &cobra.Command{
		Use:   "attach NAME PID",
		Short: "Follow the output of a background process",
		Long: `Write the output of a background process (cairn exec --background) from
offset --from on (0, the default, for all that is kept: the last 1 MiB), then
follow it until the process exits; cairn then exits with its exit code, as
cairn exec does. Leaving (Ctrl-C) leaves the process running; several
clients may attach at once. With -i, cairn's stdin goes to the process's
stdin (its end closes it).

Offsets count the bytes of output (stdout and stderr together) since the
process started. If the bytes from --from on were dropped (more than 1 MiB
came after them), cairn says so on stderr and goes on from the first byte
kept. If the connection breaks, cairn says the offset reached: attach again
with --from that offset.

` + execExitCodes,
		Example: `  cairn attach web 42
  cairn attach web 42 --from 1024
  cairn attach web 42 -i`,
		Args: exactArgs("NAME", "PID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := pidArg(args[1])
			if err != nil {
				return err
			}
			if opts.From < 0 {
				return usageErrorf("--from %d: an offset, 0 or more", opts.From)
			}
			opts.Name, opts.PID = args[0], pid
			return runAttach(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().Int64Var(&opts.From, "from", 0, "output offset to start at, in bytes")
	cmd.Flags().BoolVarP(&opts.Interactive, "interactive", "i", false, "send stdin to the process")
	return cmd
}

func runAttach(ctx context.Context, opts attachOptions, g *globalOptions) error {
	eio := client.ExecIO{Stdout: g.stdout, Stderr: g.stderr, Dropped: func(from, to int64) {
		fmt.Fprintf(g.stderr, "cairn: output from offset %d to %d was dropped (only the last %d bytes are kept)\n", from, to, api.MaxProcessOutput)
	}}
	if opts.Interactive {
		eio.Stdin = g.stdin
	}
	res, err := g.client().AttachProcess(ctx, opts.Name, opts.PID, opts.From, eio)
	if err != nil {
		if _, ok := errors.AsType[*client.Error](err); !ok && ctx.Err() == nil {
			err = fmt.Errorf("%w; attach again from where it broke: cairn attach %s %d --from %d", err, opts.Name, opts.PID, res.Offset)
		}
		return execFailure(err)
	}
	return exitOf(res.Exit)
}

// exitOf is cairn's exit for a command that exited with st.
func exitOf(st api.ExitStatus) error {
	switch {
	case st.TimedOut:
		return &exitError{code: exitExecTimedOut}
	case st.Code != 0:
		return &exitError{code: st.Code}
	}
	return nil
}

// waitOptions are the arguments of cairn wait.
type waitOptions struct {
	Name string
	PID  int
}

func newWaitCommand(g *globalOptions) *cobra.Command {
	var opts waitOptions
	return &cobra.Command{
		Use:   "wait NAME PID",
		Short: "Wait for a background process to exit",
		Long: `Wait until a background process (cairn exec --background) has exited, at once
if it has, and exit with its exit code (128+N when signal N killed it, 124
when it ran past its --timeout). Its output stays for cairn attach for 1
minute after. --json prints the process, its exit status included, and
exits 0.

Exit codes:
  N     the process's exit code
  125   cairn wait itself failed (no such process, sandbox not running…)
  130   cairn was interrupted (the process runs on)`,
		Example: `  cairn wait web 42
  cairn wait web 42 --json`,
		Args: exactArgs("NAME", "PID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := pidArg(args[1])
			if err != nil {
				return err
			}
			opts.Name, opts.PID = args[0], pid
			return runWait(cmd.Context(), opts, g)
		},
	}
}

func runWait(ctx context.Context, opts waitOptions, g *globalOptions) error {
	p, err := g.client().WaitProcess(ctx, opts.Name, opts.PID)
	if err != nil {
		return execFailure(err)
	}
	if g.JSON {
		return g.printJSON(p)
	}
	if p.Exit == nil {
		return &exitError{code: exitExecFailed, err: fmt.Errorf("process %d: no exit status in cairnd's answer", opts.PID)}
	}
	return exitOf(*p.Exit)
}
