package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

func TestAccountHuman(t *testing.T) {
	for _, tc := range []struct {
		name string
		acct api.AccountInfo
		want string
	}{
		{"limit", api.AccountInfo{Name: "default", DiskUsed: 1229 << 20, DiskLimit: 50 << 30, Sandboxes: 3, Checkpoints: 17,
			OffsiteLocations: []string{"east", "west"}, Offsite: map[string]int{"uploaded ×2": 15, "uploading": 1, "pending": 1}}, "" +
			"account       default\n" +
			"disk          1.2GiB used of 50GiB limit (2.4%)\n" +
			"sandboxes     3\n" +
			"checkpoints   17\n" +
			"off-site      east, west: 15 uploaded ×2, 1 uploading, 1 pending\n"},
		{"no limit", api.AccountInfo{Name: "default", DiskUsed: 1229 << 20}, "" +
			"account       default\n" +
			"disk          1.2GiB used (no limit)\n" +
			"sandboxes     0\n" +
			"checkpoints   0\n" +
			"off-site      off\n"},
		{"over the limit", api.AccountInfo{Name: "team", DiskUsed: 11 << 30, DiskLimit: 10 << 30, Sandboxes: 1, Checkpoints: 1}, "" +
			"account       team\n" +
			"disk          11GiB used of 10GiB limit (110.0%)\n" +
			"sandboxes     1\n" +
			"checkpoints   1\n" +
			"off-site      off\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("GET /v1/account", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, 200, tc.acct)
			})
			var out bytes.Buffer
			g := newGlobalOptions(nil, &out, &out)
			g.Socket = fakeDaemon(t, mux)
			if err := runAccount(context.Background(), g); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("account:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}

func TestAccountJSON(t *testing.T) {
	want := api.AccountInfo{Name: "default", DiskUsed: 5 << 20, DiskLimit: 1 << 30, Sandboxes: 2, Checkpoints: 4,
		OffsiteLocations: []string{"a", "b"}, Offsite: map[string]int{"pending": 4}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/account", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, want)
	})
	code, stdout, stderr := runCLI(t, context.Background(), "--socket", fakeDaemon(t, mux), "--json", "account")
	var got api.AccountInfo
	if err := json.Unmarshal([]byte(stdout), &got); code != exitOK || err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("exit %d, stdout %q (%v), stderr %q; want %+v", code, stdout, err, stderr, want)
	}
}
