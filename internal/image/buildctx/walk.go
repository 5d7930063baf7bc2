package buildctx

import (
	"context"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// MaxDepth bounds how deep below a source directory a walk goes (the
// layer applier that extracted the context bounds names the same way).
const MaxDepth = 1024

// visitor is told what a walk of a source meets, the source itself as
// ".", the rest by their paths below it, a directory before what it holds
// (in byte order of the names) and left after it. Devices, sockets and
// FIFOs are not met: a build copies none.
type visitor interface {
	enter(rel string, st *unix.Stat_t) error
	leave(rel string, st *unix.Stat_t) error
	// file gets the regular file open for reading.
	file(rel string, st *unix.Stat_t, f *os.File) error
	symlink(rel string, st *unix.Stat_t, target string) error
}

// walk walks s for v, never following a symbolic link below s.
func (s *Source) walk(ctx context.Context, v visitor) error {
	parent, err := s.openParent()
	if err != nil {
		return err
	}
	defer parent.Close()
	name := s.name
	if name == "" {
		name = "."
	}
	st, err := lstatAt(fdOf(parent), name)
	if err != nil {
		return fmt.Errorf("source %q: %w", s.Path, err)
	}
	w := &walker{ctx: ctx, v: v, tree: s.tree}
	if err := w.entry(parent, name, ".", &st, 0); err != nil {
		return fmt.Errorf("source %q: %w", s.Path, err)
	}
	return nil
}

type walker struct {
	ctx  context.Context
	v    visitor
	tree *tree
}

// entry walks name in the directory d, at rel below the source.
func (w *walker) entry(d *os.File, name, rel string, st *unix.Stat_t, depth int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	dfd := fdOf(d)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, err := openChild(dfd, name, rel, unix.O_RDONLY, st)
		if err != nil {
			return err
		}
		defer f.Close()
		return w.v.file(rel, st, f)
	case unix.S_IFLNK:
		target, err := readlinkAt(dfd, name)
		if err != nil {
			return &os.PathError{Op: "readlink", Path: rel, Err: err}
		}
		return w.v.symlink(rel, st, target)
	case unix.S_IFDIR:
		if depth >= MaxDepth {
			return fmt.Errorf("%s: more than %d directories deep", rel, MaxDepth)
		}
		c, err := openChild(dfd, name, rel, unix.O_RDONLY|unix.O_DIRECTORY, st)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := w.v.enter(rel, st); err != nil {
			return err
		}
		names, err := c.Readdirnames(-1)
		if err != nil {
			return fmt.Errorf("read directory %s: %w", rel, err)
		}
		slices.Sort(names)
		for _, n := range names {
			cst, err := lstatAt(fdOf(c), n)
			if err != nil {
				return &os.PathError{Op: "lstat", Path: joinRel(rel, n), Err: err}
			}
			if w.tree.hidden(&cst) {
				continue
			}
			if err := w.entry(c, n, joinRel(rel, n), &cst, depth+1); err != nil {
				return err
			}
		}
		return w.v.leave(rel, st)
	}
	return nil
}

// openChild opens name in dfd (rel in errors), not following a symbolic
// link, and checks it is still the object st says.
func openChild(dfd int, name, rel string, flags int, st *unix.Stat_t) (*os.File, error) {
	fd, err := unix.Openat(dfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: rel, Err: err}
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if !sameFile(&got, st) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: changed while read", rel)
	}
	return openFile(fd, name), nil
}
