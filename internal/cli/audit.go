package cli

import (
	"github.com/spf13/cobra"
)

func newAuditCommand(g *globalOptions) *cobra.Command {
	var since, sandbox string
	var limit int
	cmd := &cobra.Command{
		Use:   "audit [--since 1h] [--sandbox NAME] [--limit N]",
		Short: "Show the changes made through the API: who, when, from where, what, how it went",
		Long: `Show the audit log: every change made through cairnd's API (create, delete,
start, stop, checkpoints, restores, forks, snapshots, networks, ports,
images, tokens and accounts), oldest first, with when, which token (its
name and id; "-" for the unix socket), from where, what on what, and the
outcome: ok, accepted (an operation started: cairn operation ID), or the
error code. A token sees its account's entries; an admin every one.
Entries are kept 90 days.`,
		Example: "  cairn audit --since 1h\n  cairn audit --sandbox web --json",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().Audit(cmd.Context(), since, sandbox, limit)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(list)
			}
			t := newTable(g.stdout, "WHEN", "ACCOUNT", "TOKEN", "FROM", "ACTION", "TARGET", "OUTCOME")
			for _, e := range list {
				tok := "-"
				if e.TokenID != "" {
					tok = e.TokenName + " (" + e.TokenID + ")"
				}
				acct := e.Account
				if acct == "" {
					acct = "-"
				}
				t.Row(formatTime(g.now(), e.At), acct, tok, e.Remote, e.Action, e.Target, e.Outcome)
			}
			return t.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&since, "since", "", "only entries since a duration back (1h, 30m) or a time (RFC 3339)")
	f.StringVar(&sandbox, "sandbox", "", "only entries of this sandbox (its checkpoints and ports included)")
	f.IntVar(&limit, "limit", 0, "only the newest N")
	return cmd
}
