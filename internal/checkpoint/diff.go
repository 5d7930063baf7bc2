package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Change kinds.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Change is one difference between two file trees.
type Change struct {
	Path string   `json:"path"`           // absolute inside the sandbox, e.g. /etc/hosts
	Kind string   `json:"kind"`           // added, removed or changed
	What []string `json:"what,omitempty"` // for changed: content, type, mode, owner
	Mode string   `json:"mode,omitempty"` // for a mode change: "0644 -> 0600"
}

// Diff lists what differs between the trees at from and to (a checkpoint's
// snapshot and a later one, or the live root). It compares metadata only
// (type, size, modification time, inode, mode, owner), never contents:
// btrfs snapshots keep inode numbers and times, so an untouched file looks
// exactly the same in both. Inside a removed or added directory every entry
// is listed.
func Diff(ctx context.Context, from, to string) ([]Change, error) {
	var out []Change
	if err := diffDir(ctx, from, to, "/", &out); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func diffDir(ctx context.Context, fromRoot, toRoot, rel string, out *[]Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a, err := readNames(filepath.Join(fromRoot, rel))
	if err != nil {
		return err
	}
	b, err := readNames(filepath.Join(toRoot, rel))
	if err != nil {
		return err
	}
	for name := range a {
		if _, ok := b[name]; !ok {
			if err := listAll(ctx, fromRoot, path.Join(rel, name), Removed, out); err != nil {
				return err
			}
		}
	}
	for name := range b {
		p := path.Join(rel, name)
		if _, ok := a[name]; !ok {
			if err := listAll(ctx, toRoot, p, Added, out); err != nil {
				return err
			}
			continue
		}
		var sa, sb unix.Stat_t
		if err := unix.Lstat(filepath.Join(fromRoot, p), &sa); err != nil {
			return fmt.Errorf("diff %s: %w", p, err)
		}
		if err := unix.Lstat(filepath.Join(toRoot, p), &sb); err != nil {
			return fmt.Errorf("diff %s: %w", p, err)
		}
		typeA, typeB := sa.Mode&unix.S_IFMT, sb.Mode&unix.S_IFMT
		if typeA != typeB {
			*out = append(*out, Change{Path: p, Kind: Changed, What: []string{"type"}})
			if typeA == unix.S_IFDIR {
				if err := listChildren(ctx, fromRoot, p, Removed, out); err != nil {
					return err
				}
			}
			if typeB == unix.S_IFDIR {
				if err := listChildren(ctx, toRoot, p, Added, out); err != nil {
					return err
				}
			}
			continue
		}
		c := Change{Path: p, Kind: Changed}
		if typeA != unix.S_IFDIR && (sa.Size != sb.Size || sa.Mtim != sb.Mtim || sa.Ino != sb.Ino) {
			c.What = append(c.What, "content")
		}
		if sa.Mode&07777 != sb.Mode&07777 {
			c.What = append(c.What, "mode")
			c.Mode = fmt.Sprintf("%04o -> %04o", sa.Mode&07777, sb.Mode&07777)
		}
		if sa.Uid != sb.Uid || sa.Gid != sb.Gid {
			c.What = append(c.What, "owner")
		}
		if len(c.What) > 0 {
			*out = append(*out, c)
		}
		if typeA == unix.S_IFDIR {
			if err := diffDir(ctx, fromRoot, toRoot, p, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// listAll reports p and, if it is a directory, everything under it.
func listAll(ctx context.Context, root, p, kind string, out *[]Change) error {
	*out = append(*out, Change{Path: p, Kind: kind})
	fi, err := os.Lstat(filepath.Join(root, p))
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return listChildren(ctx, root, p, kind, out)
	}
	return nil
}

func listChildren(ctx context.Context, root, p, kind string, out *[]Change) error {
	return filepath.WalkDir(filepath.Join(root, p), func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, full)
		if "/"+rel == p {
			return nil
		}
		*out = append(*out, Change{Path: "/" + rel, Kind: kind})
		return nil
	})
}

// readNames returns the entry names of dir; a missing dir has none.
func readNames(dir string) (map[string]struct{}, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]struct{}{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return set, nil
}
