package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/cairn-sandbox/cairn/api"
)

// purgeDaemon is a fake cairnd whose forced account delete of "team"
// completes at once; deletes counts the forced deletes asked.
func purgeDaemon(t *testing.T) (sock string, deletes func() int) {
	var mu sync.Mutex
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /v1/accounts/{name}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("force") != "true" || r.PathValue("name") != "team" {
			writeJSON(w, 400, api.ErrorBody{Error: api.ErrorInfo{Code: "V02", Message: "want a forced delete of team"}})
			return
		}
		mu.Lock()
		n++
		mu.Unlock()
		writeJSON(w, 202, api.Operation{ID: "op1", Kind: "account.delete", Status: api.OpRunning})
	})
	mux.HandleFunc("GET /v1/operations/op1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		json.NewEncoder(w).Encode(api.Event{Type: api.EventProgress, Data: "Revoking the tokens of account team", Progress: &api.Progress{Phase: api.PhaseRevoke}})
		json.NewEncoder(w).Encode(api.Event{Type: api.EventComplete, Data: api.AccountDeleted{Deleted: "team", Sandboxes: 2, Checkpoints: 5, Tokens: 1}})
	})
	return fakeDaemon(t, mux), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// account delete --force: without a terminal it needs --yes (and asks
// nothing of the daemon); with --yes it deletes and says what went.
func TestAccountDeleteForceNeedsYesWithoutATerminal(t *testing.T) {
	sock, deletes := purgeDaemon(t)
	var out, errOut bytes.Buffer
	g := newGlobalOptions(strings.NewReader("team\n"), &out, &errOut)
	g.Socket = sock
	err := runAccountDelete(context.Background(), g, accountDeleteOptions{Name: "team", Force: true})
	if err == nil || !strings.Contains(err.Error(), "--yes") || deletes() != 0 {
		t.Fatalf("--force from a pipe without --yes: %v (%d deletes)", err, deletes())
	}
	if err := runAccountDelete(context.Background(), g, accountDeleteOptions{Name: "team", Yes: true}); err == nil || deletes() != 0 {
		t.Errorf("--yes without --force: %v", err)
	}
	if err := runAccountDelete(context.Background(), g, accountDeleteOptions{Name: "team", Force: true, Yes: true}); err != nil {
		t.Fatalf("--force --yes: %v\n%s", err, errOut.String())
	}
	if deletes() != 1 || out.String() != "Account deleted: team (2 sandboxes, 5 checkpoints, 1 tokens)\n" {
		t.Errorf("%d deletes; printed %q", deletes(), out.String())
	}
}

// On a terminal, --force deletes once the account's name is typed, and
// not when another is.
func TestAccountDeleteForceAsksForTheName(t *testing.T) {
	sock, deletes := purgeDaemon(t)
	for _, tc := range []struct {
		typed string
		ok    bool
	}{{"nope", false}, {"team", true}} {
		ptm, tty, err := pty.Open()
		if err != nil {
			t.Fatalf("open a pseudo-terminal: %v", err)
		}
		go io.Copy(io.Discard, ptm)
		var out bytes.Buffer
		g := newGlobalOptions(tty, &out, tty)
		g.Socket = sock
		before := deletes()
		done := make(chan error, 1)
		go func() {
			done <- runAccountDelete(context.Background(), g, accountDeleteOptions{Name: "team", Force: true})
		}()
		ptm.Write([]byte(tc.typed + "\n"))
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("account delete did not return")
		}
		if tc.ok && (err != nil || deletes() != before+1) {
			t.Errorf("typed %q: %v, %d deletes", tc.typed, err, deletes()-before)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "not deleted") || deletes() != before) {
			t.Errorf("typed %q: %v, %d deletes", tc.typed, err, deletes()-before)
		}
		ptm.Close()
		tty.Close()
	}
}
