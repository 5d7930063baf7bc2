package cli

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

// servicesOptions are the arguments of cairn services.
type servicesOptions struct {
	Name string
}

func newServicesCommand(g *globalOptions) *cobra.Command {
	var opts servicesOptions
	return &cobra.Command{
		Use:   "services NAME",
		Short: "List the services of a running sandbox",
		Long: `List the services defined in the sandbox's /etc/cairn/services/*.json, with
their state (running, backoff, exited, failed), pid and restart count.
cairn-init starts them at every boot, after a restore and after a cold start,
and restarts them by their policy; processes started by hand are not
services. See docs/services.md.`,
		Example: `  cairn services web
  cairn services web --json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			return runServices(cmd.Context(), opts, g)
		},
	}
}

func runServices(ctx context.Context, opts servicesOptions, g *globalOptions) error {
	list, err := g.client().Services(ctx, opts.Name)
	if err != nil {
		return err
	}
	if g.JSON {
		if list == nil {
			list = []api.ServiceStatus{}
		}
		return g.printJSON(list)
	}
	t := newTable(g.stdout, "SERVICE", "STATE", "PID", "RESTARTS", "SINCE", "POLICY", "COMMAND")
	now := time.Now()
	for _, s := range list {
		pid := "-"
		if s.PID > 0 {
			pid = strconv.Itoa(s.PID)
		}
		state := s.State
		if s.ExitCode != nil && s.State != api.ServiceRunning {
			state += " (" + strconv.Itoa(*s.ExitCode) + ")"
		}
		t.Row(s.Name, state, pid, strconv.Itoa(s.Restarts), formatAge(now, s.Since), s.Restart, strings.Join(s.Cmd, " "))
	}
	return t.Flush()
}

// logsOptions are the arguments of cairn logs.
type logsOptions struct {
	Name, Service string
	Tail          int
}

func newLogsCommand(g *globalOptions) *cobra.Command {
	var opts logsOptions
	cmd := &cobra.Command{
		Use:   "logs NAME SERVICE",
		Short: "Show the end of a service's log",
		Long: `Show the end of /var/log/cairn/SERVICE.log in the sandbox: what the service
wrote, with a line from cairn-init at each start and exit. The log is read
inside the sandbox.

The log holds whatever the service wrote. On a terminal, control
characters other than newline and tab, escape sequences, bidirectional
controls and invalid UTF-8 are shown escaped (\x1b, \u202e, \xff), so
that the log cannot command your terminal; when stdout is not a terminal
(a pipe, a file) the bytes are written exactly as they are. --json prints
{sandbox, service, log}, and log_base64 (the exact bytes) as well when
the log is not valid UTF-8.`,
		Example: `  cairn logs web ticker
  cairn logs web ticker --tail-bytes 1048576`,
		Args: exactArgs("NAME", "SERVICE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.Service = args[0], args[1]
			return runLogs(cmd.Context(), opts, g)
		},
	}
	boundedIntVar(cmd.Flags(), &opts.Tail, "tail-bytes", 0, 0, api.MaxLogTail, "how much of the end of the log to show, in bytes (0: 64 KiB; at most 1048576)")
	return cmd
}

func runLogs(ctx context.Context, opts logsOptions, g *globalOptions) error {
	b, err := g.client().ServiceLogs(ctx, opts.Name, opts.Service, opts.Tail)
	if err != nil {
		return err
	}
	if g.JSON {
		out := logsJSON{Sandbox: opts.Name, Service: opts.Service, Log: string(b)}
		if !utf8.Valid(b) {
			out.LogBase64 = base64.StdEncoding.EncodeToString(b)
		}
		return g.printJSON(out)
	}
	if terminalFd(g.stdout) >= 0 {
		b = []byte(escapeText(string(b), true))
	}
	_, err = g.stdout.Write(b)
	return err
}

// logsJSON is the --json output of cairn logs. JSON strings hold text, so
// Log has U+FFFD for each byte that is not valid UTF-8; LogBase64 then
// holds the exact bytes.
type logsJSON struct {
	Sandbox   string `json:"sandbox"`
	Service   string `json:"service"`
	Log       string `json:"log"`
	LogBase64 string `json:"log_base64,omitempty"`
}
