package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/internal/sandbox/runsc"
)

// bareRunsc runs containers by hand with runsc, the floor cairn builds on.
// Its containers live in dir/state; the daemon's stop removes whatever of
// them is left.
type bareRunsc struct {
	binary, dir, image string
	// inherit are the higher-level quota groups of the pool, which cairn
	// puts every subvolume in (`-i GROUP`). The floor's snapshots go in
	// them too: a snapshot left outside marks the pool's quota data
	// inconsistent, and btrfs then stops accounting, which would skew
	// every later figure (and cairn's disk usage).
	inherit []string
}

// quotaParents lists the pool's quota groups above level 0 ("1/1").
func quotaParents(ctx context.Context, pool string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "btrfs", "qgroup", "show", "--raw", pool).Output()
	if err != nil {
		return nil, fmt.Errorf("btrfs qgroup show %s: %w", pool, err)
	}
	var groups []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.Contains(f[0], "/") && !strings.HasPrefix(f[0], "0/") && f[0] != "Qgroupid" {
			groups = append(groups, f[0])
		}
	}
	return groups, nil
}

// quotaInconsistent reports whether btrfs says the pool's quota data needs
// a rescan.
func quotaInconsistent(ctx context.Context, pool string) bool {
	out, _ := exec.CommandContext(ctx, "btrfs", "qgroup", "show", "--raw", pool).CombinedOutput()
	return strings.Contains(string(out), "inconsistent")
}

// snapshot makes dst a snapshot of src as cairn makes them (same quota
// groups); readOnly as `-r`.
func (b *bareRunsc) snapshot(ctx context.Context, src, dst string, readOnly bool) error {
	args := []string{"subvolume", "snapshot"}
	if readOnly {
		args = append(args, "-r")
	}
	for _, g := range b.inherit {
		args = append(args, "-i", g)
	}
	return btrfs(ctx, append(args, src, dst)...)
}

func (b *bareRunsc) runsc(args ...string) *exec.Cmd {
	return exec.Command(b.binary, append([]string{"--root=" + filepath.Join(b.dir, "state"), "--overlay2=none", "--host-uds=open", "--network=none"}, args...)...)
}

// bundle snapshots the image to root and writes a bundle running args.
func (b *bareRunsc) bundle(ctx context.Context, id, root string, args []string) (string, error) {
	return b.bundleFrom(ctx, b.image, id, root, args)
}

// bundleFrom makes root a writable snapshot of source and writes a bundle
// for container id running args on it.
func (b *bareRunsc) bundleFrom(ctx context.Context, source, id, root string, args []string) (string, error) {
	if err := b.snapshot(ctx, source, root, false); err != nil {
		return "", err
	}
	bundle := filepath.Join(b.dir, id)
	spec := runsc.Spec{ID: id, Hostname: id, Root: root, Args: args, Env: []string{"PATH=/bin:/usr/bin"}, BundleDir: bundle}
	return bundle, runsc.WriteBundle(spec)
}

func (b *bareRunsc) cleanup(id, root string) {
	b.runsc("delete", "--force", id).Run()
	exec.Command("btrfs", "subvolume", "delete", root).Run()
	os.RemoveAll(filepath.Join(b.dir, id))
}

// runDetached is `runsc run --detach` of the bundle: it returns once the
// container runs.
func (b *bareRunsc) runDetached(id, bundle string) error {
	// The container's init inherits run's stdio: give it a file, not a
	// pipe that would stay open as long as the container runs.
	logf, err := os.OpenFile(filepath.Join(b.dir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := b.runsc("run", "--detach", "--bundle="+bundle, id)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("runsc run --detach: %v: %s", err, lastLines(out, 5))
	}
	return nil
}

// deleteForce is `runsc delete --force`: kills the container and removes it.
func (b *bareRunsc) deleteForce(id string) error {
	if out, err := b.runsc("delete", "--force", id).CombinedOutput(); err != nil {
		return fmt.Errorf("runsc delete: %v: %s", err, trimOut(out))
	}
	return nil
}

// runTrue times snapshot + `runsc run` of a container whose process is `true`.
func (b *bareRunsc) runTrue(ctx context.Context, id, root string) (time.Duration, error) {
	t0 := time.Now()
	bundle, err := b.bundle(ctx, id, root, []string{"/bin/true"})
	if err != nil {
		return 0, err
	}
	cmd := b.runsc("run", "--bundle="+bundle, id)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("runsc run: %v: %s", err, out)
	}
	dt := time.Since(t0)
	b.cleanup(id, root)
	return dt, nil
}

// execTrue starts a container running sleep and times n `runsc exec true`.
func (b *bareRunsc) execTrue(ctx context.Context, id, root string, n int) ([]time.Duration, error) {
	bundle, err := b.bundle(ctx, id, root, []string{"/bin/sleep", "100000"})
	if err != nil {
		return nil, err
	}
	defer b.cleanup(id, root)
	// The container's init inherits create's stdio: give it a file, not a
	// pipe that would stay open as long as the container runs.
	logf, err := os.Create(filepath.Join(b.dir, id+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	create := b.runsc("create", "--bundle="+bundle, id)
	create.Stdout, create.Stderr = logf, logf
	create.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := create.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("runsc create: %v: %s", err, out)
	}
	if out, err := b.runsc("start", id).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("runsc start: %v: %s", err, out)
	}
	var ds []time.Duration
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if out, err := b.runsc("exec", id, "/bin/true").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("runsc exec: %v: %s", err, trimOut(out))
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

// btrfs runs the btrfs tool; its output is in the error.
func btrfs(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, "btrfs", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("btrfs %s: %v: %s", strings.Join(args, " "), err, trimOut(out))
	}
	return nil
}

// reclaim deletes a subvolume the way cairn deletes a checkpoint: commit,
// then wait until btrfs' cleaner has dropped it, so the next measurement
// does not run beside the cleanup of this one. It waits for this
// subvolume only, not for every deleted one of the pool (a checkpoint
// deleted while browsed may be held open by gVisor).
func reclaim(ctx context.Context, pool, path string) error {
	id, err := subvolumeID(ctx, path)
	if err != nil {
		return err
	}
	if err := btrfs(ctx, "subvolume", "delete", "--commit-after", path); err != nil {
		return err
	}
	return waitCleaned(ctx, pool, id)
}

// waitCleaned waits until btrfs' cleaner has dropped the deleted
// subvolume id. The cleaner may otherwise sleep until the next periodic
// commit (30 s): every `btrfs filesystem sync` (BTRFS_IOC_SYNC) commits
// and wakes it. (`btrfs subvolume sync` only polls, once a second.)
func waitCleaned(ctx context.Context, pool, id string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, err := exec.CommandContext(ctx, "btrfs", "subvolume", "list", "-d", pool).CombinedOutput()
		if err != nil {
			return fmt.Errorf("btrfs subvolume list -d %s: %v: %s", pool, err, trimOut(out))
		}
		pending := false
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "ID" && f[1] == id {
				pending = true
			}
		}
		if !pending {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deleted subvolume %s of %s still not cleaned after 3 minutes", id, pool)
		}
		if err := btrfs(ctx, "filesystem", "sync", pool); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// subvolumeID is btrfs' id of the subvolume at path.
func subvolumeID(ctx context.Context, path string) (string, error) {
	out, err := exec.CommandContext(ctx, "btrfs", "subvolume", "show", path).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("btrfs subvolume show %s: %v: %s", path, err, trimOut(out))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Subvolume ID:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("btrfs subvolume show %s: no subvolume id in %q", path, out)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
