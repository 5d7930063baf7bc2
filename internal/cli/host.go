package cli

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/cairn-sandbox/cairn/api"
)

func newHostCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "host",
		Short: "The hosts that share cairnd's metadata database",
		Long: `The hosts: every cairnd that shares one PostgreSQL database (cairnd
--database), each with its own pool; with SQLite, the one host. A request
may go to any host: one for a sandbox of another host is forwarded to it.
See docs/several-hosts.md.`,
	}
	cmd.AddCommand(newHostListCommand(g))
	return cmd
}

func newHostListCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the hosts with their state, load and sandboxes",
		Long: `List the hosts by name: their state (up, or down once their heartbeat
stopped for 10 s), the sandboxes running on each and its capacity
(cairnd --host-capacity; "-" for no bound), the sandboxes each holds (of
every account), the API address the others reach it at, and when it last
sent its heartbeat. The host that answered is marked with "*". Needs an
admin token (or the unix socket).`,
		Example: "  cairn host list\n  cairn host list --json",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := g.client().Hosts(cmd.Context())
			if err != nil {
				return err
			}
			if g.JSON {
				return g.printJSON(list)
			}
			t := newTable(g.stdout, "NAME", "STATE", "RUNNING", "SANDBOXES", "API", "HEARTBEAT")
			for _, h := range list {
				t.Row(hostName(h), h.State, load(h), strconv.Itoa(h.Sandboxes), orDash(h.API), formatTime(g.now(), h.HeartbeatAt))
			}
			return t.Flush()
		},
	}
}

func hostName(h api.Host) string {
	if h.This {
		return h.Name + " *"
	}
	return h.Name
}

// load is "RUNNING/CAPACITY", or "RUNNING/-" with no bound.
func load(h api.Host) string {
	c := "-"
	if h.Capacity > 0 {
		c = strconv.Itoa(h.Capacity)
	}
	return strconv.Itoa(h.Running) + "/" + c
}
