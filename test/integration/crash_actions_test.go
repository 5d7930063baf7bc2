package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-sandbox/cairn/api"
)

// The operations of TestCrashTrials, each through the CLI or the Go
// client (with the request the CLI sends), and the checks of those that
// make sandboxes (fork, snapshot restore).

// opOf names the operation a trial asks for.
func opOf(tr *trial) string {
	switch {
	case tr.act == actDelete || tr.act == actGC || tr.browseDelete:
		return "checkpoint delete " + tr.target.ID
	case tr.act == actRestore:
		return "restore in place " + tr.target.ID
	case tr.act == actRollback:
		return "rollback " + tr.target.ID
	case tr.act == actSnapRestore:
		return "snapshot restore " + snapRef(tr)
	case tr.act == actFork:
		return "fork"
	}
	return "checkpoint create"
}

// forkPrefix is the name prefix of a fork trial's children.
func forkPrefix(tr *trial) string { return fmt.Sprintf("f%d", tr.n) }

// snapName is the sandbox a snapshot restore trial makes.
func snapName(tr *trial) string { return fmt.Sprintf("s%d", tr.n) }

// snapRef names a snapshot restore's checkpoint account-wide: by its
// global id, or as SANDBOX/ID.
func snapRef(tr *trial) string {
	if tr.byGlobalID {
		return tr.target.GlobalID
	}
	return tr.sandbox + "/" + tr.target.ID
}

