package hosttree

import (
	"context"
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// MaxOpen bounds the directory descriptors a walk holds: past that depth,
// the shallowest open ancestor is released and opened again when the walk
// comes back to it.
const MaxOpen = 256

// Entry is one name met by Walk.
type Entry struct {
	Path string      // below the root, '/'-separated; "." for the root
	Dir  *Dir        // the directory that holds it (the root for the root)
	Name string      // its name in Dir; "" for the root
	Stat unix.Stat_t // its lstat
}

// IsDir reports whether the entry is a directory (not a link to one).
func (e *Entry) IsDir() bool { return e.Stat.Mode&unix.S_IFMT == unix.S_IFDIR }

// WalkFunc is called for each entry; e.Dir is valid only during the call.
type WalkFunc func(e *Entry) error

// Walk calls fn for the root and everything below it, a directory before
// what it holds and the names of a directory in byte order (the order of
// filepath.WalkDir), without following any symbolic link. An error from
// fn, other than fs.SkipDir for a directory (which skips what it holds), ends the walk and is returned.
func Walk(ctx context.Context, root *Dir, fn WalkFunc) error {
	st, err := root.Lstat("")
	if err != nil {
		return err
	}
	e := &Entry{Path: ".", Dir: root, Stat: st}
	if err := fn(e); err != nil {
		if errors.Is(err, fs.SkipDir) {
			return nil
		}
		return err
	}
	w := &walker{ctx: ctx, fn: fn}
	return w.dir(root)
}

// WalkIn calls fn for everything below the open directory d (not d
// itself), as Walk does; entries' paths are below d's tree's root.
func WalkIn(ctx context.Context, d *Dir, fn WalkFunc) error {
	w := &walker{ctx: ctx, fn: fn}
	return w.dir(d)
}

type walker struct {
	ctx   context.Context
	fn    WalkFunc
	stack []*Dir // the open directories from the root's child down
}

func (w *walker) dir(d *Dir) error {
	names, err := d.Names()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		st, err := d.Lstat(name)
		if err != nil {
			return err
		}
		e := &Entry{Path: d.Join(name), Dir: d, Name: name, Stat: st}
		err = w.fn(e)
		if e.IsDir() && errors.Is(err, fs.SkipDir) {
			continue
		}
		if err != nil {
			return err
		}
		if !e.IsDir() {
			continue
		}
		if err := w.descend(d, name); err != nil {
			return err
		}
	}
	return nil
}

// descend walks the directory name in d.
func (w *walker) descend(d *Dir, name string) error {
	c, err := d.OpenDir(name)
	if err != nil {
		return err
	}
	defer c.Close()
	Push(&w.stack, c)
	defer Pop(&w.stack)
	return w.dir(c)
}

// Push adds an open directory to a stack of nested ones, releasing the
// shallowest still open when more than MaxOpen are.
func Push(stack *[]*Dir, d *Dir) {
	*stack = append(*stack, d)
	if n := len(*stack); n > MaxOpen {
		(*stack)[n-MaxOpen-1].Release()
	}
}

// Pop removes the deepest directory of a stack Push made (the caller
// closes it).
func Pop(stack *[]*Dir) {
	*stack = (*stack)[:len(*stack)-1]
}
