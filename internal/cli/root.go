// Package cli is the cairn command line. It reaches cairnd only through the
// Go SDK in package client.
//
// Layout: one file per command group (sandbox.go, exec.go, checkpoint.go,
// fork.go, snapshot.go, diff.go, image.go, account.go, port.go, version.go); each
// command has an options struct and a run… function that tests call
// directly. Output helpers and the mapping from errors to exit codes live
// here; formatting of sizes, ages, intervals and tables in format.go.
//
// Exit codes: 0 success; 1 a command failed (the error is printed as
// "error CODE: message" on stderr, or as {"error":{…}} on stdout with
// --json); 2 usage error (bad arguments or flags; the usage is shown); 130
// interrupted (Ctrl-C). cairn exec passes the command's own exit code
// through and uses 125 and 127 for its own failures (see exec.go).
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Exit codes of cairn itself.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as a shell reports it
)

// globalOptions holds the flags every command has and where output goes.
type globalOptions struct {
	Socket string // cairnd's unix socket
	Host   string // a remote cairnd, https://HOST:PORT (remote.go)
	Token  string // its API token
	JSON   bool   // machine output on stdout

	remote *client.Client // the remote cairnd connect chose; nil: the socket

	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time // clock for relative ages
}

func newGlobalOptions(stdin io.Reader, stdout, stderr io.Writer) *globalOptions {
	return &globalOptions{stdin: stdin, stdout: stdout, stderr: stderr, now: time.Now}
}

// client returns a client for the daemon the options point at.
func (g *globalOptions) client() *client.Client {
	if g.remote != nil {
		return g.remote
	}
	return client.New(g.Socket)
}

// printJSON writes v to stdout as indented JSON, every string in it exact
// and every character a terminal could obey written as a \u escape
// (safeJSON).
func (g *globalOptions) printJSON(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := g.stdout.Write(safeJSON(buf.Bytes()))
	return err
}

// printf writes human output to stdout. Every string, error and Stringer
// among args is escaped (safe); the format itself is cairn's own.
func (g *globalOptions) printf(format string, args ...any) {
	fmt.Fprintf(g.stdout, format, safeArgs(args)...)
}

// eprintf writes a human message to stderr, escaped as printf does.
func (g *globalOptions) eprintf(format string, args ...any) {
	fmt.Fprintf(g.stderr, format, safeArgs(args)...)
}

// NewRootCommand returns the cairn command with every subcommand, writing
// to stdout and stderr (stdin is os.Stdin). Errors are returned by Execute
// on it, not printed; Execute (the package function) prints them.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	return newRootCommand(newGlobalOptions(os.Stdin, stdout, stderr))
}

