package volume

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// poolGroup is the level-1 quota group every subvolume of the pool belongs
// to (each is created with `-i poolGroup`). Its exclusive bytes count data
// shared between subvolumes once: the pool's content.
const poolGroup = "1/1"

// Usage is the space of one subvolume, from btrfs quota groups.
type Usage struct {
	Referenced int64 // bytes the subvolume refers to, shared or not
	Exclusive  int64 // bytes only this subvolume holds: what deleting it frees
}

// qgroup is one line of `btrfs qgroup show`.
type qgroup struct {
	id   string // "0/258", "1/1"
	path string // relative to the pool; "" for higher-level groups
	Usage
	MaxReferenced int64 // its limit; 0: none
}

// setUpQuota turns on btrfs quota groups, which account each subvolume's
// referenced and exclusive bytes as extents are shared and unshared, and
// makes sure the pool group exists with every subvolume in it. A pool made
// before the group existed gets its subvolumes assigned and one rescan.
func (p *Pool) setUpQuota(ctx context.Context) error {
	if err := run(ctx, "btrfs", "quota", "enable", p.root); err != nil {
		return fmt.Errorf("enable btrfs quota: %w", err)
	}
	// Figures marked inconsistent (a crash mid-accounting, an old kernel)
	// are recounted once here, not trusted.
	if out, err := exec.CommandContext(ctx, "btrfs", "qgroup", "show", p.root).CombinedOutput(); err == nil && bytes.Contains(out, []byte("inconsistent")) {
		if err := run(ctx, "btrfs", "quota", "rescan", "-w", p.root); err != nil {
			return fmt.Errorf("quota rescan: %w", err)
		}
	}
	groups, err := p.qgroups(ctx)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if g.id == poolGroup {
			return nil
		}
	}
	if err := run(ctx, "btrfs", "qgroup", "create", poolGroup, p.root); err != nil {
		return fmt.Errorf("create quota group: %w", err)
	}
	assigned := false
	for _, g := range groups {
		if strings.HasPrefix(g.id, "0/") && g.path != "" && g.id != "0/5" && !strings.Contains(g.path, "<") {
			if err := run(ctx, "btrfs", "qgroup", "assign", "--no-rescan", g.id, poolGroup, p.root); err != nil {
				return fmt.Errorf("assign %s to the pool group: %w", g.path, err)
			}
			assigned = true
		}
	}
	if assigned {
		if err := run(ctx, "btrfs", "quota", "rescan", "-w", p.root); err != nil {
			return fmt.Errorf("quota rescan: %w", err)
		}
	}
	return nil
}

// Usage returns the usage of every subvolume in the pool, by path relative
// to the pool's root (e.g. "checkpoints/ab12…"). It commits the pool's
// current transaction first: quota groups are accounted at commit, so
// without it recent writes and deletes would not show yet.
func (p *Pool) Usage(ctx context.Context) (map[string]Usage, error) {
	groups, err := p.qgroups(ctx)
	if err != nil {
		return nil, err
	}
	usage := map[string]Usage{}
	for _, g := range groups {
		if g.path != "" {
			usage[g.path] = g.Usage
		}
	}
	return usage, nil
}

// ContentUsage is the space the pool's sandboxes and checkpoints take, data
// shared between them counted once, images not counted.
func (p *Pool) ContentUsage(ctx context.Context) (int64, error) {
	groups, err := p.qgroups(ctx)
	if err != nil {
		return 0, err
	}
	var total, images int64
	for _, g := range groups {
		switch {
		case g.id == poolGroup:
			total = g.Exclusive
		case strings.HasPrefix(g.path, "images/"):
			images += g.Referenced
		}
	}
	return max(total-images, 0), nil
}

func (p *Pool) qgroups(ctx context.Context) ([]qgroup, error) {
	if err := p.commit(); err != nil {
		return nil, err
	}
	// It lists the groups, then looks up each subvolume's path: one
	// deleted in between (a checkpoint, a replaced root, a restore's
	// staging) can make it fail. Another try does not meet the same
	// change.
	for attempt := 1; ; attempt++ {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "btrfs", "qgroup", "show", "--raw", "-re", p.root)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil {
			return parseQgroups(out), nil
		}
		if attempt == qgroupTries || ctx.Err() != nil {
			return nil, fmt.Errorf("btrfs qgroup show: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
}

// qgroupTries is how many times qgroups runs `btrfs qgroup show`.
const qgroupTries = 3

// parseQgroups reads `btrfs qgroup show --raw -re` output:
//
//	Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive   Path
//	--------    ----------    ---------  --------------  -------------   ----
//	0/258         54558720        16384            none           none   sandboxes/0626…
//	1/1           33521664     33521664            none           none   <0 member qgroups>
func parseQgroups(out []byte) []qgroup {
	var groups []qgroup
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.Contains(f[0], "/") {
			continue
		}
		rfer, err1 := strconv.ParseInt(f[1], 10, 64)
		excl, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		g := qgroup{id: f[0], Usage: Usage{Referenced: rfer, Exclusive: excl}}
		if f[3] != "none" {
			g.MaxReferenced, _ = strconv.ParseInt(f[3], 10, 64)
		}
		if len(f) > 5 && !strings.HasPrefix(f[5], "<") {
			g.path = filepath.Clean(strings.TrimPrefix(strings.Join(f[5:], " "), "<FS_TREE>/"))
		}
		groups = append(groups, g)
	}
	return groups
}

// Rel returns path relative to the pool's root, the key of Usage.
func (p *Pool) Rel(path string) string {
	rel, err := filepath.Rel(p.root, path)
	if err != nil {
		return path
	}
	return rel
}

// commit writes out the pool's current btrfs transaction (syncfs).
func (p *Pool) commit() error {
	f, err := os.Open(p.root)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync pool: %w", err)
	}
	return nil
}
