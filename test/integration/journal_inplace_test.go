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

// A restore in place or a delete cut short by a crash of cairnd is
// finished or undone at the next start, never left half-way, and its
// client can learn which (docs/reliability.md, "Operations interrupted by
// a crash").

// interrupted runs the cairn CLI with args (--json) in the background,
// kills cairnd with SIGKILL as soon as when() holds, and returns the id of
// the operation the CLI says it lost. The daemon is started again.
func interrupted(t *testing.T, d *daemon, when func() bool, args ...string) string {
	t.Helper()
	id := tryInterrupt(t, d, when, args...)
	if id == "" {
		t.Fatalf("cairn %v ended before cairnd was killed: make it slower to catch", args)
	}
	return id
}

// tryInterrupt is interrupted, but returns "" when the command ends by
// itself before when() holds, or succeeds.
func tryInterrupt(t *testing.T, d *daemon, when func() bool, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "cairn"), append([]string{"--socket", d.socket, "--json"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for !when() {
		if time.Now().After(deadline) {
			t.Fatalf("cairn %v: the moment to kill cairnd did not come within a minute\n%s", args, stderr.String())
		}
		select {
		case err := <-exited:
			t.Logf("cairn %v ended before cairnd was killed (%v)\n%s%s", args, err, stdout.String(), stderr.String())
			return ""
		default:
		}
		time.Sleep(2 * time.Millisecond)
	}
	d.kill(syscall.SIGKILL)
	var err error
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("cairn %v did not return within 30 s of cairnd's death", args)
	}
	if err == nil {
		// It had its answer before the kill.
		t.Logf("cairn %v succeeded before cairnd was killed", args)
		d.start()
		return ""
	}
	var lost struct {
		Error struct {
			Operation string `json:"operation"`
		} `json:"error"`
	}
	if json.Unmarshal(stdout.Bytes(), &lost) != nil {
		t.Fatalf("cairn %v after cairnd died: stdout %q, stderr %q; want the error shape", args, stdout.String(), stderr.String())
	}
	d.start()
	if lost.Error.Operation != "" {
		return lost.Error.Operation
	}
	// Killed after the operation began but before its 202 reached the
	// CLI (the sandbox showed its state already): the journal names it.
	if id := journalledOperation(t, d, "sandbox/"+args[len(args)-1], started); id != "" {
		return id
	}
	t.Fatalf("cairn %v after cairnd died: stdout %q, stderr %q; want an error naming the operation, or the operation in the journal", args, stdout.String(), stderr.String())
	return ""
}

// journalledOperation returns the newest operation on resource begun
// since that the restarted cairnd lists (from its journal), "" if none
// within 20 s.
func journalledOperation(t *testing.T, d *daemon, resource string, since time.Time) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ops, err := d.client.Operations(ctx)
		cancel()
		var newest api.Operation
		for _, op := range ops {
			if op.Resource == resource && !op.CreatedAt.Before(since.Add(-time.Second)) && op.CreatedAt.After(newest.CreatedAt) {
				newest = op
			}
		}
		if err == nil && newest.ID != "" {
			return newest.ID
		}
	}
	return ""
}