func newRootCommand(g *globalOptions) *cobra.Command {
	socket := os.Getenv("CAIRN_SOCKET")
	if socket == "" {
		socket = client.DefaultSocket
	}
	root := &cobra.Command{
		Use:   "cairn",
		Short: "Run Linux sandboxes you can save, rewind and branch",
		Long: `cairn manages gVisor sandboxes run by the cairnd daemon on this machine.

It talks to cairnd over a unix socket: --socket, else $CAIRN_SOCKET, else ` + client.DefaultSocket + `;
or to a remote cairnd over HTTPS with an API token: --host and --token
($CAIRN_HOST, $CAIRN_TOKEN), or what cairn login stored.
Every command accepts --json for machine output on stdout.

Exit codes: 0 success, 1 the command failed, 2 usage error, 130 interrupted.
cairn exec passes the command's exit code through (see "cairn exec --help").`,
		Example: `  cairn create web --image debian
  cairn exec web -- uname -a
  cairn list --json`,
		Args:              groupArgs,
		RunE:              showHelp,
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
	}
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		var bad *errdefs.Error
		if errors.As(err, &bad) {
			return usageError{bad} // a number flag out of range: its V02 message alone
		}
		return usageError{err}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&g.Socket, "socket", socket, "cairnd's unix socket (env CAIRN_SOCKET)")
	pf.BoolVar(&g.JSON, "json", false, "machine output (JSON) on stdout, errors included")
	pf.StringVar(&g.Host, "host", "", "a remote cairnd, https://HOST:PORT (env CAIRN_HOST; default: the one `cairn login` stored, else the socket)")
	pf.StringVar(&g.Token, "token", "", "the remote cairnd's API token (env CAIRN_TOKEN)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Name() == "login" || cmd.Name() == "logout" || cmd.Name() == "version" {
			return nil
		}
		return g.connect(cmd)
	}

	root.AddCommand(
		newCreateCommand(g),
		newListCommand(g),
		newInfoCommand(g),
		newStatusCommand(g),
		newConfigCommand(g),
		newStartCommand(g),
		newStopCommand(g),
		newRestartCommand(g),
		newDeleteCommand(g),
		newCheckpointCommand(g),
		newRestoreCommand(g, "cairn restore"),
		newRollbackCommand(g),
		newForkCommand(g),
		newSnapshotCommand(g),
		newDiffCommand(g),
		newExecCommand(g),
		newConsoleCommand(g),
		newServicesCommand(g),
		newPsCommand(g),
		newAttachCommand(g),
		newKillCommand(g),
		newWaitCommand(g),
		newFilesCommand(g),
		newCpCommand(g),
		newLogsCommand(g),
		newEventsCommand(g),
		newPortCommand(g),
		newImageCommand(g),
		newNetworkCommand(g),
		newAccountCommand(g),
		newTokenCommand(g),
		newAuditCommand(g),
		newLoginCommand(g),
		newLogoutCommand(g),
		newWhoamiCommand(g),
		newServerCommand(g),
		newVerifyCommand(g),
		newOffsiteCommand(g),
		newOperationCommand(g),
		newHostCommand(g),
		newVersionCommand(g),
	)
	return root
}

// Execute runs cairn with args (without the program name) and returns the
// process exit code. Ctrl-C, SIGTERM and SIGHUP cancel the command's
// context.
func Execute(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return execute(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := newGlobalOptions(stdin, stdout, stderr)
	root := newRootCommand(g)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return g.report(cmd, err)
}

// usageError is a mistake in the command line: exit code 2, usage shown.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitError ends cairn with a given exit code, printing err if not nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// interruptedError says the user stopped cairn while it followed an
// operation that goes on in cairnd.
type interruptedError struct {
	op    api.Operation
	check string // the command that shows how it went, e.g. "cairn info web"; for the hint
}

func (e *interruptedError) Error() string {
	msg := fmt.Sprintf("interrupted: stopped following operation %s (%s); it continues in cairnd", e.op.ID, e.op.Kind)
	if e.check != "" {
		msg += fmt.Sprintf(`; check it with %q`, e.check)
	}
	return msg
}

// followError returns err, the error of following op, or an
// *interruptedError if ctx ended first (Ctrl-C). check is the command
// that shows how the operation went ("" for none).
func followError(ctx context.Context, op api.Operation, check string, err error) error {
	if err != nil && ctx.Err() != nil {
		return &interruptedError{op: op, check: check}
	}
	var answered *client.Error
	if err != nil && !errors.As(err, &answered) {
		return &lostError{op: op, check: check, err: err}
	}
	return err
}

// lostError says cairn lost cairnd (it was stopped or killed, or the
// connection broke) while it followed an operation, whose outcome it
// therefore does not know.
type lostError struct {
	op    api.Operation
	check string
	err   error
}

func (e *lostError) Error() string {
	msg := fmt.Sprintf("lost cairnd while following operation %s (%s): %v; how it ended is unknown here: once cairnd answers again, `cairn operation %s` tells (an operation a cairnd restart cut short is undone, and answers failed with O02)",
		e.op.ID, e.op.Kind, e.err, e.op.ID)
	if e.check != "" {
		msg += fmt.Sprintf(`; see also %q`, e.check)
	}
	return msg
}

func (e *lostError) Unwrap() error { return e.err }

// errorJSON is the --json shape of an error: the API's, plus the operation
// id when following one was interrupted.
type errorJSON struct {
	Error struct {
		api.ErrorInfo
		Operation string `json:"operation,omitempty"`
	} `json:"error"`
}

// report prints err (if any) the way the options ask and returns the exit
// code for it.
func (g *globalOptions) report(cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	code := exitFailure
	var (
		ue  usageError
		ee  *exitError
		ie  *interruptedError
		le  *lostError
		opt string
	)
	switch {
	case errors.As(err, &ue):
		code = exitUsage
	case errors.As(err, &ee):
		code = ee.code
		err = ee.err
	case errors.As(err, &ie):
		code = exitInterrupted
		opt = ie.op.ID
	case errors.As(err, &le):
		opt = le.op.ID
	case errors.Is(err, context.Canceled):
		code = exitInterrupted
		err = errors.New("interrupted")
	}
	if err == nil {
		return code
	}
	if g.JSON {
		var out errorJSON
		out.Error.ErrorInfo = errorInfo(err)
		out.Error.Operation = opt
		g.printJSON(out)
	} else {
		fmt.Fprintln(g.stderr, formatError(err))
	}
	if code == exitUsage && cmd != nil {
		fmt.Fprintf(g.stderr, "\n%s", cmd.UsageString())
	}
	return code
}

// formatError is the human form of an error: "error CODE: message" for
// errors cairnd answered, "error: message" for the others.
// Messages are escaped (safe): they quote names and errors that a sandbox
// may have chosen.
func formatError(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return safe(ce.Error())
	}
	var local *errdefs.Error
	if errors.As(err, &local) {
		return safe("error " + local.Code + ": " + err.Error())
	}
	return "error: " + safe(err.Error())
}

