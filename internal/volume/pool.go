package volume

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultLoopSize is the size of a new pool's sparse loop file.
const DefaultLoopSize = 20 << 30

// Pool is an opened btrfs pool.
type Pool struct {
	root string // mount point or btrfs directory
}

// OpenLoop opens the pool kept in the sparse loop file dataDir/pool.img,
// mounted at dataDir/pool. On first use it creates the file with the given
// size and formats it; later it mounts it again if it is not mounted already.
func OpenLoop(ctx context.Context, dataDir string, size int64) (*Pool, error) {
	if size <= 0 {
		size = DefaultLoopSize
	}
	img := filepath.Join(dataDir, "pool.img")
	mnt := filepath.Join(dataDir, "pool")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return nil, err
	}
	mounted, err := isMountPoint(mnt)
	if err != nil {
		return nil, err
	}
	if !mounted {
		if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
			if err := createLoopFile(ctx, img, size); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, err
		}
		if err := run(ctx, "mount", "-o", "loop,noatime", img, mnt); err != nil {
			return nil, fmt.Errorf("mount pool %s: %w", img, err)
		}
		slog.Info("pool mounted", "file", img, "at", mnt)
	}
	return OpenDir(mnt)
}

func createLoopFile(ctx context.Context, img string, size int64) error {
	tmp := img + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := run(ctx, "mkfs.btrfs", "-q", "-f", tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("format pool: %w", err)
	}
	if err := os.Rename(tmp, img); err != nil {
		return err
	}
	slog.Info("pool created", "file", img, "size", size)
	return nil
}

// OpenDir opens a pool on an existing btrfs directory.
func OpenDir(dir string) (*Pool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("pool %s: %w", dir, err)
	}
	if st.Type != unix.BTRFS_SUPER_MAGIC {
		return nil, fmt.Errorf("pool %s is not on btrfs", dir)
	}
	p := &Pool{root: dir}
	for _, d := range []string{"images", "sandboxes", "checkpoints", "memory", "cache", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if err := p.sweepTmp(); err != nil {
		return nil, err
	}
	if err := p.setUpQuota(context.Background()); err != nil {
		return nil, err
	}
	return p, nil
}

// Root is the pool's directory.
func (p *Pool) Root() string { return p.root }

// ImagePath is where the image subvolume called name lives.
func (p *Pool) ImagePath(name string) string { return filepath.Join(p.root, "images", name) }

// CachePath is where the cached read-only subvolume key lives: what an
// image pull or build can start from instead of doing the work again (a
// chain of layers applied, a build step's result). Anything there may be
// deleted at any time but while it is being snapshotted from.
func (p *Pool) CachePath(key string) string { return filepath.Join(p.root, "cache", key) }

// CacheNames lists the cached subvolumes (their keys).
func (p *Pool) CacheNames() ([]string, error) { return p.names("cache") }

// SandboxPath is where the root subvolume of sandbox id lives.
func (p *Pool) SandboxPath(id string) string { return filepath.Join(p.root, "sandboxes", id) }

// CheckpointPath is where the read-only snapshot of checkpoint id lives.
func (p *Pool) CheckpointPath(id string) string { return filepath.Join(p.root, "checkpoints", id) }

// MemoryPath is where the memory image of checkpoint id lives: a subvolume
// of its own, so that its size is accounted like the disk snapshot's.
func (p *Pool) MemoryPath(id string) string { return filepath.Join(p.root, "memory", id) }

// RootNames lists the sandbox root subvolumes (their sandbox ids).
func (p *Pool) RootNames() ([]string, error) { return p.names("sandboxes") }

// CheckpointNames lists the checkpoint disks (their checkpoint ids).
func (p *Pool) CheckpointNames() ([]string, error) { return p.names("checkpoints") }

// MemoryNames lists the memory images (their checkpoint ids).
func (p *Pool) MemoryNames() ([]string, error) { return p.names("memory") }

func (p *Pool) names(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(p.root, dir))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name()
	}
	return out, nil
}

// TempPath returns a path in the work area for a subvolume being built.
// Whatever is left there is deleted when the pool is next opened.
func (p *Pool) TempPath(name string) string { return filepath.Join(p.root, "tmp", name) }

// sweepTmp deletes what an interrupted build left in the work area.
func (p *Pool) sweepTmp() error {
	entries, err := os.ReadDir(filepath.Join(p.root, "tmp"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		path := filepath.Join(p.root, "tmp", e.Name())
		slog.Info("pool: removing leftover", "path", path)
		if err := p.Delete(context.Background(), path); err != nil {
			return err
		}
	}
	return nil
}

func isMountPoint(dir string) (bool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return false, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountPath(fields[4]) == abs {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMountPath undoes the octal escapes (\040 for space…) of mountinfo.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			return fmt.Errorf("%s: %w", name, err)
		}
		return fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	return nil
}
