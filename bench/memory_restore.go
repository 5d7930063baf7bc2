package main

// The memory group's restores: restore in place of a memory checkpoint
// against runsc restore by hand of the same image (memory.go runs them).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/browse"
)

func (e *env) benchMemRestore(ctx context.Context, all []*memSandbox, scratch string) error {
	c := e.c
	maxIters := 0
	for _, m := range all {
		op, err := c.CreateCheckpoint(ctx, m.name, api.CreateCheckpointRequest{Comment: "restore target", Memory: true})
		if err != nil {
			return err
		}
		if m.ck, err = c.WaitCheckpoint(ctx, op, nil); err != nil {
			return err
		}
		if err := e.afterMemCheckpoint(ctx, m); err != nil {
			return err
		}
		maxIters = max(maxIters, m.iters)
	}
	const copyID = "bare-memrs"
	for i := 0; i < maxIters; i++ {
		for j := range all {
			m := all[(i+j)%len(all)]
			if i >= m.iters {
				continue
			}
			cairnFirst := (i+j)%2 == 0
			for _, cairnTurn := range []bool{cairnFirst, !cairnFirst} {
				if cairnTurn {
					dt, ex, err := e.timedMemRestore(ctx, m, i == 0)
					if err != nil {
						return err
					}
					m.rsCairn = append(m.rsCairn, dt)
					m.rsExec = append(m.rsExec, ex)
					m.rsWithExec = append(m.rsWithExec, dt+ex)
					continue
				}
				dt, _, err := e.restoreCopy(ctx, m, func() (string, error) { return e.checkpointDisk(m) }, e.memoryImage(m.ck), copyID, scratch, &m.rsFloorPh)
				if err == nil && i == 0 {
					// The copy resumed the checkpoint's processes and memory.
					if out, xerr := e.floor.runsc("exec", copyID, "/bin/sh", "-c", m.memVerify()).CombinedOutput(); xerr != nil {
						err = fmt.Errorf("copy by hand of %s does not hold the checkpoint's state: %v: %s", m.name, xerr, trimOut(out))
					}
				}
				e.floor.cleanup(copyID, e.tmp(copyID))
				if err != nil {
					return err
				}
				m.rsFloor = append(m.rsFloor, dt)
			}
		}
	}
	for _, m := range all {
		compare(fmt.Sprintf("restore in place of a memory checkpoint, %s touched, warm (API: RestoreCheckpoint NoSafetyCheckpoint → operation done, cairn-init answering)", m.label),
			series{"btrfs snapshot + bundle + runsc restore --detach of a copy, until it returns: running (floor)", m.rsFloor},
			series{"cairn", m.rsCairn})
		printSeries(series{"  cairn less its kill phase (the floor replaces no running sandbox)", m.rsNoKill})
		printSeries(series{"  then a first `exec true` (a new process in the sandbox; not in the floor)", m.rsExec})
		printSeries(series{"  cairn until that exec has answered", m.rsWithExec})
		m.rsPhases.print("cairn")
		m.rsFloorPh.print("floor")
		if m.verifiedMsg != "" {
			fmt.Printf("  %s\n", m.verifiedMsg)
		}
		cp50, _ := percentiles(m.rsCairn)
		fp50, _ := percentiles(m.rsFloor)
		fmt.Printf("  touched memory per second (p50): cairn %s, floor %s\n", rate(m.bytes, cp50), rate(m.bytes, fp50))
		if m.bytes == 512<<20 {
			goal(cp50 <= goalRestore512, "restore of 512 MiB ≤ %s warm (is %s)", goalRestore512, round(cp50))
		}
		xp50, _ := percentiles(m.rsWithExec)
		fmt.Printf("  with the first exec: %s, %.2f× the floor\n", round(xp50), float64(xp50)/float64(fp50))
		goal(float64(cp50) <= goalMemRatio*float64(fp50), "within %.0f%% of bare runsc (is %+.1f%%)", (goalMemRatio-1)*100, pct(cp50, fp50))
		fmt.Println()
	}
	return nil
}

// checkpointDisk is where the disk of m's memory checkpoint is:
// checkpoints/<global id> in the pool (it never moves).
func (e *env) checkpointDisk(m *memSandbox) (string, error) {
	p := filepath.Join(e.d.poolDir(), "checkpoints", m.ck.GlobalID)
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return "", fmt.Errorf("disk of checkpoint %s of %s (%s) is not in checkpoints/: %v", m.ck.ID, m.name, m.ck.GlobalID, err)
	}
	return p, nil
}

func (e *env) memoryImage(ck api.Checkpoint) string {
	return filepath.Join(e.d.poolDir(), "memory", ck.GlobalID)
}

