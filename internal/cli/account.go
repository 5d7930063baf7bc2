package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

func newAccountCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "account",
		Short: "Show your account's disk use and limit; manage accounts (admin)",
		Long: `Show your account: its name, the disk space its sandboxes and checkpoints
use in the pool against its disk limit, and how many sandboxes and
checkpoints (automatic ones and those of deleted sandboxes included) it
has, and how many of them are in each off-site state in which locations.

disk counts data shared between sandboxes and checkpoints once; images are
not counted. Past the limit, creating sandboxes or checkpoints fails with
L04 and nothing already stored is touched.

--json prints the account object.

An admin manages the host's accounts with the subcommands: create, list,
show, set, delete (and their tokens with cairn token).`,
		Example: `  cairn account
  cairn account --json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAccount(cmd.Context(), g)
		},
	}
	cmd.AddCommand(accountSubcommands(g)...)
	return cmd
}

func runAccount(ctx context.Context, g *globalOptions) error {
	acct, err := g.client().Account(ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(acct)
	}
	t := newTable(g.stdout)
	t.Row("account", acct.Name)
	t.Row("disk", formatAccountDisk(acct))
	if acct.Pool != nil {
		t.Row("pool", formatPool(*acct.Pool))
	}
	t.Row("sandboxes", fmt.Sprint(acct.Sandboxes))
	t.Row("checkpoints", fmt.Sprint(acct.Checkpoints))
	t.Row("off-site", formatAccountOffsite(acct))
	return t.Flush()
}

// formatAccountOffsite renders how many checkpoints are in which off-site
// state: "primary, secondary: 12 uploaded ×2, 1 uploading", or "off".
func formatAccountOffsite(acct api.AccountInfo) string {
	if acct.OffsiteLocations == nil {
		return "off"
	}
	var parts []string
	for _, state := range []string{"uploaded ×2", "uploaded ×1", "uploading", "pending", "failed", "unstorable", "uploaded"} {
		if n := acct.Offsite[state]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, state))
		}
	}
	if len(parts) == 0 {
		parts = []string{"no checkpoints yet"}
	}
	return strings.Join(acct.OffsiteLocations, ", ") + ": " + strings.Join(parts, ", ")
}

// formatPool renders how full the pool is: "3.1GiB used of 18GiB for
// sandboxes and checkpoints (2GiB reserved), 16GiB free", then the warning
// when it runs low.
func formatPool(p api.PoolSpace) string {
	s := formatSize(p.Used) + " used"
	if p.Limit > 0 {
		s += fmt.Sprintf(" of %s for sandboxes and checkpoints (%s reserved)", formatSize(p.Limit), formatSize(p.Reserve))
	}
	s += ", " + formatSize(p.Free) + " free"
	if p.Low {
		s += "; LOW: " + p.Note
	}
	return s
}

// formatAccountDisk renders an account's disk use against its limit:
// "1.2GiB used of 50GiB limit (2.4%)", or "1.2GiB used (no limit)".
func formatAccountDisk(acct api.AccountInfo) string {
	if acct.DiskLimit <= 0 {
		return formatSize(acct.DiskUsed) + " used (no limit)"
	}
	pct := float64(acct.DiskUsed) * 100 / float64(acct.DiskLimit)
	return fmt.Sprintf("%s used of %s limit (%.1f%%)", formatSize(acct.DiskUsed), formatSize(acct.DiskLimit), pct)
}