// operationAfter returns operation id as cairnd answers for it after the
// restart: an interrupted operation is marked once recovery has handled its
// sandbox (started it again, in the background), and is unknown (O01)
// until then.
func operationAfter(t *testing.T, d *daemon, id string) api.Operation {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		op, err := d.client.Operation(ctx, id)
		cancel()
		if err == nil {
			return op
		}
		if !strings.Contains(err.Error(), api.CodeNoOperation) || time.Now().After(deadline) {
			t.Fatalf("operation %s after the restart: %v", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mustCLISoon is mustCLI, retried for a few seconds while the sandbox is
// busy (S05: recovery may still hold it for the start it handed off).
func mustCLISoon(t *testing.T, d *daemon, args ...string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, errOut, code := d.cli("", args...)
		if code == 0 {
			return out
		}
		if !strings.Contains(errOut, api.CodeSandboxBusy) || time.Now().After(deadline) {
			t.Fatalf("cairn %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
		}
	}
}

// shEventually runs script in sandbox name until it prints want, for up to
// 20 s (a sandbox stopped by the interrupted operation starts again in the
// background), and fails with what it printed last.
func shEventually(t *testing.T, d *daemon, name, script, want string) {
	t.Helper()
	var out string
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, err = d.execOut(10*time.Second, name, "/bin/sh", "-c", script)
		if err == nil && out == want {
			return
		}
	}
	t.Fatalf("%s: %q in %s printed %q (%v), want %q", name, script, name, out, err, want)
}

// rootDev is the st_dev of the sandbox's root: btrfs gives every subvolume
// its own, so it changes when a restore swaps a new root in.
func rootDev(d *daemon, id string) uint64 {
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(d.dataDir, "pool", "sandboxes", id), &st) != nil {
		return 0
	}
	return st.Dev
}

func TestRestoreInPlaceInterruptedAfterTheSwapIsFinished(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("web")
	d.sh("web", "echo before > /root/mark && echo before > /dev/shm/mark && sync")
	ck := d.checkpoint("web", "--memory")
	d.sh("web", "echo after > /root/mark && echo after > /dev/shm/mark && sync")

	old := rootDev(d, sb.ID)
	opID := interrupted(t, d, func() bool { dev := rootDev(d, sb.ID); return dev != 0 && dev != old },
		"restore", "web", ck.ID, "--wait")

	// Finished: the disk and the processes of the checkpoint, which the
	// operation reports as a success.
	shEventually(t, d, "web", "cat /root/mark /dev/shm/mark", "before\nbefore\n")
	op := operationAfter(t, d, opID)
	if op.Status != api.OpSuccess {
		t.Errorf("operation %s after the restart: %+v (error %+v), want a success", opID, op, op.Error)
	}
	var info api.Sandbox
	json.Unmarshal([]byte(d.mustCLI("--json", "info", "web")), &info)
	if info.State != api.StateRunning || info.CurrentCheckpoint != ck.ID {
		t.Errorf("web after the finished restore: state %s, current checkpoint %q; want running at %s", info.State, info.CurrentCheckpoint, ck.ID)
	}
	if strings.Contains(d.logText(), "marking crashed") {
		t.Errorf("the restore's sandbox was marked crashed:\n%s", d.logText())
	}
}

func TestRestoreInPlaceInterruptedBeforeTheSwapIsUndone(t *testing.T) {
	d := startDaemon(t)
	sb := d.create("web")
	d.sh("web", "echo before > /root/mark && sync")
	ck := d.checkpoint("web")
	d.sh("web", "echo after > /root/mark && echo after > /dev/shm/mark && sync")

	// The new root is staged first, then the safety checkpoint (with
	// memory: a second or so) is taken: the kill lands in it.
	staged := filepath.Join(d.dataDir, "pool", "tmp", "restore-"+sb.ID)
	opID := interrupted(t, d, func() bool { _, err := os.Stat(staged); return err == nil },
		"restore", "web", ck.ID, "--wait")

	// Undone: web is as it was, processes included, and says so.
	shEventually(t, d, "web", "cat /root/mark /dev/shm/mark", "after\nafter\n")
	op := operationAfter(t, d, opID)
	if op.Status != api.OpFailure || op.Error == nil || op.Error.Code != api.CodeInterrupted || !strings.Contains(op.Error.Message, "has the disk it had before") {
		t.Errorf("operation %s after the restart: %+v (error %+v), want failed with %s, the disk kept", opID, op, op.Error, api.CodeInterrupted)
	}
	if _, err := os.Stat(staged); err == nil {
		t.Errorf("the staged root %s is left", staged)
	}

	// Killed once the safety checkpoint is listed: about when the
	// restore ends the processes and swaps, just before or just after.
	// Either way web answers, is not marked crashed, and the operation
	// says what its disk is: kept (undone) or restored (finished).
	safeties := func() int {
		n := 0
		for _, c := range d.checkpoints("web") {
			if c.Trigger == api.TriggerRestore {
				n++
			}
		}
		return n
	}
	had := safeties()
	opID = interrupted(t, d, func() bool { return safeties() > had }, "restore", "web", ck.ID, "--wait")
	var mark string
	for deadline := time.Now().Add(20 * time.Second); mark == "" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		mark, _ = d.execOut(10*time.Second, "web", "cat", "/root/mark")
	}
	op = operationAfter(t, d, opID)
	switch mark {
	case "after\n":
		if op.Status != api.OpFailure || op.Error == nil || !strings.Contains(op.Error.Message, "has the disk it had before") {
			t.Errorf("web kept its disk, but operation %s says %+v (error %+v)", opID, op, op.Error)
		}
	case "before\n":
		if op.Status != api.OpSuccess {
			t.Errorf("web was restored, but operation %s says %+v (error %+v)", opID, op, op.Error)
		}
	default:
		t.Fatalf("web after the restore killed at its stop: /root/mark %q", mark)
	}
	t.Logf("killed at the stop: web reads %q, the operation %s", mark, op.Status)
	if info := d.info("web"); info.LastCrash != nil || info.State != api.StateRunning {
		t.Errorf("web after the restore killed at its stop: state %s, last crash %+v; want running, never crashed", info.State, info.LastCrash)
	}

	// And the restore works now.
	mustCLISoon(t, d, "restore", "web", ck.ID, "--wait")
	if out := d.sh("web", "cat /root/mark"); out != "before\n" {
		t.Errorf("after restoring again: %q", out)
	}
}

