package unpack

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
)

// whiteout applies ".wh.victim" in the directory parent: victim goes, as
// the layers below left it, but what this layer itself wrote there stays
// (a whiteout hides only lower layers). Nothing there, or no such
// directory, is nothing to do; a symbolic link on the way is an error.
func (a *applier) whiteout(parent []string, victim string) error {
	d, err := a.cur.to(parent, nil)
	if gone(err) {
		a.stats.Whiteouts++
		return nil
	}
	if err != nil {
		return err
	}
	if err := a.purge(d, victim, a.layer.find(parent).kid(victim)); err != nil {
		return err
	}
	a.stats.Whiteouts++
	return nil
}

// opaque applies ".wh..wh..opq" in the directory comps: everything the
// layers below put there goes, and what this layer wrote there, before
// the marker or after it, stays.
func (a *applier) opaque(comps []string) error {
	d, err := a.cur.to(comps, nil)
	if gone(err) {
		a.stats.Whiteouts++
		return nil
	}
	if err != nil {
		return err
	}
	names, err := d.Names()
	if err != nil {
		return err
	}
	n := a.layer.find(comps)
	for _, name := range names {
		if err := a.purge(d, name, n.kid(name)); err != nil {
			return err
		}
	}
	a.stats.Whiteouts++
	return nil
}

// gone says whether cursor.to found no directory to apply a whiteout in.
func gone(err error) bool {
	return errors.Is(err, errMissing) || errors.Is(err, unix.ENOTDIR)
}

// purge removes name in d and what it holds, but for what this layer
// wrote: n is the layer's node of name (nil if it wrote nothing there).
func (a *applier) purge(d *hosttree.Dir, name string, n *node) error {
	if n == nil {
		return a.remove(d, name)
	}
	st, err := d.Lstat(name)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil // the layer's own
	}
	return a.eachIn(d, name, func(c *hosttree.Dir, k string) error { return a.purge(c, k, n.kid(k)) })
}

// eachIn calls fn with each name in the directory name in d, opened
// (and kept on the stack of open directories) for the while.
func (a *applier) eachIn(d *hosttree.Dir, name string, fn func(c *hosttree.Dir, k string) error) error {
	c, err := d.OpenDir(name)
	if err != nil {
		return err
	}
	defer c.Close()
	hosttree.Push(&a.stack, c)
	defer hosttree.Pop(&a.stack)
	names, err := c.Names()
	if err != nil {
		return err
	}
	for _, k := range names {
		if err := fn(c, k); err != nil {
			return err
		}
	}
	return nil
}

// remove removes name in d, and all it holds if it is a directory; it
// never follows a symbolic link, and deep trees hold at most
// hosttree.MaxOpen descriptors.
func (a *applier) remove(d *hosttree.Dir, name string) error {
	if err := a.ctx.Err(); err != nil {
		return err
	}
	dfd, err := d.Fd()
	if err != nil {
		return err
	}
	err = unix.Unlinkat(dfd, name, 0)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case !errors.Is(err, unix.EISDIR):
		return &os.PathError{Op: "unlinkat", Path: hosttree.Quote(d.Join(name)), Err: err}
	}
	if err := a.eachIn(d, name, a.remove); err != nil {
		return err
	}
	if dfd, err = d.Fd(); err != nil {
		return err
	}
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil {
		return &os.PathError{Op: "rmdir", Path: hosttree.Quote(d.Join(name)), Err: err}
	}
	return nil
}

// setDirTimes sets the times of the directories the layer's entries gave,
// now that all they hold is made. A path that is no longer the directory
// (a later entry replaced it) is passed over.
func (a *applier) setDirTimes() error {
	for _, t := range a.dirs {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		if t.n == nil {
			continue // removed, or given again by a later entry
		}
		comps := t.n.path()
		d, name := a.root, "."
		if len(comps) > 0 {
			var err error
			d, err = a.cur.to(comps[:len(comps)-1], nil)
			if gone(err) || errors.Is(err, ErrUnsafe) {
				continue
			}
			if err != nil {
				return err
			}
			name = comps[len(comps)-1]
		}
		st, err := d.Lstat(name)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev != t.dev || st.Ino != t.ino {
			continue
		}
		if err := setTimes(d, name, t.ts); err != nil {
			return err
		}
	}
	return nil
}
