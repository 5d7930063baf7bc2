package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

// Kinds of api.DiffEntry.
const (
	diffAdded   = "added"
	diffRemoved = "removed"
	diffChanged = "changed"
)

// diffOptions are the arguments of cairn diff.
type diffOptions struct {
	Name string
	From string // a checkpoint id
	To   string // a checkpoint id; "" is the current disk
	File string // --file: one file's text diff
}

func newDiffCommand(g *globalOptions) *cobra.Command {
	var opts diffOptions
	cmd := &cobra.Command{
		Use:   "diff NAME ID [ID2]",
		Short: "List the files that differ between two states of a sandbox",
		Long: `List the files added, changed and removed in sandbox NAME between its
checkpoint ID and its checkpoint ID2, or its current disk if ID2 is left
out. One line per file:

  A /path                     added
  D /path                     removed
  M /path (content, mode 0644 -> 0600, owner)
                              changed, and what changed: content, type,
                              mode, owner

A count of each goes to stderr. Paths holding control characters, invalid UTF-8 or bidirectional
controls are printed quoted, those characters escaped (\n, \x1b, \u202e). --json prints an array of {path, kind, what, mode}.

--file PATH prints how that one file changed instead, as a unified diff
(diff -u), its control characters escaped; a file that is not text, or
over 1 MiB, is only said to differ. --json prints {path, unified, binary,
too_large}.`,
		Example: `  cairn diff web v2
  cairn diff web v1 v2
  cairn diff web v2 --file /etc/app.conf
  cairn diff web v2 --json`,
		Args: optionalArgs([]string{"NAME", "ID"}, "ID2"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name, opts.From = args[0], args[1]
			if len(args) > 2 {
				opts.To = args[2]
			}
			if opts.File != "" {
				return runDiffFile(cmd.Context(), opts, g)
			}
			return runDiff(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().StringVar(&opts.File, "file", "", "show how this file changed (its absolute path in the sandbox), as diff -u does")
	return cmd
}

func runDiffFile(ctx context.Context, opts diffOptions, g *globalOptions) error {
	d, err := g.client().DiffFile(ctx, opts.Name, opts.From, opts.To, opts.File)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(d)
	}
	switch {
	case d.Binary:
		g.printf("%s: not a text file in one of the two states (binary, a link or a special file); only its content differs\n", safe(d.Path))
	case d.TooLarge:
		g.printf("%s: too large to show as text (over 1 MiB a side, or changed throughout)\n", safe(d.Path))
	case d.Unified == "":
		g.printf("%s: the same in both states\n", safe(d.Path))
	default:
		fmt.Fprint(g.stdout, escapeText(d.Unified, true))
	}
	return nil
}

func runDiff(ctx context.Context, opts diffOptions, g *globalOptions) error {
	entries, err := g.client().Diff(ctx, opts.Name, opts.From, opts.To)
	if err != nil {
		return err
	}
	if g.JSON {
		if entries == nil {
			entries = []api.DiffEntry{}
		}
		return g.printJSON(entries)
	}
	counts := map[string]int{}
	for _, e := range entries {
		counts[e.Kind]++
		g.printf("%s\n", formatDiffEntry(e))
	}
	g.eprintf("%d added, %d changed, %d removed\n", counts[diffAdded], counts[diffChanged], counts[diffRemoved])
	return nil
}

// formatDiffEntry renders one entry: "A /path", "D /path", "M /path
// (content, mode 0644 -> 0600)".
func formatDiffEntry(e api.DiffEntry) string {
	path := e.Path
	if needsQuote(path) {
		path = quoteText(path) // a newline must not look like another entry
	}
	switch e.Kind {
	case diffAdded:
		return "A " + path
	case diffRemoved:
		return "D " + path
	case diffChanged:
		if len(e.What) == 0 {
			return "M " + path
		}
		what := make([]string, len(e.What))
		for i, w := range e.What {
			what[i] = w
			if w == "mode" && e.Mode != "" {
				what[i] = "mode " + e.Mode
			}
		}
		return fmt.Sprintf("M %s (%s)", path, strings.Join(what, ", "))
	}
	return fmt.Sprintf("? %s (%s)", path, e.Kind)
}
