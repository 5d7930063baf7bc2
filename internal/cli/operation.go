package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// operationOptions are the arguments of cairn operation.
type operationOptions struct {
	ID string
}

func newOperationCommand(g *globalOptions) *cobra.Command {
	var opts operationOptions
	return &cobra.Command{
		Use:   "operation ID",
		Short: "Show how an operation went",
		Long: `Show an operation of cairnd by its id: its kind, what it works on, and
whether it runs, succeeded or failed (with its error). The commands that
follow an operation name its id when they lose track of it (Ctrl-C, or cairnd
went away). An operation that a cairnd restart cut short answers failed, with
error O02, once cairnd is back and has undone it.`,
		Example: `  cairn operation 3f2a9c0d1e4b5a67
  cairn operation 3f2a9c0d1e4b5a67 --json`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			return runOperation(cmd.Context(), opts, g)
		},
	}
}

func runOperation(ctx context.Context, opts operationOptions, g *globalOptions) error {
	op, err := g.client().Operation(ctx, opts.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.printJSON(op)
	}
	g.printf("operation  %s\n", safe(op.ID))
	g.printf("kind       %s\n", safe(op.Kind))
	if op.Resource != "" {
		g.printf("on         %s\n", safe(op.Resource))
	}
	g.printf("status     %s\n", safe(op.Status))
	g.printf("started    %s\n", op.CreatedAt.Format("2006-01-02 15:04:05Z07:00"))
	g.printf("updated    %s\n", op.UpdatedAt.Format("2006-01-02 15:04:05Z07:00"))
	if op.Error != nil {
		g.printf("error      %s: %s\n", safe(op.Error.Code), safe(op.Error.Message))
	}
	return nil
}
