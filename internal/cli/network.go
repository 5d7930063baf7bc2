package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cairn-sandbox/cairn/api"
)

// networkHelp explains modes and rules, for create and network set.
const networkHelp = `--network is the sandbox's network mode: egress (the default: outbound
connections under its rules, through its own network namespace and NAT) or
none (loopback only).
--allow and --deny take IPv4 addresses, CIDRs and domain patterns
(example.com, *.example.com for every name under it), each flag once per
entry or comma-separated. The most specific CIDR wins, deny on a tie; an
address the sandbox's resolver returned for an allowed name is reachable
whatever the CIDRs say; a denied name does not resolve. Private ranges,
link-local and metadata addresses (169.254.169.254) are refused unless a
rule allows them; the host itself and other sandboxes never are. Denied
connections fail at once (connection refused).`

// networkFlags are the network flags of create and network set.
type networkFlags struct {
	mode        string
	allow, deny []string
}

func (n *networkFlags) register(f *pflag.FlagSet, modeFlag string) {
	f.StringVar(&n.mode, modeFlag, "", "network mode: egress or none")
	f.StringSliceVar(&n.allow, "allow", nil, "IPv4 address, CIDR or domain pattern the sandbox may reach (repeatable)")
	f.StringSliceVar(&n.deny, "deny", nil, "IPv4 address, CIDR or domain pattern the sandbox may not reach (repeatable)")
}

// change is what the flags given say; nil when none was given.
func (n *networkFlags) change(f *pflag.FlagSet, modeFlag string) (*api.NetworkChange, error) {
	if n.mode != "" && n.mode != "egress" && n.mode != "none" {
		return nil, usageErrorf("--%s %q: want egress or none", modeFlag, n.mode)
	}
	ch := &api.NetworkChange{Mode: n.mode}
	if f.Changed("allow") {
		list := trimEntries(n.allow)
		ch.Allow = &list
	}
	if f.Changed("deny") {
		list := trimEntries(n.deny)
		ch.Deny = &list
	}
	if ch.Mode == "" && ch.Allow == nil && ch.Deny == nil {
		return nil, nil
	}
	return ch, nil
}

func trimEntries(in []string) []string {
	out := []string{}
	for _, e := range in {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func newNetworkCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "network",
		Short: "Show or change a sandbox's network",
		Long: `Show or change a sandbox's network mode and rules (docs/networking.md).

` + networkHelp,
	}
	cmd.AddCommand(newNetworkShowCommand(g), newNetworkSetCommand(g))
	return cmd
}

func newNetworkShowCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "show NAME",
		Short:   "Show a sandbox's network mode, rules and addresses",
		Example: "  cairn network show web\n  cairn network show web --json",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := g.client().Sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			n := sb.Network
			if n == nil {
				n = &api.Network{Mode: "none"}
			}
			if g.JSON {
				return g.printJSON(n)
			}
			printNetwork(g, sb.State, *n)
			return nil
		},
	}
}

func printNetwork(g *globalOptions, state string, n api.Network) {
	t := newTable(g.stdout)
	t.Row("mode", n.Mode)
	t.Row("allow", orDash(safeJoin(n.Allow)))
	t.Row("deny", orDash(safeJoin(n.Deny)))
	active := n.Active
	switch {
	case active == "":
		active = "- (" + state + ")"
	case active != n.Mode && n.Mode == "egress":
		active += " (egress from the next boot: cairn restart)"
	case active != n.Mode:
		active += " (blocked: everything is refused until the next boot)"
	}
	t.Row("active", active)
	t.Row("address", orDash(n.Address))
	t.Row("gateway, DNS", orDash(n.Gateway))
	t.Flush()
}

// safeJoin joins rules for a terminal, with anything odd quoted.
func safeJoin(list []string) string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = safe(e)
	}
	return strings.Join(out, ", ")
}

func newNetworkSetCommand(g *globalOptions) *cobra.Command {
	var flags networkFlags
	var clear bool
	cmd := &cobra.Command{
		Use:   "set NAME [--mode egress|none] [--allow ENTRY…] [--deny ENTRY…] [--clear]",
		Short: "Change a sandbox's network mode or rules",
		Long: `Change a sandbox's network mode or rules. Rules change at once, for new
connections, without a restart (connections already open stay). A list
given replaces the sandbox's list; --clear empties both lists first.
A change to mode none blocks everything at once; a change from none to
egress takes effect when the sandbox next boots (cairn restart NAME).

` + strings.Replace(networkHelp, "--network is", "--mode is", 1),
		Example: `  cairn network set web --deny 0.0.0.0/0 --allow '*.github.com' --allow pypi.org
  cairn network set web --allow 10.0.5.0/24
  cairn network set web --clear
  cairn network set web --mode none`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ch, err := flags.change(cmd.Flags(), "mode")
			if err != nil {
				return err
			}
			if clear {
				if ch == nil {
					ch = &api.NetworkChange{}
				}
				empty := []string{}
				if ch.Allow == nil {
					ch.Allow = &empty
				}
				if ch.Deny == nil {
					ch.Deny = &empty
				}
			}
			if ch == nil {
				return usageErrorf("nothing to change: give --mode, --allow, --deny or --clear")
			}
			return runNetworkSet(cmd.Context(), g, args[0], ch)
		},
	}
	flags.register(cmd.Flags(), "mode")
	cmd.Flags().BoolVar(&clear, "clear", false, "empty the allow and deny lists (before --allow and --deny)")
	return cmd
}

func runNetworkSet(ctx context.Context, g *globalOptions, name string, ch *api.NetworkChange) error {
	sb, err := g.client().ConfigureSandbox(ctx, name, api.ConfigureSandboxRequest{Network: ch})
	if err != nil {
		return err
	}
	n := sb.Network
	if n == nil {
		return fmt.Errorf("cairnd answered without the sandbox's network")
	}
	if g.JSON {
		return g.printJSON(n)
	}
	g.printf("Sandbox %s: network changed\n", safe(name))
	printNetwork(g, sb.State, *n)
	return nil
}

// formatNetwork is a sandbox's network in one line, for info.
func formatNetwork(n *api.Network) string {
	if n == nil {
		return "-"
	}
	s := n.Mode
	if len(n.Allow) > 0 {
		s += "; allow " + safeJoin(n.Allow)
	}
	if len(n.Deny) > 0 {
		s += "; deny " + safeJoin(n.Deny)
	}
	if n.Active != "" && n.Active != n.Mode {
		s += " (running with " + n.Active + " until it boots again)"
	}
	return s
}