// timedMemRestore restores m's memory checkpoint in place and times it
// until the operation is done (what `cairn rollback` waits for: the
// processes resumed and cairn-init answering), then how long a first
// `exec true` takes after it; verify checks the restored state once.
func (e *env) timedMemRestore(ctx context.Context, m *memSandbox, verify bool) (restore, exec time.Duration, err error) {
	c := e.c
	// Something to undo: a file in /tmp, i.e. in memory.
	if _, err := execSh(ctx, c, m.name, "touch /tmp/after"); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	op, err := c.RestoreCheckpoint(ctx, m.name, m.ck.ID, api.RestoreRequest{NoSafetyCheckpoint: true})
	if err != nil {
		return 0, 0, err
	}
	var tl timeline
	if _, err := c.Follow(ctx, op, tl.record); err != nil {
		return 0, 0, err
	}
	done := time.Now()
	if err := execTrue(ctx, c, m.name); err != nil {
		return 0, 0, fmt.Errorf("exec true after restore: %w", err)
	}
	end := time.Now()
	if _, ok := tl.at("Resuming the processes"); !ok {
		return 0, 0, fmt.Errorf("restore of %s %s did not resume processes (booted instead?)", m.name, m.ck.ID)
	}
	if verify {
		if _, err := execSh(ctx, c, m.name, m.memVerify()); err != nil {
			return 0, 0, fmt.Errorf("after restore, %s does not hold the checkpoint's state: %w", m.name, err)
		}
		m.verifiedMsg = fmt.Sprintf("verified once: the fill, the same pid %d, and a file made after the checkpoint gone, in cairn's restore and in the copy by hand", m.pid)
	}
	stopping, ok1 := tl.at("Stopping sandbox")
	swapping, ok2 := tl.at("Swapping in")
	resuming, ok3 := tl.at("Resuming the processes")
	restored, ok4 := tl.at("Sandbox ")
	if len(tl) > 0 && ok1 && ok2 && ok3 && ok4 {
		m.rsPhases.add("request→op", tl[0].Time.Sub(t0))
		m.rsPhases.add("kill", swapping.Sub(stopping))
		m.rsNoKill = append(m.rsNoKill, done.Sub(t0)-swapping.Sub(stopping))
		m.rsPhases.add("swap root", resuming.Sub(swapping))
		m.rsPhases.add("runsc restore + agent + row", restored.Sub(resuming))
		m.rsPhases.add("→operation done", done.Sub(restored))
	}
	return done.Sub(t0), end.Sub(done), nil
}

// restoreCopy resumes a copy of a memory checkpoint by hand as container
// id: a writable snapshot of the disk (where disk says it is) in the
// pool's work area, a bundle that is m's config.json with that root and
// the /.cairn mounts on scratch, and `runsc restore --detach` of image,
// which returns once the container runs (checked after, untimed). It
// returns the whole time and runsc restore's. The caller removes the copy (e.floor.cleanup(id, e.tmp(id))).
func (e *env) restoreCopy(ctx context.Context, m *memSandbox, disk func() (string, error), image, id, scratch string, ph *phases) (total, restore time.Duration, err error) {
	root := e.tmp(id)
	t0 := time.Now()
	// A checkpoint cairnd moves meanwhile is looked up again.
	for try := 0; ; try++ {
		src, err := disk()
		if err == nil {
			err = e.floor.snapshot(ctx, src, root, false)
		}
		if err == nil {
			break
		}
		if try == 2 || ctx.Err() != nil {
			return 0, 0, err
		}
	}
	bundle := filepath.Join(e.floor.dir, id)
	if err := m.writeCopyBundle(bundle, root, scratch, browse.SandboxDir(filepath.Join(e.d.dataDir, "browse"), scratchView)); err != nil {
		return 0, 0, err
	}
	t1 := time.Now()
	if err := e.floor.restoreDetached(id, bundle, image); err != nil {
		return 0, 0, err
	}
	t2 := time.Now()
	// runsc restore --detach returns once the container runs; this only
	// checks that it does, untimed.
	if err := e.floor.waitRunning(ctx, id); err != nil {
		return 0, 0, err
	}
	if ph != nil {
		ph.add("snapshot + bundle", t1.Sub(t0))
		ph.add("runsc restore --detach", t2.Sub(t1))
	}
	return t2.Sub(t0), t2.Sub(t1), nil
}

// writeCopyBundle writes m's config.json into dir with root as the root,
// /.cairn on scratch and /.cairn/checkpoints on view (/.cairn/bin stays:
// cairn-init, mapped by the resumed process, must be the same file).
func (m *memSandbox) writeCopyBundle(dir, root, scratch, view string) error {
	var spec map[string]any
	if err := json.Unmarshal(m.template, &spec); err != nil {
		return fmt.Errorf("config.json of %s: %w", m.name, err)
	}
	r, ok := spec["root"].(map[string]any)
	if !ok {
		return fmt.Errorf("config.json of %s has no root", m.name)
	}
	r["path"] = root
	mounts, _ := spec["mounts"].([]any)
	for _, mt := range mounts {
		mm, _ := mt.(map[string]any)
		switch mm["destination"] {
		case "/.cairn":
			mm["source"] = filepath.Join(scratch, "dotcairn")
		case "/.cairn/checkpoints":
			mm["source"] = view
		}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// restoreDetached is `runsc restore --detach` of the bundle from image: it
// returns once the container runs.
func (b *bareRunsc) restoreDetached(id, bundle, image string) error {
	// The container's init inherits restore's stdio: a file, not a pipe.
	logf, err := os.OpenFile(filepath.Join(b.dir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := b.runsc("restore", "--detach", "--image-path="+image, "--bundle="+bundle, id)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("runsc restore --detach: %v: %s", err, lastLines(out, 5))
	}
	return nil
}

// waitRunning polls `runsc state` until container id runs.
func (b *bareRunsc) waitRunning(ctx context.Context, id string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := b.runsc("state", id).Output()
		if err != nil {
			return fmt.Errorf("runsc state %s: %w", id, err)
		}
		var st struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			return fmt.Errorf("runsc state %s: %w", id, err)
		}
		if st.Status == "running" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container %s is %s, not running, after a minute", id, st.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
