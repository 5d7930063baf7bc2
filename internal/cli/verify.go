package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

// verifyOptions are the flags of cairn verify.
type verifyOptions struct {
	Offsite  bool
	Location string
	NoRepair bool
}

func newVerifyCommand(g *globalOptions) *cobra.Command {
	var opts verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [--offsite [--location L]]",
		Short: "Check that the account's checkpoints are intact",
		Long: `Check the account's checkpoints.

Without --offsite, every checkpoint's local disk (and memory image, if it
has one) must be there (the data itself is checksummed by btrfs: btrfs scrub).

With --offsite, every object of the account's off-site repository is read
back from each location (or from --location L alone): heads, index
segments and manifests are authenticated and decoded, every pack is
checked against its name, every chunk authenticated, decompressed and
checked against its id, and every chunk a checkpoint needs must be in an
intact pack. An object that is damaged or missing in one location is
copied from the other, checked first (--no-repair only reports). This
reads the whole repository: it takes as long as downloading it.

Progress goes to stderr. The exit status is 0 when everything is intact
(after repairs), 1 otherwise. --json prints the report.`,
		Example: `  cairn verify
  cairn verify --offsite
  cairn verify --offsite --location secondary --no-repair`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Location != "" && !opts.Offsite {
				return usageErrorf("--location is for --offsite")
			}
			if opts.NoRepair && !opts.Offsite {
				return usageErrorf("--no-repair is for --offsite")
			}
			return runVerify(cmd.Context(), opts, g)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Offsite, "offsite", false, "verify the off-site locations instead of the local checkpoints")
	f.StringVar(&opts.Location, "location", "", "verify only this off-site location")
	f.BoolVar(&opts.NoRepair, "no-repair", false, "report damage without repairing it from the other location")
	return cmd
}

func runVerify(ctx context.Context, opts verifyOptions, g *globalOptions) error {
	c := g.client()
	op, err := c.Verify(ctx, api.VerifyRequest{Offsite: opts.Offsite, Location: opts.Location, NoRepair: opts.NoRepair})
	if err != nil {
		return err
	}
	events := g.events()
	rep, err := c.WaitVerify(ctx, op, events.print)
	events.end()
	if err != nil {
		return followError(ctx, op, "", err)
	}
	if g.JSON {
		if err := g.printJSON(rep); err != nil {
			return err
		}
	} else {
		printVerifyReport(g, rep)
	}
	if !rep.OK {
		return &exitError{code: exitFailure}
	}
	return nil
}

// printVerifyReport prints what a verify found, a block per location.
func printVerifyReport(g *globalOptions, rep api.VerifyReport) {
	if rep.Locations == nil {
		g.printf("%d checkpoints checked: %s\n", rep.Checkpoints, okOrProblems(len(rep.Problems)))
		for _, p := range rep.Problems {
			g.printf("  %s\n", p)
		}
		return
	}
	for _, l := range rep.Locations {
		state := okOrProblems(len(l.Problems))
		switch {
		case l.Error != "":
			state = "not verified: " + l.Error
		case len(l.Problems) > 0 && l.OK:
			state = fmt.Sprintf("%d problems, repaired (%d objects copied from the other location)", len(l.Problems), len(l.Repaired))
		}
		g.printf("%s: %d objects, %s: %s\n", l.Name, l.Objects, formatSize(l.Bytes), state)
		for _, p := range l.Problems {
			g.printf("  %s\n", p)
		}
	}
}

func okOrProblems(n int) string {
	if n == 0 {
		return "intact"
	}
	return fmt.Sprintf("%d problems", n)
}
