package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

var testDiff = []api.DiffEntry{
	{Path: "/etc/new.conf", Kind: "added"},
	{Path: "/etc/passwd", Kind: "changed", What: []string{"content", "mode", "owner"}, Mode: "0644 -> 0600"},
	{Path: "/srv/data", Kind: "changed", What: []string{"content"}},
	{Path: "/tmp/old", Kind: "removed"},
	{Path: "/tmp/we\nird", Kind: "added"},
}

func diffDaemon(t *testing.T, query *url.Values) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/web/diff", func(w http.ResponseWriter, r *http.Request) {
		*query = r.URL.Query()
		writeJSON(w, 200, testDiff)
	})
	return fakeDaemon(t, mux)
}

func TestDiffHuman(t *testing.T) {
	var query url.Values
	sock := diffDaemon(t, &query)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "diff", "web", "v1")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := "" +
		"A /etc/new.conf\n" +
		"M /etc/passwd (content, mode 0644 -> 0600, owner)\n" +
		"M /srv/data (content)\n" +
		"D /tmp/old\n" +
		"A \"/tmp/we\\nird\"\n"
	if stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
	}
	if stderr != "2 added, 2 changed, 1 removed\n" {
		t.Errorf("stderr %q, want the counts", stderr)
	}
	if want := (url.Values{"from": {"v1"}}); !reflect.DeepEqual(query, want) {
		t.Errorf("query %v, want %v (no to: the current disk)", query, want)
	}
}

func TestDiffBetweenCheckpointsJSON(t *testing.T) {
	var query url.Values
	sock := diffDaemon(t, &query)
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", sock, "--json", "diff", "web", "v1", "v2")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	var got []api.DiffEntry
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || !reflect.DeepEqual(got, testDiff) {
		t.Errorf("stdout %q (%v), want the entries", stdout, err)
	}
	if want := (url.Values{"from": {"v1"}, "to": {"v2"}}); !reflect.DeepEqual(query, want) {
		t.Errorf("query %v, want %v", query, want)
	}
}