// lostOperation returns the operation id that the CLI's --json error
// names when it lost cairnd while following it.
func lostOperation(out string) string {
	var lost struct {
		Error struct {
			Operation string `json:"operation"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(out), &lost)
	return lost.Error.Operation
}

// operate asks for the trial's operation and returns its answer. It runs
// on its own goroutine: it must not fail the test.
func (r *crashRun) operate(tr *trial) crashAnswer {
	ctx := context.Background()
	c, name := r.d.client, tr.sandbox
	switch {
	case tr.act == actDelete || tr.act == actGC || tr.browseDelete:
		if tr.viaCLI {
			_, err := r.d.cliErr("checkpoint", "delete", name, tr.target.ID)
			return crashAnswer{err: err}
		}
		return crashAnswer{err: c.DeleteCheckpoint(ctx, name, tr.target.ID)}
	case tr.act == actRestore || tr.act == actRollback:
		if tr.viaCLI {
			args := []string{"restore", name, tr.target.ID, "--wait"}
			if tr.act == actRollback {
				args = []string{"rollback", name, tr.target.ID}
				if tr.diskOnly {
					args = append(args, "--disk-only")
				}
				if tr.noSafety {
					args = append(args, "--no-safety-checkpoint")
				}
			}
			_, err := r.d.cliErr(args...)
			return crashAnswer{err: err}
		}
		op, err := c.RestoreCheckpoint(ctx, name, tr.target.ID, api.RestoreRequest{DiskOnly: tr.diskOnly, NoSafetyCheckpoint: tr.noSafety})
		if err == nil {
			_, err = c.WaitSandbox(ctx, op, nil)
		}
		return crashAnswer{err: err}
	case tr.act == actSnapRestore:
		if tr.viaCLI {
			args := []string{"--json", "snapshot", "restore", snapRef(tr), snapName(tr)}
			if tr.diskOnly {
				args = append(args, "--disk-only")
			}
			out, err := r.d.cliErr(args...)
			a := crashAnswer{err: err}
			if err != nil {
				a.op = lostOperation(out)
			}
			return a
		}
		op, err := c.RestoreSnapshot(ctx, snapRef(tr), api.SnapshotRestoreRequest{Name: snapName(tr), DiskOnly: tr.diskOnly})
		if err == nil {
			_, err = c.WaitSandbox(ctx, op, nil)
		}
		return crashAnswer{err: err, op: op.ID}
	case tr.act == actFork:
		req := api.ForkRequest{Count: crashForkCount, NamePrefix: forkPrefix(tr)}
		if tr.viaCLI {
			out, err := r.d.cliErr("--json", "fork", name, "--count", strconv.Itoa(req.Count), "--name-prefix", req.NamePrefix)
			a := crashAnswer{err: err}
			if err != nil {
				a.op = lostOperation(out)
			}
			return a
		}
		op, err := c.Fork(ctx, name, req)
		if err == nil {
			_, err = c.WaitSandboxes(ctx, op, nil)
		}
		return crashAnswer{err: err, op: op.ID}
	}
	var ck api.Checkpoint
	if tr.viaCLI {
		args := []string{"--json", "checkpoint", "create", name}
		if tr.memory {
			args = append(args, "--memory")
		}
		out, err := r.d.cliErr(args...)
		if err == nil {
			err = json.Unmarshal([]byte(out), &ck)
		}
		return crashAnswer{err: err, created: ck.ID, global: ck.GlobalID}
	}
	op, err := c.CreateCheckpoint(ctx, name, api.CreateCheckpointRequest{Memory: tr.memory})
	if err == nil {
		ck, err = c.WaitCheckpoint(ctx, op, nil)
	}
	return crashAnswer{err: err, created: ck.ID, global: ck.GlobalID}
}

// checkMade checks a trial that makes sandboxes (a fork's children, a
// snapshot restore's new sandbox; both journalled): all of them or none
// exist after the restart (all if it answered), nothing of a sandbox that
// does not exist is left on the host (container, root, host directory),
// and the operation, when the caller learnt its id, answers how it ended:
// failed with O02 when it was undone. It returns the names of those that
// exist; outcomes counts what the operations of cut-short trials answered.
func (r *crashRun) checkMade(tr *trial, what string, want int, made func(string) bool, outcomes map[string]int) []string {
	d := r.d
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := d.client.Sandboxes(ctx, "")
	if err != nil {
		r.fatalf(tr, "cairn list fails after the restart: %v", err)
	}
	ids := map[string]bool{}
	var names []string
	for _, sb := range all {
		ids[sb.ID] = true
		if made(sb.Name) {
			names = append(names, sb.Name)
		}
	}
	switch {
	case tr.answered && len(names) != want:
		r.fatalf(tr, "the %s answered before the kill, but %d of its %d sandboxes exist after the restart: %v", what, len(names), want, names)
	case len(names) != 0 && len(names) != want:
		r.fatalf(tr, "after a kill during the %s %d of its %d sandboxes exist: %v; want all or none", what, len(names), want, names)
	}
	for _, c := range d.containers() {
		if id, _, _ := strings.Cut(c, "."); !ids[id] {
			r.fatalf(tr, "after the restart runsc has container %s, of no sandbox", c)
		}
	}
	for _, id := range d.poolEntries() {
		if !ids[id] {
			r.fatalf(tr, "after the restart the pool holds the root of %s, which is no sandbox", id)
		}
	}
	dirs, _ := os.ReadDir(filepath.Join(d.dataDir, "sandboxes"))
	for _, e := range dirs {
		if !ids[e.Name()] {
			r.fatalf(tr, "after the restart the host directory sandboxes/%s of no sandbox is left", e.Name())
		}
	}
	if id := tr.answer.op; id != "" && !tr.answered {
		op, err := d.client.Operation(ctx, id)
		switch {
		case len(names) == 0 && err != nil && !strings.Contains(err.Error(), api.CodeNoOperation):
			r.fatalf(tr, "operation %s of the %s: %v", id, what, err)
		case len(names) == 0 && err == nil && (op.Error == nil || op.Error.Code != api.CodeInterrupted):
			r.fatalf(tr, "the %s cut short was undone, but its operation %s answers %+v, not failed with %s", what, id, op, api.CodeInterrupted)
		case len(names) != 0 && (err != nil || op.Status != api.OpSuccess):
			r.fatalf(tr, "the %s finished before the kill, but its operation %s answers %+v, %v, not success", what, id, op, err)
		}
		if err == nil {
			outcomes[op.Status]++
		}
	}
	for _, name := range names {
		if sb, err := d.client.Sandbox(ctx, name); err == nil {
			r.tmpIDs = append(r.tmpIDs, sb.ID)
		}
		r.tmpNames[name] = true // its final checkpoint is deleted at the next restore round
	}
	return names
}

// deleteMade deletes the sandboxes a trial made, once checked, so that the
// checkpoint they came from can be deleted by later trials.
func (r *crashRun) deleteMade(tr *trial, what string, names []string) {
	for _, name := range names {
		if _, err := r.d.cliErr("delete", name); err != nil {
			r.fatalf(tr, "cairn delete %s (made by the %s): %v", name, what, err)
		}
	}
}

// checkFork checks a fork trial (see checkMade) and deletes its children.
func (r *crashRun) checkFork(tr *trial) {
	children := r.checkMade(tr, "fork", crashForkCount, func(name string) bool {
		return strings.HasPrefix(name, forkPrefix(tr)+"-")
	}, r.stats.forkOutcomes)
	r.deleteMade(tr, "fork", children)
}

// checkSnapRestore checks a snapshot restore trial: the new sandbox exists
// whole or not at all (see checkMade); if it exists it answers exec within
// crashExecDeadline (or is stopped or crashed with its reason, and comes
// back) and holds the checkpoint's /root/mark. Then it is deleted.
func (r *crashRun) checkSnapRestore(tr *trial) {
	name := snapName(tr)
	made := r.checkMade(tr, "snapshot restore", 1, func(n string) bool { return n == name }, r.stats.snapOutcomes)
	if !tr.answered {
		if len(made) == 0 {
			r.stats.snapOutcomes["none"]++
		} else {
			r.stats.snapOutcomes["whole"]++
		}
	}
	for _, n := range made {
		mark := r.execMark(tr, n)
		r.checkMark(tr, "/root/mark in "+n+", made by the snapshot restore", tr.sandbox, tr.target, mark)
	}
	r.deleteMade(tr, "snapshot restore", made)
}
