package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

func newOffsiteCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "offsite",
		Short: "What the account's off-site repository holds; import a lost host's checkpoints",
		Long: `The account's checkpoints are copied, encrypted, to its two off-site
locations. Each copy carries the checkpoint's metadata (sandbox, id,
trigger, comment, snapshot name, image), sealed with it, so that a new host
given only the key file and the two locations can list and restore what a
lost one kept there:

  cairn offsite list              what the repository holds, and what this host knows
  cairn offsite import --all      make checkpoints here for the rest

Imported checkpoints show in "cairn snapshot list" as snapshots of deleted
sandboxes, stored "off-site only", and restore from off-site:
"cairn snapshot restore ID NEW_NAME".`,
		Example: `  cairn offsite list
  cairn offsite import --all
  cairn snapshot restore 3f9c0a1b2c3d4e5f web`,
		Args: groupArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(newOffsiteListCommand(g), newOffsiteImportCommand(g))
	return cmd
}

func newOffsiteListCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the checkpoints the off-site repository holds",
		Long: `List every checkpoint of the account's off-site repository, oldest first,
as its manifest describes it, with the locations holding it. KNOWN is the
global id of the checkpoint here that names it; "-" means this host does
not know it ("cairn offsite import" makes it known). --json prints the list.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runOffsiteList(cmd.Context(), g) },
	}
}

func runOffsiteList(ctx context.Context, g *globalOptions) error {
	list, err := g.client().OffsiteCheckpoints(ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		if list == nil {
			list = []api.RemoteCheckpoint{}
		}
		return g.printJSON(list)
	}
	now := g.now()
	t := newTable(g.stdout, "MANIFEST", "SANDBOX", "ID", "NAME", "TRIGGER", "AGE", "COMMENT", "LOCATIONS", "KNOWN")
	for _, rc := range list {
		if rc.Error != "" {
			t.Row(short(rc.Manifest), "-", "-", "-", "-", formatAge(now, rc.CreatedAt), "("+rc.Error+")", strings.Join(rc.Locations, ","), "-")
			continue
		}
		t.Row(short(rc.Manifest), rc.Sandbox, rc.ID, orDash(rc.Name), rc.Trigger, formatAge(now, rc.CreatedAt), orDash(rc.Comment),
			strings.Join(rc.Locations, ","), orDash(rc.Checkpoint))
	}
	return t.Flush()
}

// offsiteImportOptions are the arguments and flags of cairn offsite import.
type offsiteImportOptions struct {
	All       bool
	Manifests []string
}

func newOffsiteImportCommand(g *globalOptions) *cobra.Command {
	var opts offsiteImportOptions
	cmd := &cobra.Command{
		Use:   "import (--all | MANIFEST...)",
		Short: "Make checkpoints here for what the off-site repository holds",
		Long: `Make a checkpoint here for each checkpoint of the off-site repository this
host does not know (--all), or for the manifests named (as "cairn offsite
list --json" gives them). Nothing is downloaded: an imported checkpoint has
no local copy and restores from off-site. A manifest written before
manifests carried metadata, or whose ids are taken here, is skipped with the
reason; a snapshot name taken here is dropped. --json prints the result.`,
		Example: `  cairn offsite import --all`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Manifests = args
			if opts.All == (len(args) > 0) {
				return usageErrorf("give --all or the manifests to import")
			}
			return runOffsiteImport(cmd.Context(), opts, g)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "import every checkpoint this host does not know")
	return cmd
}

func runOffsiteImport(ctx context.Context, opts offsiteImportOptions, g *globalOptions) error {
	res, err := g.client().ImportOffsite(ctx, api.ImportRequest{All: opts.All, Manifests: opts.Manifests})
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	for _, ck := range res.Imported {
		g.printf("Imported %s/%s (%s)%s\n", ck.Sandbox, ck.ID, ck.GlobalID, nameSuffix(ck.Name))
	}
	for _, n := range res.Notes {
		g.printf("Note: %s: %s\n", short(n.Manifest), n.Reason)
	}
	for _, s := range res.Skipped {
		g.printf("Skipped %s: %s\n", short(s.Manifest), s.Reason)
	}
	g.printf("%d imported, %d skipped\n", len(res.Imported), len(res.Skipped))
	return nil
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return ", snapshot " + name
}

// short is the first 12 characters of a manifest name, enough to tell
// them apart in a table.
func short(manifest string) string {
	if len(manifest) > 12 {
		return manifest[:12]
	}
	return manifest
}
