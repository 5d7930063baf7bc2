package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// imagePruneOptions are the flags of cairn image prune (none yet).
type imagePruneOptions struct{}

func newImagePruneCommand(g *globalOptions) *cobra.Command {
	var opts imagePruneOptions
	return &cobra.Command{
		Use:   "prune",
		Short: "Empty the layer cache",
		Long: `Delete every entry of cairnd's layer cache: the trees of layer chains that
pulls keep, so that a later pull of an image sharing its bottom layers with
one pulled before fetches only the layers above them. Images and sandboxes
lose nothing (each is a snapshot of its own); the next pull fetches every
layer again.`,
		Example: `  cairn image prune
  cairn image prune --json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImagePrune(cmd.Context(), opts, g)
		},
	}
}

func runImagePrune(ctx context.Context, _ imagePruneOptions, g *globalOptions) error {
	res, err := g.client().PruneImages(ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(res)
	}
	g.printf("removed %d layer cache entries\n", res.Removed)
	return nil
}
