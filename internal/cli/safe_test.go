package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/cairn-sandbox/cairn/api"
)

func TestEscapeText(t *testing.T) {
	for _, tc := range []struct {
		in, line, multi string
	}{
		{"plain text, ünïcødé ✓ 日本", "plain text, ünïcødé ✓ 日本", "plain text, ünïcødé ✓ 日本"},
		{"a\tb\nc\r", `a\tb\nc\r`, "a\tb\nc\\r"},
		{"\x1b[2K\r\x1b[31mFORGED", `\x1b[2K\r\x1b[31mFORGED`, `\x1b[2K\r\x1b[31mFORGED`},
		{"\x1b]52;c;aGk=\a", `\x1b]52;c;aGk=\x07`, `\x1b]52;c;aGk=\x07`},
		{"nul\x00del\x7f", `nul\x00del\x7f`, `nul\x00del\x7f`},
		{"c1 \u009b31m \u0085", `c1 \u009b31m \u0085`, `c1 \u009b31m \u0085`},
		{"bad \xff\xc3 utf8", `bad \xff\xc3 utf8`, `bad \xff\xc3 utf8`},
		{"abc\u202egnp.exe", `abc\u202egnp.exe`, `abc\u202egnp.exe`},
		{"\u2066iso\u2069 \u200f \u061c \u2028", `\u2066iso\u2069 \u200f \u061c \u2028`, `\u2066iso\u2069 \u200f \u061c \u2028`},
		{"real \ufffd stays", "real \ufffd stays", "real \ufffd stays"},
		{`back\slash`, `back\slash`, `back\slash`},
	} {
		if got := escapeText(tc.in, false); got != tc.line {
			t.Errorf("escapeText(%q, false) = %q, want %q", tc.in, got, tc.line)
		}
		if got := escapeText(tc.in, true); got != tc.multi {
			t.Errorf("escapeText(%q, true) = %q, want %q", tc.in, got, tc.multi)
		}
	}
}

func TestSafeJSONKeepsTheText(t *testing.T) {
	in := map[string]string{"s": "\x1b[31m\x7f\u009b\u202e\u2028<&>ok ✓"}
	b, _ := json.Marshal(in)
	out := safeJSON(b)
	if i := terminalHazard(string(out), false); i >= 0 {
		t.Errorf("safeJSON left a hazard at %d: %q", i, out)
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, in) {
		t.Errorf("round trip: %q (%v), want %q", back, err, in)
	}
}

// terminalHazard returns the index of the first byte in s a terminal
// could obey (a control character other than newline, and tab when
// allowTab; DEL; a C1 or bidirectional control; invalid UTF-8), or -1.
func terminalHazard(s string, allowTab bool) int {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
			return i
		case r == '\n', r == '\t' && allowTab:
		case r < 0x20, r == 0x7f, isC1OrBidi(r):
			return i
		}
	}
	return -1
}

// evil is what a hostile sandbox writes into every string it controls:
// erase the line and forge another, set the clipboard (OSC 52), a C1 CSI,
// DEL, a right-to-left override, a newline and a tab.
const evil = "\x1b[2K\r\x1b[31mFORGED\x1b]52;c;aGk=\a\u009b1m\x7f\u202eexe.txt\nline2\tx"

// hostileDaemon answers every listing with evil in each string field a
// sandbox can set, and errors quoting evil.
func hostileDaemon(t *testing.T, logBytes []byte) string {
	exit := 3
	ck := api.Checkpoint{ID: "v0", GlobalID: "ck-1", Sandbox: "web", Name: "snap" + evil, Trigger: api.TriggerManual,
		Consistency: "frozen", Comment: evil, Label: evil, Image: "img" + evil, CreatedAt: testNow,
		Offsite: "pending" + evil, OffsiteDetail: &api.OffsiteDetail{Error: evil,
			Locations: []api.OffsiteLocation{{Name: "loc" + evil, State: "failed", Error: evil}}}}
	sb := api.Sandbox{Name: "web", ID: "id" + evil, State: "running" + evil, Image: "img" + evil,
		Parent: evil, Container: evil, CurrentCheckpoint: evil, SourceCheckpoint: evil, AutoCheckpointNote: evil, CreatedAt: testNow}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []api.Sandbox{sb}) })
	mux.HandleFunc("GET /v1/sandboxes/web", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, sb) })
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []api.Checkpoint{ck})
	})
	mux.HandleFunc("GET /v1/sandboxes/web/checkpoints/v0", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, ck) })
	mux.HandleFunc("GET /v1/snapshots", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []api.Checkpoint{ck}) })
	mux.HandleFunc("GET /v1/images", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []api.Image{{Name: "img" + evil, Description: evil}})
	})
	mux.HandleFunc("GET /v1/sandboxes/web/services", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []api.ServiceStatus{{Name: "svc" + evil, State: api.ServiceFailed + evil, ExitCode: &exit,
			Since: testNow, Restart: evil, Cmd: []string{"/bin/sh", "-c", evil}, Error: evil}})
	})
	mux.HandleFunc("GET /v1/sandboxes/web/services/svc/logs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(logBytes)
	})
	mux.HandleFunc("GET /v1/sandboxes/web/diff", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []api.DiffEntry{{Path: "/tmp/" + evil, Kind: "added"},
			{Path: "/etc/x", Kind: "changed", What: []string{"mode"}, Mode: evil}, {Path: "/y", Kind: evil}})
	})
	mux.HandleFunc("GET /v1/sandboxes/bad", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusInternalServerError, api.CodeAgentUnreachable, "service failed: "+evil)
	})
	return fakeDaemon(t, mux)
}