func TestDeleteInterruptedIsFinishedOrUndone(t *testing.T) {
	d := startDaemon(t)
	d.create("web")
	d.sh("web", "echo kept > /root/mark && sync")

	// Killed in the final checkpoint or the stop that follows it (the
	// sandbox shows deleting from the start): undone, web is back.
	deleting := func(name string) func() bool {
		return func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			sb, err := d.client.Sandbox(ctx, name)
			return err == nil && sb.State == api.StateDeleting
		}
	}
	opID := interrupted(t, d, deleting("web"), "delete", "web")
	shEventually(t, d, "web", "cat /root/mark", "kept\n")
	op := operationAfter(t, d, opID)
	if op.Status != api.OpFailure || op.Error == nil || op.Error.Code != api.CodeInterrupted || !strings.Contains(op.Error.Message, "was not deleted") {
		t.Errorf("operation %s after the restart: %+v (error %+v), want failed with %s, not deleted", opID, op, op.Error, api.CodeInterrupted)
	}
	mustCLISoon(t, d, "delete", "web")

	// Killed once the sandbox is no longer listed (its row is gone):
	// finished, and nothing of it is left. What is left to do then (its
	// root, its host directory) takes milliseconds: a few tries.
	for try := 0; ; try++ {
		if try == 25 {
			t.Fatal("25 deletes ended before cairnd could be killed after their row went")
		}
		d.create("gone")
		listed := func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := d.client.Sandbox(ctx, "gone")
			return err != nil && strings.Contains(err.Error(), api.CodeNoSandbox)
		}
		if opID = tryInterrupt(t, d, listed, "delete", "gone"); opID != "" {
			break
		}
	}
	op = operationAfter(t, d, opID)
	if op.Status != api.OpSuccess || op.Resource != "sandbox/gone" {
		t.Errorf("operation %s after the restart: %+v (error %+v), want a success on sandbox/gone", opID, op, op.Error)
	}
	if roots := d.poolEntries(); len(roots) != 0 {
		t.Errorf("sandbox roots left: %v", roots)
	}
	if cs := d.containers(); len(cs) != 0 {
		t.Errorf("containers left: %v", cs)
	}
	if dirs, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes")); len(dirs) != 0 {
		t.Errorf("host directories left: %v", dirs)
	}
}

// An image build is part of the create that needs it: killed in the
// middle of it, the create is undone with it, no half-built image is left
// (it is built in the pool's work area and made an image by one
// snapshot), and the next create builds it whole.
func TestImageBuildInterruptedLeavesNoHalfImage(t *testing.T) {
	d := startDaemon(t)
	work := filepath.Join(d.dataDir, "pool", "tmp", "image-busybox")
	opID := interrupted(t, d, func() bool { _, err := os.Stat(work); return err == nil }, "create", "first")

	op := operationAfter(t, d, opID)
	if op.Status != api.OpFailure || op.Error == nil || op.Error.Code != api.CodeInterrupted {
		t.Errorf("operation %s after the restart: %+v (error %+v), want failed with %s", opID, op, op.Error, api.CodeInterrupted)
	}
	if _, err := os.Stat(work); err == nil {
		t.Errorf("the half-built image %s is left", work)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "images", "busybox")); err == nil {
		t.Errorf("an image busybox exists though its build was cut short")
	}
	d.create("first")
	if out := d.sh("first", "ls /bin/busybox && echo whole"); out != "/bin/busybox\nwhole\n" {
		t.Errorf("the image built after the restart: %q", out)
	}
}
