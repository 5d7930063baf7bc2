package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Exit codes of cairn exec for its own failures, as docker uses them; any
// other code is the command's.
const (
	exitExecFailed   = 125 // cairn or cairnd failed (sandbox missing, not running, daemon unreachable…)
	exitExecNotFound = 127 // the command could not be started (error S08)
	exitExecTimedOut = api.ExitTimedOut
)

const execExitCodes = `Exit codes:
  N     the command's own exit code (128+S when killed by signal S)
  125   cairn exec itself failed (no such sandbox, not running, cairnd unreachable…)
  124   the command ran past --timeout and was killed (error S11)
  127   the command could not be started: not found or not executable (error S08)
  130   cairn was interrupted (Ctrl-C; with -i -t on a terminal, Ctrl-C goes to the command)`

// execOptions are the arguments and flags of cairn exec (and console).
type execOptions struct {
	Name        string
	Command     []string
	Interactive bool     // -i: attach stdin
	TTY         bool     // -t: run on a pseudo-terminal
	Detach      bool     // -d: leave it running, print the pid
	Background  bool     // --background: a background process (output kept, stdin open), print the pid
	Env         []string // -e KEY=VAL
	Dir         string   // -w
	User        string   // -u
	Timeout     time.Duration
}

func newExecCommand(g *globalOptions) *cobra.Command {
	var opts execOptions
	cmd := &cobra.Command{
		Use:   "exec NAME [flags] -- CMD [ARG...]",
		Short: "Run a command in a sandbox",
		Long: `Run a command inside a running sandbox. Its stdout, stderr and exit code
pass through; with -i cairn's stdin goes to it. The command is looked up in
the sandbox's PATH and runs in / unless -w says otherwise.

Put "--" before the command so that its flags are not taken for cairn's.
With -t the command runs on a pseudo-terminal (stdout and stderr merged); with
-i -t on a terminal, yours is put in raw mode until the command ends, so keys
such as Ctrl-C go to the command. --timeout kills the command (its whole
process group) once it has run that long: cairn then exits 124.

--background (-b) starts a background process and prints its pid, which
cairn ps lists and cairn attach (its output, from any offset: the last 1 MiB
is kept), cairn kill and cairn wait take; it outlives every client. -d only
starts the command with its stdio on /dev/null and prints its pid: nothing
of it is kept. If the sandbox is starting or restoring, exec waits for it.
--json changes only cairn's own messages (and the output of -b and -d:
{"pid":N}).
The command's output is written exactly as it wrote it, escape sequences
included, as ssh does: it is your command's (see docs/security.md).

` + execExitCodes,
		Example: `  cairn exec web -- ls -l /
  cairn exec web -i -t -- /bin/sh
  cairn exec web -e DEBUG=1 -w /srv -- ./run.sh
  cairn exec web -d -- sleep 1000
  cairn exec web --background -- ./server.sh
  cairn exec web --timeout 30s -- ./test.sh`,
		Args: execArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Command = args[0], args[1:]
			if opts.Detach && (opts.Interactive || opts.TTY) {
				return usageErrorf("-d cannot be combined with -i or -t")
			}
			if opts.Background && (opts.Detach || opts.Interactive || opts.TTY) {
				return usageErrorf("--background cannot be combined with -d, -i or -t (write to its stdin through the API, or with cairn attach -i)")
			}
			for _, kv := range opts.Env {
				if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
					return usageErrorf("-e %q: want KEY=VALUE", kv)
				}
			}
			return runExec(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&opts.Interactive, "interactive", "i", false, "attach stdin")
	f.BoolVarP(&opts.TTY, "tty", "t", false, "run on a pseudo-terminal")
	f.BoolVarP(&opts.Detach, "detach", "d", false, "run in the background and print the pid; nothing of it is kept")
	f.BoolVarP(&opts.Background, "background", "b", false, "start a background process and print its pid: its output is kept (cairn attach), its stdin open, its exit status waited for (cairn wait)")
	f.StringArrayVarP(&opts.Env, "env", "e", nil, "set an environment variable KEY=VALUE (repeatable)")
	f.StringVarP(&opts.Dir, "workdir", "w", "", "working directory inside the sandbox (default: the image's, else /)")
	f.StringVar(&opts.Dir, "cwd", "", "the same as --workdir")
	f.StringVarP(&opts.User, "user", "u", "", "user[:group] or uid[:gid] to run as (default: the image's, else root)")
	f.DurationVar(&opts.Timeout, "timeout", 0, "kill the command after this long, e.g. 30s (exit code 124)")
	return cmd
}

// execArgs wants NAME and then a command, NAME before any "--".
func execArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 || cmd.ArgsLenAtDash() == 0 {
		return usageErrorf("%q needs NAME and a command, e.g. %q", cmd.CommandPath(), "cairn exec web -- ls -l")
	}
	if len(args) == 1 {
		return usageErrorf("%q needs a command after NAME, e.g. %q", cmd.CommandPath(), "cairn exec "+args[0]+" -- ls -l")
	}
	return nil
}

func newConsoleCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "console NAME",
		Short: "Open an interactive shell in a sandbox",
		Long: `Open an interactive login shell in a running sandbox: /bin/bash if it has
one, else /bin/sh. Like "cairn exec NAME -i -t -- /bin/bash -l". Leave it with
"exit" or Ctrl-D; cairn exits with the shell's exit code.

` + execExitCodes,
		Example: `  cairn console web`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd.Context(), execOptions{
				Name: args[0],
				// bash if the sandbox has it, else sh, as a login shell.
				Command:     []string{"/bin/sh", "-c", "if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi"},
				Interactive: true,
				TTY:         true,
			}, g)
		},
	}
}

// runExec runs the command. It returns nil if the command exited with 0,
// an *exitError carrying the command's code if it exited otherwise, and an
// *exitError with code 125 or 127 if it could not be run.
func runExec(ctx context.Context, opts execOptions, g *globalOptions) error {
	c := g.client()
	req := api.ExecRequest{
		Command: opts.Command,
		Env:     opts.Env,
		Dir:     opts.Dir,
		User:    opts.User,
		TTY:     opts.TTY,
		Stdin:   opts.Interactive,
	}
	if opts.Timeout < 0 {
		return usageErrorf("--timeout %v: a duration such as 30s", opts.Timeout)
	}
	req.TimeoutSeconds = opts.Timeout.Seconds()
	if opts.Detach || opts.Background {
		start := c.ExecDetached
		if opts.Background {
			start = c.ExecBackground
		}
		pid, err := start(ctx, opts.Name, req)
		if err != nil {
			return execFailure(err)
		}
		if g.JSON {
			return g.printJSON(api.ExecStarted{PID: pid})
		}
		g.printf("%d\n", pid)
		return nil
	}

	eio := client.ExecIO{Stdout: g.stdout, Stderr: g.stderr}
	if opts.Interactive {
		eio.Stdin = g.stdin
	}
	if opts.TTY {
		lt := newLocalTerminal(g.stdin, g.stdout)
		if sz, ok := lt.size(); ok {
			req.Rows, req.Cols = sz.Rows, sz.Cols
		}
		if opts.Interactive {
			restore, err := lt.makeRaw()
			if err != nil {
				return &exitError{code: exitExecFailed, err: err}
			}
			defer restore()
		}
		resize, stop := lt.watchResize()
		defer stop()
		eio.Resize = resize
	}
	st, err := c.Exec(ctx, opts.Name, req, eio)
	if err != nil {
		return execFailure(err)
	}
	if st.TimedOut {
		return &exitError{code: exitExecTimedOut, err: errdefs.New(api.CodeExecTimedOut,
			"the command ran past its %v timeout and was killed", opts.Timeout)}
	}
	if st.Code != 0 {
		return &exitError{code: st.Code}
	}
	return nil
}

// execFailure maps an error of exec to cairn exec's exit codes.
func execFailure(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return &exitError{code: exitInterrupted}
	case client.CodeOf(err) == api.CodeExecFailed:
		return &exitError{code: exitExecNotFound, err: err}
	default:
		return &exitError{code: exitExecFailed, err: err}
	}
}

// localTerminal is the terminal cairn runs in, if any: stdin for raw mode,
// stdout (else stdin) for the size.
type localTerminal struct {
	in     int // fd of stdin if a terminal, else -1
	sizeFd int // fd to read the size from, else -1
}

func newLocalTerminal(stdin io.Reader, stdout io.Writer) localTerminal {
	lt := localTerminal{in: terminalFd(stdin), sizeFd: terminalFd(stdout)}
	if lt.sizeFd < 0 {
		lt.sizeFd = lt.in
	}
	return lt
}

// terminalFd returns the file descriptor behind v if it is a terminal,
// else -1.
func terminalFd(v any) int {
	f, ok := v.(interface{ Fd() uintptr })
	if !ok {
		return -1
	}
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return -1
	}
	return fd
}

// size returns the terminal's size, if there is a terminal.
func (lt localTerminal) size() (api.Resize, bool) {
	if lt.sizeFd < 0 {
		return api.Resize{}, false
	}
	w, h, err := term.GetSize(lt.sizeFd)
	if err != nil || w <= 0 || h <= 0 {
		return api.Resize{}, false
	}
	return api.Resize{Rows: uint16(h), Cols: uint16(w)}, true
}

// makeRaw puts stdin's terminal in raw mode (if stdin is a terminal) and
// returns the function that restores it. The caller defers that call, so
// the terminal is restored on every return and panic; signals that end
// cairn cancel its context, which ends the exec and returns.
func (lt localTerminal) makeRaw() (restore func(), err error) {
	if lt.in < 0 {
		return func() {}, nil
	}
	st, err := term.MakeRaw(lt.in)
	if err != nil {
		return nil, fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	return func() { term.Restore(lt.in, st) }, nil
}

// watchResize sends the terminal's new size on each SIGWINCH until stop is
// called. Without a terminal it returns a nil channel.
func (lt localTerminal) watchResize() (resize <-chan api.Resize, stop func()) {
	if lt.sizeFd < 0 {
		return nil, func() {}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGWINCH)
	out := make(chan api.Resize)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sig:
			case <-done:
				return
			}
			sz, ok := lt.size()
			if !ok {
				continue
			}
			select {
			case out <- sz:
			case <-done:
				return
			}
		}
	}()
	return out, func() {
		signal.Stop(sig)
		close(done)
	}
}
