package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/client"
)

// cairn account delete NAME --force: refused without a terminal unless
// --yes; then its tokens are revoked (their streams end), its sandboxes
// (running and stopped) stopped and deleted, its checkpoints, snapshots
// and those of a deleted sandbox deleted with their disks, and the
// account goes; the audit log records it; another account is untouched.
func TestForcedAccountDelete(t *testing.T) {
	listen := listenAddr(t)
	d := startDaemon(t, "--listen", listen)
	info, err := d.client.ServerInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI("account", "create", "doomed")
	tok := d.token("doomed", "ci", "member")
	member := d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+tok.Token, "CAIRN_TLS_FINGERPRINT="+info.TLSFingerprint)
	keep := d.create("keep", "--image", "busybox", "--network", "none") // the default account's

	member.must("create", "web", "--image", "busybox", "--network", "none")
	member.must("exec", "web", "--detach", "--", "sleep", "600")
	member.must("checkpoint", "create", "web")
	member.must("snapshot", "create", "web", "--name", "golden")
	member.must("create", "idle", "--image", "busybox", "--network", "none")
	member.must("stop", "idle")
	member.must("create", "old", "--image", "busybox", "--network", "none")
	member.must("delete", "old") // its final checkpoint outlives it
	var sbs []api.Sandbox
	json.Unmarshal([]byte(member.must("--json", "list")), &sbs)
	var snaps []api.Checkpoint
	json.Unmarshal([]byte(member.must("--json", "snapshot", "list")), &snaps)
	if len(sbs) != 2 || len(snaps) < 4 {
		t.Fatalf("set up: sandboxes %+v, checkpoints %d", sbs, len(snaps))
	}
	deletedSandbox := false
	for _, ck := range snaps {
		deletedSandbox = deletedSandbox || ck.SandboxDeleted
	}
	if !deletedSandbox {
		t.Fatalf("no checkpoint of a deleted sandbox among %+v", snaps)
	}
	memberAPI, _ := client.NewRemote(client.Remote{URL: info.Listen, Token: tok.Token, Fingerprint: info.TLSFingerprint})
	events := make(chan error, 1)
	go func() {
		events <- memberAPI.SandboxEvents(context.Background(), "web", 0, true, func(api.SandboxActivity) error { return nil })
	}()

	if code := d.errorCode("account", "delete", "doomed"); code != api.CodeAccountNotEmpty {
		t.Errorf("delete of an account that holds sandboxes: %s, want %s", code, api.CodeAccountNotEmpty)
	}
	if code := d.errorCode("account", "delete", "default", "--force", "--yes"); code != api.CodeInvalidArgument {
		t.Errorf("forced delete of the default account: %s, want %s", code, api.CodeInvalidArgument)
	}
	if _, errOut, code := d.cli("doomed\n", "account", "delete", "doomed", "--force"); code == 0 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("--force without a terminal nor --yes: exit %d %s", code, errOut)
	}
	if got := member.must("--json", "list"); !strings.Contains(got, `"web"`) {
		t.Fatalf("a refused delete changed something: %s", got)
	}

	start := time.Now()
	out := d.mustCLI("account", "delete", "doomed", "--force", "--yes")
	if want := "Account deleted: doomed (2 sandboxes, "; !strings.Contains(out, want) || !strings.Contains(out, "1 tokens") {
		t.Errorf("forced delete printed %q, want %q… 1 tokens", out, want)
	}
	t.Logf("forced delete took %v: %s", time.Since(start), strings.TrimSpace(out))
	select {
	case err := <-events:
		if client.CodeOf(err) != api.CodeUnauthenticated {
			t.Errorf("the member's event stream ended with %v, want A01: its token was revoked first", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the member's event stream goes on after its account was deleted")
	}

	// Nothing of it is left.
	var accts []api.AccountRecord
	json.Unmarshal([]byte(d.mustCLI("--json", "account", "list")), &accts)
	for _, a := range accts {
		if a.Name == "doomed" {
			t.Errorf("the account is still listed: %+v", accts)
		}
	}
	// Its off-site repository (the embedded default, a directory of its
	// own) and key went with it.
	if dirs, _ := filepath.Glob(filepath.Join(d.dataDir, "offsite", "account-*")); len(dirs) != 0 {
		t.Errorf("the deleted account's off-site directory is still there: %v", dirs)
	}
	if code, _ := member.errorCode("list"); code != api.CodeUnauthenticated {
		t.Errorf("its token after the delete: %s, want %s", code, api.CodeUnauthenticated)
	}
	for _, sb := range sbs {
		if slices.Contains(d.poolEntries(), sb.ID) {
			t.Errorf("the pool still holds sandbox %s's root", sb.Name)
		}
		if _, err := os.Stat(filepath.Join(d.dataDir, "sandboxes", sb.ID)); err == nil {
			t.Errorf("the host directory of sandbox %s is still there", sb.Name)
		}
	}
	if c := d.containers(); len(c) != 1 {
		t.Errorf("runsc containers %v, want the default account's alone", c)
	}
	for _, ck := range snaps {
		if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "checkpoints", ck.GlobalID)); err == nil {
			t.Errorf("checkpoint %s/%s's disk is still in the pool", ck.Sandbox, ck.ID)
		}
	}
	var audit []api.AuditEntry
	json.Unmarshal([]byte(d.mustCLI("--json", "audit", "--since", "1h")), &audit)
	found := false
	for _, e := range audit {
		found = found || e.Action == "account.delete" && e.Target == "doomed" && e.Outcome == "accepted" && strings.HasPrefix(e.Detail, "force")
	}
	if !found {
		t.Errorf("the audit log lacks the forced delete: %+v", audit)
	}
	if got := d.sh(keep.Name, "echo alive"); got != "alive\n" {
		t.Errorf("the default account's sandbox after the delete: %q", got)
	}
	// The name can be used again, for a new, empty account.
	d.mustCLI("account", "create", "doomed")
	tok2 := d.token("doomed", "ci", "member")
	again := d.remoteUser(t, "CAIRN_HOST="+info.Listen, "CAIRN_TOKEN="+tok2.Token, "CAIRN_TLS_FINGERPRINT="+info.TLSFingerprint)
	if got := again.must("--json", "list"); strings.TrimSpace(got) != "[]" {
		t.Errorf("a new account of the same name sees %s", got)
	}
}
