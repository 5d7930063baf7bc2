package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/testenv/pgtest"
)

// TestDaemonOnPostgres runs cairnd with its metadata on PostgreSQL
// (--database): a sandbox and a checkpoint are made, nothing is kept in
// SQLite, a second cairnd on the same database under the same host name
// is refused (hosts share a database under names of their own: see
// hosts_test.go), and after a restart cairnd finds both in the database.
func TestDaemonOnPostgres(t *testing.T) {
	url := pgtest.New(t)
	d := startDaemon(t, "--database", url)
	d.create("pg", "--image", "busybox")
	d.sh("pg", "mkdir -p /data && echo kept > /data/f")
	ck := d.checkpoint("pg")
	if ck.ID != "v0" {
		t.Fatalf("first checkpoint is %s, want v0", ck.ID)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "cairn.db")); !os.IsNotExist(err) {
		t.Errorf("cairn.db in the data dir with --database (stat: %v)", err)
	}

	// A second cairnd on the same database with the same (default) host
	// name stops before it makes anything.
	other := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "cairnd"), "--data-dir", other,
		"--socket", filepath.Join(other, "cairn.sock"), "--database", url)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(out.String(), "is another host's") {
			t.Errorf("second cairnd: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("a second cairnd on the same database kept running\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(other, "pool")); !os.IsNotExist(err) {
		t.Errorf("the refused cairnd made a pool (stat: %v)", err)
	}

	d.kill(syscall.SIGTERM)
	d.start()
	var cks []api.Checkpoint
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "checkpoint", "list", "pg")), &cks); err != nil {
		t.Fatal(err)
	}
	if len(cks) != 1 || cks[0].ID != "v0" || cks[0].GlobalID != ck.GlobalID {
		t.Errorf("checkpoints after the restart: %+v, want %s (v0)", cks, ck.GlobalID)
	}
	if got := d.sh("pg", "cat /data/f"); got != "kept\n" {
		t.Errorf("file after the restart: %q", got)
	}
	if got := d.checkpoint("pg"); got.ID != "v1" {
		t.Errorf("checkpoint after the restart is %s, want v1", got.ID)
	}
}
