package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

func newEventsCommand(g *globalOptions) *cobra.Command {
	var since int64
	var follow bool
	cmd := &cobra.Command{
		Use:   "events NAME [--follow] [--since SEQ]",
		Short: "Show what happened to a sandbox: state changes, crashes, OOM kills, checkpoints, fills",
		Long: `Show a sandbox's events, oldest first: its state changes (running,
stopped, crashed), crashes with their reason, processes its memory limit
killed, checkpoints taken, a lazy restore's fill (its progress, data that
cannot be fetched now, its end), its creation and deletion. cairnd keeps the last
256 of each sandbox while it runs; a restart of cairnd starts the stream
again, empty (what must last, the last crash and the last OOM kill, is in
cairn info).

--follow goes on with each new event as it comes, until ^C or the sandbox
is deleted (and fails if cairnd stops). --since SEQ shows only the events
after sequence number SEQ (the first column; they keep growing across
restarts of cairnd). --json prints one JSON object a line (NDJSON, as the
API streams them).`,
		Example: "  cairn events web\n  cairn events web --follow\n  cairn events web --since 42 --json",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if since < 0 {
				return usageErrorf("--since %d: want a sequence number, 0 or more", since)
			}
			err := g.client().SandboxEvents(cmd.Context(), args[0], since, follow, func(ev api.SandboxActivity) error {
				if g.JSON {
					b, err := json.Marshal(ev)
					if err != nil {
						return err
					}
					_, err = g.stdout.Write(safeJSON(append(bytes.TrimSpace(b), '\n')))
					return err
				}
				g.printf("%d  %s  %-10s %s\n", ev.Seq, ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Type, describeActivity(ev))
				return nil
			})
			if follow && errors.Is(err, context.Canceled) {
				return nil // ^C ends a follow
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "go on with new events as they come")
	cmd.Flags().Int64Var(&since, "since", 0, "only the events after this sequence number")
	return cmd
}

// describeActivity is the last column of an event's line.
func describeActivity(ev api.SandboxActivity) string {
	switch ev.Type {
	case api.ActivityState:
		return ev.State
	case api.ActivityCheckpoint:
		return fmt.Sprintf("%s (%s)", ev.Checkpoint, ev.What)
	default:
		return ev.What
	}
}
