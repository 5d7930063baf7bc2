package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"golang.org/x/term"

	"github.com/cairn-sandbox/cairn/api"
)

// eventPrinter writes the events of an operation cairn follows to stderr.
// With --json each event is a JSON line, as received. Otherwise each
// event's text is a line, except events with counts (api.Progress): those
// show as one line per phase, "Fetching from off-site… 42MiB / 100MiB
// (42%)", redrawn in place on a terminal and written once, with the final
// counts, when the phase ends otherwise. Texts are escaped (safe), JSON
// lines made terminal-safe (safeJSON).
type eventPrinter struct {
	w     io.Writer
	json  bool
	fd    int    // stderr's terminal, or -1
	phase string // phase of the counted line open, "" when none
	line  string // that line
}

// events returns a printer of operation events to g's stderr. The caller
// calls end when the operation is followed, before printing its result.
func (g *globalOptions) events() *eventPrinter {
	return &eventPrinter{w: g.stderr, json: g.JSON, fd: terminalFd(g.stderr)}
}

// print writes one event.
func (p *eventPrinter) print(ev api.Event) {
	if p.json {
		if b, err := json.Marshal(ev); err == nil {
			fmt.Fprintf(p.w, "%s\n", safeJSON(b))
		}
		return
	}
	if ev.Type == api.EventProgress && ev.Progress != nil && ev.Progress.Counted() {
		if p.phase != ev.Progress.Phase {
			p.end()
		}
		p.phase, p.line = ev.Progress.Phase, safe(progressLine(ev))
		if p.fd >= 0 {
			fmt.Fprintf(p.w, "\r\x1b[K%s", p.fit(p.line))
		}
		return
	}
	p.end()
	switch d := ev.Data.(type) {
	case nil:
	case string:
		fmt.Fprintln(p.w, safe(d))
	default:
		b, _ := json.Marshal(d)
		fmt.Fprintf(p.w, "%s\n", safeJSON(b))
	}
}

// end closes the counted line open, if any: on a terminal it is on the
// screen already and gets its newline; otherwise it is written now.
func (p *eventPrinter) end() {
	if p.phase == "" {
		return
	}
	if p.fd >= 0 {
		fmt.Fprintln(p.w)
	} else {
		fmt.Fprintln(p.w, p.line)
	}
	p.phase, p.line = "", ""
}

// fit cuts s to the terminal's width, so that a carriage return goes back
// to its start.
func (p *eventPrinter) fit(s string) string {
	w, _, err := term.GetSize(p.fd)
	if err != nil || w <= 1 {
		return s
	}
	if r := []rune(s); len(r) > w-1 {
		return string(r[:w-2]) + "…"
	}
	return s
}

// phaseTitles name the phases (api.Phase*) on counted lines.
var phaseTitles = map[string]string{
	api.PhaseImage:      "Building image",
	api.PhaseCreate:     "Creating",
	api.PhaseCheckpoint: "Checkpointing",
	api.PhaseQuiesce:    "Quiescing file systems",
	api.PhaseSnapshot:   "Snapshotting the disk",
	api.PhaseMemory:     "Saving memory",
	api.PhaseSafety:     "Taking a safety checkpoint",
	api.PhaseWait:       "Waiting",
	api.PhaseStop:       "Stopping",
	api.PhaseFetch:      "Fetching from off-site",
	api.PhaseSwap:       "Swapping in the checkpoint",
	api.PhaseStart:      "Starting",
	api.PhaseResume:     "Resuming processes",
	api.PhaseFork:       "Forking",
	api.PhaseDelete:     "Deleting",
	api.PhaseVerify:     "Verifying",
	api.PhaseRepair:     "Repairing",
	api.PhaseDone:       "Done",
}

// progressLine renders a counted event: the phase's title, its counts and
// its locations' states. A phase cairn does not know shows the event's text.
func progressLine(ev api.Event) string {
	p := ev.Progress
	title, ok := phaseTitles[p.Phase]
	if !ok {
		s, _ := ev.Data.(string)
		return s
	}
	var b strings.Builder
	b.WriteString(title + "…")
	if c := formatCounts(p.Done, p.Total, p.Unit); c != "" {
		b.WriteString(" " + c)
	}
	if p.Rate > 0 {
		if p.Unit == api.UnitBytes {
			b.WriteString(", " + formatSize(int64(p.Rate)) + "/s")
		} else {
			b.WriteString(", " + strconv.FormatFloat(p.Rate, 'f', 1, 64) + "/s")
		}
	}
	for i, l := range p.Locations {
		if i == 0 {
			b.WriteString(" — ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(l.Name + ": " + l.State)
		var detail []string
		if c := formatCounts(l.Done, l.Total, p.Unit); c != "" {
			detail = append(detail, c)
		}
		if l.Error != "" {
			detail = append(detail, l.Error)
		}
		if len(detail) > 0 {
			b.WriteString(" (" + strings.Join(detail, "; ") + ")")
		}
	}
	return b.String()
}

// formatCounts renders done of total units: "42MiB / 100MiB (42%)",
// "3 / 8 sandboxes (37%)", "1204 objects"; "" when both are 0.
func formatCounts(done, total int64, unit string) string {
	if done == 0 && total == 0 {
		return ""
	}
	n := func(v int64) string {
		if unit == api.UnitBytes {
			return formatSize(v)
		}
		return strconv.FormatInt(v, 10)
	}
	suffix := ""
	if unit != "" && unit != api.UnitBytes {
		suffix = " " + unit
	}
	if total <= 0 {
		return n(done) + suffix
	}
	pct := done * 100 / total
	pct = max(0, min(pct, 100))
	return fmt.Sprintf("%s / %s%s (%d%%)", n(done), n(total), suffix, pct)
}
