package checkpoint

import (
	"context"
	"fmt"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
)

// Change kinds.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Change is one difference between two file trees.
type Change struct {
	// Path is absolute inside the sandbox, e.g. /etc/hosts: the exact
	// bytes of the names, which need not be UTF-8 nor printable.
	Path string   `json:"path"`
	Kind string   `json:"kind"`           // added, removed or changed
	What []string `json:"what,omitempty"` // for changed: content, type, mode, owner
	Mode string   `json:"mode,omitempty"` // for a mode change: "0644 -> 0600"
}

// Diff lists what differs between the trees at from and to (a checkpoint's
// snapshot and a later one, or the live root). It compares metadata only
// (type, size, modification time, inode, mode, owner), never contents:
// btrfs snapshots keep inode numbers and times, so an untouched file looks
// exactly the same in both. Inside a removed or added directory every entry
// is listed. Both trees are read through directory descriptors (package
// hosttree): any depth, any name, and no symbolic link is followed.
func Diff(ctx context.Context, from, to string) ([]Change, error) {
	a, err := hosttree.OpenRoot(from)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b, err := hosttree.OpenRoot(to)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	d := &differ{ctx: ctx}
	if err := d.dir(a, b); err != nil {
		return nil, err
	}
	sort.Slice(d.out, func(i, j int) bool { return d.out[i].Path < d.out[j].Path })
	return d.out, nil
}

type differ struct {
	ctx   context.Context
	out   []Change
	stack []*hosttree.Dir // the open directories of both trees, for hosttree.Push
}

func abs(rel string) string { return "/" + rel }

// dir compares two directories of the same path.
func (d *differ) dir(a, b *hosttree.Dir) error {
	if err := d.ctx.Err(); err != nil {
		return err
	}
	na, err := a.Names()
	if err != nil {
		return err
	}
	nb, err := b.Names()
	if err != nil {
		return err
	}
	inB := make(map[string]bool, len(nb))
	for _, n := range nb {
		inB[n] = true
	}
	inA := make(map[string]bool, len(na))
	for _, name := range na {
		inA[name] = true
		if !inB[name] {
			if err := d.listAll(a, name, Removed); err != nil {
				return err
			}
		}
	}
	for _, name := range nb {
		if !inA[name] {
			if err := d.listAll(b, name, Added); err != nil {
				return err
			}
			continue
		}
		if err := d.entry(a, b, name); err != nil {
			return err
		}
	}
	return nil
}

// entry compares name, present in both directories.
func (d *differ) entry(a, b *hosttree.Dir, name string) error {
	p := a.Join(name)
	sa, err := a.Lstat(name)
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	sb, err := b.Lstat(name)
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	typeA, typeB := sa.Mode&unix.S_IFMT, sb.Mode&unix.S_IFMT
	if typeA != typeB {
		d.out = append(d.out, Change{Path: abs(p), Kind: Changed, What: []string{"type"}})
		if typeA == unix.S_IFDIR {
			if err := d.listChildren(a, name, Removed); err != nil {
				return err
			}
		}
		if typeB == unix.S_IFDIR {
			if err := d.listChildren(b, name, Added); err != nil {
				return err
			}
		}
		return nil
	}
	c := Change{Path: abs(p), Kind: Changed}
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
		d.out = append(d.out, c)
	}
	if typeA != unix.S_IFDIR {
		return nil
	}
	ca, err := a.OpenDir(name)
	if err != nil {
		return err
	}
	defer ca.Close()
	cb, err := b.OpenDir(name)
	if err != nil {
		return err
	}
	defer cb.Close()
	hosttree.Push(&d.stack, ca)
	hosttree.Push(&d.stack, cb)
	defer hosttree.Pop(&d.stack)
	defer hosttree.Pop(&d.stack)
	return d.dir(ca, cb)
}

// listAll reports name in dir and, if it is a directory, everything under it.
func (d *differ) listAll(dir *hosttree.Dir, name, kind string) error {
	d.out = append(d.out, Change{Path: abs(dir.Join(name)), Kind: kind})
	st, err := dir.Lstat(name)
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return d.listChildren(dir, name, kind)
	}
	return nil
}

// listChildren reports everything under the directory name in dir.
func (d *differ) listChildren(dir *hosttree.Dir, name, kind string) error {
	c, err := dir.OpenDir(name)
	if err != nil {
		return err
	}
	defer c.Close()
	hosttree.Push(&d.stack, c)
	defer hosttree.Pop(&d.stack)
	return hosttree.WalkIn(d.ctx, c, func(e *hosttree.Entry) error {
		d.out = append(d.out, Change{Path: abs(e.Path), Kind: kind})
		return nil
	})
}
