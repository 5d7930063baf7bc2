package volume

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Usage is the space of one subvolume, from btrfs quota groups.
type Usage struct {
	Referenced int64 // bytes the subvolume refers to, shared or not
	Exclusive  int64 // bytes only this subvolume holds: what deleting it frees
}

// enableQuota turns on btrfs quota groups, which account each subvolume's
// referenced and exclusive bytes as extents are shared and unshared.
func (p *Pool) enableQuota(ctx context.Context) error {
	if err := run(ctx, "btrfs", "quota", "enable", p.root); err != nil {
		return fmt.Errorf("enable btrfs quota: %w", err)
	}
	return nil
}

// Usage returns the usage of every subvolume in the pool, by path relative
// to the pool's root (e.g. "checkpoints/ab12…"). It commits the pool's
// current transaction first: quota groups are accounted at commit, so
// without it recent writes and deletes would not show yet.
func (p *Pool) Usage(ctx context.Context) (map[string]Usage, error) {
	if err := p.commit(); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, "btrfs", "qgroup", "show", "--raw", "-re", p.root).Output()
	if err != nil {
		return nil, fmt.Errorf("btrfs qgroup show: %w", err)
	}
	return parseQgroups(out), nil
}

// parseQgroups reads `btrfs qgroup show --raw -re` output:
//
//	Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive   Path
//	--------    ----------    ---------  --------------  -------------   ----
//	0/258         54558720        16384            none           none   sandboxes/0626…
func parseQgroups(out []byte) map[string]Usage {
	usage := map[string]Usage{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[0], "0/") {
			continue
		}
		rfer, err1 := strconv.ParseInt(f[1], 10, 64)
		excl, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		path := strings.Join(f[5:], " ")
		path = strings.TrimPrefix(path, "<FS_TREE>/")
		usage[filepath.Clean(path)] = Usage{Referenced: rfer, Exclusive: excl}
	}
	return usage
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