// TestHumanOutputEscapesSandboxStrings runs every command that shows
// strings a sandbox controls against a daemon that answers escape
// sequences in all of them: the human output holds no control byte but
// newlines, while the evil text is still there, escaped.
func TestHumanOutputEscapesSandboxStrings(t *testing.T) {
	sock := hostileDaemon(t, nil)
	for _, args := range [][]string{
		{"list"}, {"info", "web"}, {"status", "web"},
		{"checkpoint", "list", "web"}, {"checkpoint", "info", "web", "v0"},
		{"snapshot", "list"}, {"image", "list"}, {"services", "web"},
		{"diff", "web", "v0"}, {"info", "bad"},
	} {
		code, stdout, stderr := runCLI(t, context.Background(), append([]string{"--socket", sock}, args...)...)
		if code != exitOK && args[1] != "bad" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
		for name, out := range map[string]string{"stdout": stdout, "stderr": stderr} {
			if i := terminalHazard(out, false); i >= 0 {
				t.Errorf("%v: raw control character in %s at %d: %q", args, name, i, out)
			}
		}
		if !strings.Contains(stdout+stderr, `\x1b[2K\r\x1b[31mFORGED\x1b]52;c;aGk=\x07\u009b1m\x7f\u202eexe.txt`) {
			t.Errorf("%v: the escaped text is missing:\n%s%s", args, stdout, stderr)
		}
	}
}

// TestJSONOutputCarriesExactStrings: --json gives back the daemon's
// strings exactly, and none of their hazards reaches the terminal raw.
func TestJSONOutputCarriesExactStrings(t *testing.T) {
	sock := hostileDaemon(t, nil)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "--json", "checkpoint", "info", "web", "v0")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if i := terminalHazard(stdout, false); i >= 0 {
		t.Errorf("raw hazard in JSON at %d: %q", i, stdout)
	}
	var ck api.Checkpoint
	if err := json.Unmarshal([]byte(stdout), &ck); err != nil {
		t.Fatal(err)
	}
	if ck.Comment != evil || ck.Label != evil || ck.Name != "snap"+evil || ck.OffsiteDetail.Locations[0].Error != evil {
		t.Errorf("strings changed on their way through --json: %+v", ck)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "services", "web")
	var svcs []api.ServiceStatus
	if err := json.Unmarshal([]byte(stdout), &svcs); code != exitOK || err != nil || len(svcs) != 1 || svcs[0].Cmd[2] != evil || svcs[0].Name != "svc"+evil {
		t.Errorf("services --json: exit %d, %v, %+v", code, err, svcs)
	}
}

// TestLogsRawToAPipeEscapedOnATerminal: cairn logs writes the exact
// bytes to a pipe or file, and escapes them (newlines and tabs kept) on a
// terminal; --json adds log_base64 when the log is not valid UTF-8.
func TestLogsRawToAPipeEscapedOnATerminal(t *testing.T) {
	log := []byte("start\n" + evil + "\xff\xfe end\n")
	sock := hostileDaemon(t, log)

	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "logs", "web", "svc")
	if code != exitOK || stdout != string(log) {
		t.Errorf("to a pipe: exit %d, %q (stderr %q); want the exact bytes %q", code, stdout, stderr, log)
	}

	ptm, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&screen, ptm); close(copied) }()
	g := newGlobalOptions(strings.NewReader(""), tty, io.Discard)
	g.Socket = sock
	if err := runLogs(context.Background(), logsOptions{Name: "web", Service: "svc"}, g); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		t.Fatal("terminal output did not end")
	}
	// The terminal's line discipline turns \n into \r\n.
	got := strings.ReplaceAll(screen.String(), "\r\n", "\n")
	want := "start\n" + `\x1b[2K\r\x1b[31mFORGED\x1b]52;c;aGk=\x07\u009b1m\x7f\u202eexe.txt` + "\nline2\tx" + `\xff\xfe end` + "\n"
	if got != want {
		t.Errorf("on a terminal:\n%q\nwant\n%q", got, want)
	}

	code, stdout, _ = runCLI(t, context.Background(), "--socket", sock, "--json", "logs", "web", "svc")
	var out logsJSON
	if err := json.Unmarshal([]byte(stdout), &out); code != exitOK || err != nil {
		t.Fatalf("--json: exit %d, %v: %q", code, err, stdout)
	}
	if exact, err := base64.StdEncoding.DecodeString(out.LogBase64); err != nil || !bytes.Equal(exact, log) {
		t.Errorf("log_base64 = %q (%v), want the exact bytes", out.LogBase64, err)
	}
	if i := terminalHazard(stdout, false); i >= 0 {
		t.Errorf("raw hazard in JSON at %d: %q", i, stdout)
	}
}

// TestProgressEventsEscaped: the texts of an operation's events, shown
// on stderr while cairn follows it, are escaped too.
func TestProgressEventsEscaped(t *testing.T) {
	var buf bytes.Buffer
	p := &eventPrinter{w: &buf, fd: -1}
	p.print(api.Event{Type: api.EventProgress, Data: "Starting service " + evil})
	p.print(api.Event{Type: api.EventProgress, Progress: &api.Progress{Phase: api.PhaseFetch, Done: 1, Total: 2,
		Locations: []api.LocationProgress{{Name: evil, State: "failed", Error: evil}}}})
	p.end()
	if i := terminalHazard(buf.String(), false); i >= 0 {
		t.Errorf("raw hazard at %d: %q", i, buf.String())
	}
}
