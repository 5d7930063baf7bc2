package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

func newImageCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Work with images",
		Long: `Images are the read-only root file systems sandboxes start from: the
built-in ones (busybox, debian, python, node), built the first time a
sandbox uses them, and images pulled from OCI or Docker registries (cairn
image pull).`,
		Example: `  cairn image list
  cairn image pull python:3.12
  cairn image info python-3.12`,
		Args: groupArgs,
		RunE: showHelp,
	}
	cmd.AddCommand(newImageListCommand(g), newImagePullCommand(g), newImageImportCommand(g), newImageBuildCommand(g), newImageInfoCommand(g), newImageDeleteCommand(g))
	cmd.AddCommand(newImagePruneCommand(g))
	return cmd
}

// imageListOptions are the flags of cairn image list (none yet).
type imageListOptions struct{}

func newImageListCommand(g *globalOptions) *cobra.Command {
	var opts imageListOptions
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List images",
		Long: `List the images sandboxes can start from, and whether each is ready
(built) or will be built on first use.`,
		Example: `  cairn image list
  cairn image list --json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImageList(cmd.Context(), opts, g)
		},
	}
}

func runImageList(ctx context.Context, _ imageListOptions, g *globalOptions) error {
	imgs, err := g.client().Images(ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		if imgs == nil {
			imgs = []api.Image{}
		}
		return g.printJSON(imgs)
	}
	t := newTable(g.stdout, "NAME", "READY", "DESCRIPTION")
	for _, img := range imgs {
		t.Row(img.Name, yesNo(img.Ready), img.Description)
	}
	return t.Flush()
}
