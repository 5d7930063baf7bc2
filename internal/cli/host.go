package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

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
	cmd.AddCommand(newHostListCommand(g), newHostEvacuateCommand(g))
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

func newHostEvacuateCommand(g *globalOptions) *cobra.Command {
	var req api.EvacuateRequest
	cmd := &cobra.Command{
		Use:   "evacuate NAME",
		Short: "Restore every sandbox of a host that is down on the hosts that are up",
		Long: `Restore each sandbox of host NAME, which is down (no heartbeat for 10 s;
cairn host list), on another host under its name and id, from its newest
checkpoint that has an off-site copy: with its processes if that
checkpoint holds memory and the sandbox ran, lazily (it starts at once and
its disk is fetched as it is read; --whole waits for the whole disk).
Without --to each goes to the host that is up and runs the fewest
sandboxes; --to HOST puts them all there. Sandboxes of every account are
restored; a sandbox with no off-site checkpoint stays on NAME, "host
down". The checkpoints that only NAME's pool holds (not off-site yet)
are listed as lost. When NAME comes back it stops its stale copies. Needs
an admin token (or the unix socket). See docs/several-hosts.md.

--json prints the report: each sandbox with the host it is on now, the
checkpoint it was restored from and its lost checkpoints. cairn exits
with 1 when a sandbox was not restored.`,
		Example: "  cairn host evacuate a\n  cairn host evacuate a --to c\n  cairn --json host evacuate a",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.client()
			op, err := c.EvacuateHost(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			raw, err := follow(cmd.Context(), c, op, "", g)
			if err != nil {
				return err
			}
			var rep api.EvacuationReport
			if err := json.Unmarshal(raw, &rep); err != nil {
				return fmt.Errorf("operation %s: bad result: %w", op.ID, err)
			}
			if g.JSON {
				if err := g.printJSON(rep); err != nil {
					return err
				}
			} else {
				for _, ev := range rep.Sandboxes {
					printEvacuated(g, ev)
				}
				sandboxes := fmt.Sprintf("%d sandboxes", rep.Restored)
				if rep.Restored == 1 {
					sandboxes = "1 sandbox"
				}
				g.printf("Host %s: %s restored, %d not; %s lost (only on %s)\n", rep.Host, sandboxes, rep.Failed, plural(rep.Lost, "checkpoint"), rep.Host)
			}
			if rep.Failed > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.To, "to", "", "restore every sandbox on this host (default: spread over the hosts that are up)")
	f.BoolVar(&req.Whole, "whole", false, wholeUsage)
	return cmd
}

// printEvacuated prints what became of one sandbox of a lost host.
func printEvacuated(g *globalOptions, ev api.Evacuated) {
	name := ev.Name
	if ev.Account != "" && ev.Account != "default" {
		name = ev.Account + "/" + ev.Name
	}
	if ev.Error != nil {
		g.printf("%s: not restored (%s %s); it stays on %s\n", name, ev.Error.Code, ev.Error.Message, ev.Host)
	} else {
		how := []string{ev.State}
		if ev.Memory {
			how = append(how, "its processes resumed")
		}
		if ev.Lazy {
			how = append(how, "its disk filled as it is read")
		}
		g.printf("%s: restored on %s from %s (%s)\n", name, ev.Host, ev.Checkpoint, strings.Join(how, ", "))
	}
	if len(ev.Lost) > 0 {
		ids := make([]string, len(ev.Lost))
		for i, l := range ev.Lost {
			ids[i] = l.ID + " (" + l.GlobalID + ")"
		}
		g.printf("  lost, only in the lost host's pool: %s\n", strings.Join(ids, ", "))
	}
}
