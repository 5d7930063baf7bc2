package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/cairn-sandbox/cairn/api"
)

const mib = 1 << 20

// progressStream is made-up events as cairnd could stream them live: text
// only, then a step and three reports of the fetch phase, a note, a report
// of another phase, a step, a report and the result.
var progressStream = []api.Event{
	{Type: api.EventProgress, Data: "Stopping sandbox web"},
	{Type: api.EventProgress, Data: "Fetching checkpoint web/v2 from off-site", Progress: &api.Progress{Phase: api.PhaseFetch}},
	{Type: api.EventProgress, Data: "Fetched 10 MiB", Progress: &api.Progress{Phase: api.PhaseFetch, Done: 10 * mib, Total: 100 * mib, Unit: api.UnitBytes}},
	{Type: api.EventProgress, Data: "Fetched 42 MiB", Progress: &api.Progress{Phase: api.PhaseFetch, Done: 42 * mib, Total: 100 * mib, Unit: api.UnitBytes, Rate: 8 * mib}},
	{Type: api.EventProgress, Data: "Fetched 100 MiB", Progress: &api.Progress{Phase: api.PhaseFetch, Done: 100 * mib, Total: 100 * mib, Unit: api.UnitBytes, Rate: 8 * mib}},
	{Type: api.EventInfo, Data: "Memory images are not kept off-site", Progress: &api.Progress{Phase: api.PhaseFetch}},
	{Type: api.EventProgress, Data: "Verified 3", Progress: &api.Progress{Phase: api.PhaseVerify, Done: 3, Total: 8, Unit: api.UnitCheckpoints}},
	{Type: api.EventProgress, Data: "Removing files of sandbox web", Progress: &api.Progress{Phase: api.PhaseDelete}},
	// A phase still open when the operation ends.
	{Type: api.EventProgress, Data: "Verifying", Progress: &api.Progress{Phase: api.PhaseVerify, Done: 1204, Unit: api.UnitObjects, Locations: []api.LocationProgress{
		{Name: "local-disk", State: api.LocationDone, Done: 1204},
		{Name: "s3-eu", State: api.LocationUnavailable, Error: "connection refused"},
	}}},
	{Type: api.EventComplete},
}

func progressDaemon(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, api.Operation{ID: "op-p", Kind: "sandbox.delete", Status: api.OpRunning})
	})
	mux.HandleFunc("GET /v1/operations/op-p/events", func(w http.ResponseWriter, r *http.Request) {
		writeEvents(w, progressStream...)
	})
	return fakeDaemon(t, mux)
}

// Not on a terminal, a counted phase is one line, with its last counts,
// written when the phase ends; the rest is as before.
func TestProgressOneLinePerPhase(t *testing.T) {
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", progressDaemon(t), "delete", "web")
	want := "Stopping sandbox web\n" +
		"Fetching checkpoint web/v2 from off-site\n" +
		"Fetching from off-site… 100MiB / 100MiB (100%), 8MiB/s\n" +
		"Memory images are not kept off-site\n" +
		"Verifying… 3 / 8 checkpoints (37%)\n" +
		"Removing files of sandbox web\n" +
		"Verifying… 1204 objects — local-disk: done (1204 objects), s3-eu: unavailable (connection refused)\n"
	if code != exitOK || stdout != "Sandbox web deleted\n" || stderr != want {
		t.Errorf("exit %d, stdout %q\nstderr %q\nwant   %q", code, stdout, stderr, want)
	}
}

// With --json the events go out as they came, counts included.
func TestProgressJSONIsTheEvents(t *testing.T) {
	code, _, stderr := runCLI(t, context.Background(), "--socket", progressDaemon(t), "--json", "delete", "web")
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if code != exitOK || len(lines) != len(progressStream)-1 {
		t.Fatalf("exit %d, stderr %q; want %d lines", code, stderr, len(progressStream)-1)
	}
	for i, l := range lines {
		want, _ := json.Marshal(progressStream[i])
		if l != string(want) {
			t.Errorf("line %d: %s, want %s", i, l, want)
		}
	}
}

// On a terminal, a counted phase is redrawn in place (carriage return,
// erase the line) and gets its newline when the next event comes or
// following ends, before the result; lines are cut to the width.
func TestProgressTTY(t *testing.T) {
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer ptm.Close()
	defer tty.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 24, Cols: 60}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		var b bytes.Buffer
		sc := bufio.NewReader(ptm)
		for {
			line, err := sc.ReadString('\n')
			b.WriteString(line)
			if err != nil || strings.HasPrefix(line, "END") {
				break
			}
		}
		got <- b.String()
	}()
	var stdout bytes.Buffer
	g := newGlobalOptions(strings.NewReader(""), &stdout, tty)
	g.Socket = progressDaemon(t)
	if err := runDelete(context.Background(), deleteOptions{Name: "web"}, g); err != nil {
		t.Fatal(err)
	}
	tty.WriteString("END\n")
	var out string
	select {
	case out = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no output on the terminal")
	}
	const erase = "\r\x1b[K"
	want := "Stopping sandbox web\r\n" +
		"Fetching checkpoint web/v2 from off-site\r\n" +
		erase + "Fetching from off-site… 10MiB / 100MiB (10%)" +
		erase + "Fetching from off-site… 42MiB / 100MiB (42%), 8MiB/s" +
		erase + "Fetching from off-site… 100MiB / 100MiB (100%), 8MiB/s\r\n" +
		"Memory images are not kept off-site\r\n" +
		erase + "Verifying… 3 / 8 checkpoints (37%)\r\n" +
		"Removing files of sandbox web\r\n" +
		erase + "Verifying… 1204 objects — local-disk: done (1204 objects),…\r\n" + // cut to 59 columns
		"END\r\n"
	if out != want {
		t.Errorf("terminal got\n%q\nwant\n%q", out, want)
	}
	if stdout.String() != "Sandbox web deleted\n" {
		t.Errorf("stdout %q", stdout.String())
	}
}

func TestProgressLine(t *testing.T) {
	for _, c := range []struct {
		ev   api.Event
		want string
	}{
		{api.Event{Data: "Linked 300 applets", Progress: &api.Progress{Phase: api.PhaseImage, Done: 300, Total: 400, Unit: api.UnitFiles}},
			"Building image… 300 / 400 files (75%)"},
		{api.Event{Data: "Forked 2", Progress: &api.Progress{Phase: api.PhaseFork, Done: 2, Total: 3, Unit: api.UnitSandboxes, Rate: 1.5}},
			"Forking… 2 / 3 sandboxes (66%), 1.5/s"},
		{api.Event{Data: "Repairing a", Progress: &api.Progress{Phase: api.PhaseRepair, Unit: api.UnitObjects, Locations: []api.LocationProgress{
			{Name: "a", State: api.LocationRunning}, {Name: "b", State: api.LocationFailed, Done: 7, Total: 9, Error: "2 damaged"}}}},
			"Repairing… — a: running, b: failed (7 / 9 objects (77%); 2 damaged)"},
		{api.Event{Data: "Frobbed 3 of 4", Progress: &api.Progress{Phase: "frob", Done: 3, Total: 4}},
			"Frobbed 3 of 4"}, // a phase from a newer cairnd: its text
		{api.Event{Data: "x", Progress: &api.Progress{Phase: api.PhaseFetch, Done: 200, Total: 100, Unit: api.UnitBytes}},
			"Fetching from off-site… 200B / 100B (100%)"},
	} {
		if got := progressLine(c.ev); got != c.want {
			t.Errorf("%+v: %q, want %q", c.ev.Progress, got, c.want)
		}
	}
}
