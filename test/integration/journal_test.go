package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// A fork cut short by a crash of cairnd is undone at the next start: none
// of its children remains (row, container, root, host directory, own
// checkpoint), the parent runs on with the fork's checkpoint, the client
// that lost cairnd named the operation, and the operation answers failed
// with O02 after the restart. A new fork then works.
func TestForkInterruptedByCrashIsUndone(t *testing.T) {
	d := startDaemon(t)
	parent := d.create("web")
	d.sh("web", "echo before-the-fork > /root/mark && sync")

	// The fork, from the CLI as a user runs it, in the background.
	cmd := exec.Command(filepath.Join(binDir, "cairn"), "--socket", d.socket, "--json", "fork", "web", "--count", "8")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// cairnd is killed once some children exist, before all do.
	deadline := time.Now().Add(2 * time.Minute)
	made := 0
	for made == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no child of the fork appeared within 2 minutes\n%s", stderr.String())
		}
		select {
		case err := <-exited:
			t.Fatalf("the fork ended before cairnd was killed (%v): make it slower to catch\n%s%s", err, stdout.String(), stderr.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		kids, err := d.client.Sandboxes(ctx, "web")
		cancel()
		if err == nil {
			made = len(kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill(syscall.SIGKILL)
	t.Logf("killed cairnd with %d of 8 children made", made)
	if made == 8 {
		t.Fatal("every child was made before cairnd was killed: the crash did not cut the fork short")
	}

	// The client says it lost cairnd, and names the operation.
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("cairn fork did not return within 30 s of cairnd's death")
	}
	if err == nil {
		t.Fatalf("cairn fork succeeded though cairnd died in its middle: %s", stdout.String())
	}
	var lost struct {
		Error struct {
			Message   string `json:"message"`
			Operation string `json:"operation"`
		} `json:"error"`
	}
	if json.Unmarshal(stdout.Bytes(), &lost) != nil || lost.Error.Operation == "" || !strings.Contains(lost.Error.Message, "lost cairnd") {
		t.Fatalf("cairn fork --json after cairnd died: stdout %q, stderr %q; want the error with the operation id", stdout.String(), stderr.String())
	}
	opID := lost.Error.Operation

	d.start()

	// No child remains, in any form.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := d.client.Sandboxes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name != "web" {
		t.Errorf("sandboxes after the restart: %+v, want web alone", all)
	}
	for _, c := range d.containers() {
		if !strings.HasPrefix(c, parent.ID) {
			t.Errorf("container %s is left (web is %s)", c, parent.ID)
		}
	}
	if roots := d.poolEntries(); len(roots) != 1 || roots[0] != parent.ID {
		t.Errorf("sandbox roots in the pool: %v, want web's %s alone", roots, parent.ID)
	}
	dirs, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes"))
	for _, e := range dirs {
		if e.Name() != parent.ID {
			t.Errorf("host directory sandboxes/%s is left", e.Name())
		}
	}
	snaps, err := d.client.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ck := range snaps {
		if ck.Sandbox != "web" {
			t.Errorf("checkpoint %s of %s is left", ck.GlobalID, ck.Sandbox)
		}
	}
	// The fork's checkpoint stays, an ordinary one of the parent.
	cks, err := d.client.Checkpoints(ctx, "web", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(cks) != 1 || cks[0].Trigger != api.TriggerFork {
		t.Errorf("web's checkpoints after the undone fork: %+v, want its fork checkpoint", cks)
	}

	// The parent answers.
	if out := d.sh("web", "cat /root/mark"); out != "before-the-fork\n" {
		t.Errorf("web reads %q after the restart", out)
	}

	// The operation answers: failed, O02, saying it was undone.
	op, err := d.client.Operation(ctx, opID)
	if err != nil {
		t.Fatalf("operation %s after the restart: %v", opID, err)
	}
	if op.Status != api.OpFailure || op.Error == nil || op.Error.Code != api.CodeInterrupted || !strings.Contains(op.Error.Message, "undone") {
		t.Errorf("operation %s after the restart: %+v (error %+v), want failed with %s", opID, op, op.Error, api.CodeInterrupted)
	}
	if out := d.mustCLI("operation", opID); !strings.Contains(out, "O02: interrupted by a cairnd restart") {
		t.Errorf("cairn operation %s:\n%s", opID, out)
	}
	if _, err := d.client.Follow(ctx, op, nil); err == nil || !strings.Contains(err.Error(), api.CodeInterrupted) {
		t.Errorf("following operation %s after the restart: %v, want its O02 error", opID, err)
	}

	// A new fork of the same names works.
	var kids []api.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("--json", "fork", "web", "--count", "2")), &kids); err != nil || len(kids) != 2 {
		t.Fatalf("fork after the restart: %v %+v", err, kids)
	}
	if out := d.sh(kids[1].Name, "cat /root/mark"); out != "before-the-fork\n" {
		t.Errorf("%s reads %q", kids[1].Name, out)
	}
}

// A create cut short by a crash of cairnd is undone too: the sandbox does
// not exist after the restart, nothing of it is left, its operation
// answers failed with O02, and the name is free.
func TestCreateInterruptedByCrashIsUndone(t *testing.T) {
	d := startDaemon(t)
	d.create("keep")
	before, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes"))

	// Killed once its host directory exists: its root is made, its
	// container is being started.
	opID := interrupted(t, d, func() bool {
		now, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes"))
		return len(now) > len(before)
	}, "create", "half")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := d.client.Sandboxes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name != "keep" {
		t.Errorf("sandboxes after the restart: %d, want keep alone", len(all))
	}
	if n := len(d.containers()); n != 1 {
		t.Errorf("%d runsc containers after the restart, want keep's alone", n)
	}
	if roots := d.poolEntries(); len(roots) != 1 {
		t.Errorf("sandbox roots after the restart: %v, want keep's alone", roots)
	}
	if op := operationAfter(t, d, opID); op.Status != api.OpFailure || op.Error == nil || op.Error.Code != api.CodeInterrupted {
		t.Errorf("operation %s after the restart: %+v; want failed with %s", opID, op, api.CodeInterrupted)
	}
	d.create("half")
	d.sh("half", "true")
}