// errorInfo is the --json form of an error; the code is empty for errors
// cairnd did not answer (daemon unreachable, bad usage, interrupted),
// except those the CLI found with cairnd's own checks (V02 for a number
// flag out of range).
func errorInfo(err error) api.ErrorInfo {
	var ce *client.Error
	if errors.As(err, &ce) {
		return api.ErrorInfo{Code: ce.Code, Message: ce.Message}
	}
	var local *errdefs.Error
	if errors.As(err, &local) {
		return api.ErrorInfo{Code: local.Code, Message: err.Error()}
	}
	return api.ErrorInfo{Message: err.Error()}
}

// groupArgs is the Args of a command that only groups subcommands: any
// argument is an unknown subcommand.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageError{errors.New(msg)}
}

// showHelp is the RunE of a command that only groups subcommands.
func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// exactArgs accepts exactly the named positional arguments (none if names
// is empty), with a message that says which is missing or extra.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usageErrorf("%q needs %s", cmd.CommandPath(), strings.Join(names[len(args):], " "))
		case len(args) > len(names) && len(names) == 0:
			return usageErrorf("%q takes no arguments, got %q", cmd.CommandPath(), args)
		case len(args) > len(names):
			return usageErrorf("%q takes only %s, got unexpected %q", cmd.CommandPath(), strings.Join(names, " "), args[len(names):])
		}
		return nil
	}
}

// optionalArgs accepts the positional arguments named by required, then up
// to len(optional) of those named by optional, with a message that says
// which is missing or extra.
func optionalArgs(required []string, optional ...string) cobra.PositionalArgs {
	all := append([]string(nil), required...)
	for _, o := range optional {
		all = append(all, "["+o+"]")
	}
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(required):
			return usageErrorf("%q needs %s", cmd.CommandPath(), strings.Join(required[len(args):], " "))
		case len(args) > len(all):
			return usageErrorf("%q takes only %s, got unexpected %q", cmd.CommandPath(), strings.Join(all, " "), args[len(all):])
		}
		return nil
	}
}
