package unpack

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/internal/hosttree"
)

// splitName returns the components of a name of the layer (an entry's, or
// a hard link's target), below the root: leading "/"s are dropped, "."
// and empty components too, and a ".." component is refused (never
// clamped to the root). No component is a symbolic link's business here:
// walking them is. The root itself has no components. A directory on the
// way may not be named like a whiteout: no layer can hold one.
func splitName(name string) ([]string, error) {
	switch {
	case name == "":
		return nil, fmt.Errorf("%w: an empty name", ErrInvalid)
	case len(name) > MaxNameLen:
		return nil, fmt.Errorf("%w: a name of %d bytes (at most %d)", ErrLimit, len(name), MaxNameLen)
	case strings.IndexByte(name, 0) >= 0:
		return nil, fmt.Errorf("%w: a NUL byte in a name", ErrInvalid)
	}
	rel := strings.TrimLeft(name, "/")
	for c := range strings.SplitSeq(rel, "/") {
		if c == ".." {
			return nil, fmt.Errorf("%w: a \"..\" in %s", ErrUnsafe, hosttree.Quote(name))
		}
	}
	rel = path.Clean(rel)
	if rel == "." {
		return nil, nil
	}
	comps := strings.Split(rel, "/")
	if len(comps) > MaxDepth {
		return nil, fmt.Errorf("%w: a name of %d components (at most %d)", ErrLimit, len(comps), MaxDepth)
	}
	for i, c := range comps {
		if len(c) > unix.NAME_MAX {
			return nil, fmt.Errorf("%w: a component of %d bytes (at most %d)", ErrInvalid, len(c), unix.NAME_MAX)
		}
		if i < len(comps)-1 && strings.HasPrefix(c, whiteoutPrefix) {
			return nil, fmt.Errorf("%w: the directory %s is named as a whiteout", ErrInvalid, hosttree.Quote(c))
		}
	}
	return comps, nil
}

// node is a path the layer wrote (an entry) or passed (a parent of an
// entry), in a tree of them from the root.
type node struct {
	parent *node
	name   string
	kids   map[string]*node
	times  int // 1 + the index in applier.dirs of its times, or 0
}

// add returns the node of comps below n, adding what is missing.
func (n *node) add(comps []string) *node {
	for _, c := range comps {
		k := n.kids[c]
		if k == nil {
			if n.kids == nil {
				n.kids = map[string]*node{}
			}
			// A copy: c is part of a name that may be long.
			k = &node{parent: n, name: strings.Clone(c)}
			n.kids[k.name] = k
		}
		n = k
	}
	return n
}

// find returns the node of comps below n, or nil.
func (n *node) find(comps []string) *node {
	for _, c := range comps {
		if n = n.kids[c]; n == nil {
			return nil
		}
	}
	return n
}

// kid returns the node of name in n, or nil; n may be nil.
func (n *node) kid(name string) *node {
	if n == nil {
		return nil
	}
	return n.kids[name]
}

// path returns n's components below the root.
func (n *node) path() []string {
	var comps []string
	for ; n.parent != nil; n = n.parent {
		comps = append(comps, n.name)
	}
	for i, j := 0, len(comps)-1; i < j; i, j = i+1, j-1 {
		comps[i], comps[j] = comps[j], comps[i]
	}
	return comps
}

// cursor walks to the directories entries go into and keeps the last
// one's ancestry open: entries of one directory come one after another
// in a tar. Each step opens one name in an open directory, with
// O_NOFOLLOW: a symbolic link on the way is refused, never followed.
//
// The directories it holds stay valid because the applier only ever
// removes names in the directory it last walked to, never one of its
// ancestors.
type cursor struct {
	root  *hosttree.Dir
	names []string
	dirs  []*hosttree.Dir // dirs[i] is names[:i+1]; past hosttree.MaxOpen, released
}

// errMissing is wrapped by cursor.to when a directory on the way does not
// exist and none is to be made.
var errMissing = errors.New("no such directory")

// to returns the directory comps below the root. A missing directory on
// the way is made by mk, or, if mk is nil, is an error wrapping
// errMissing; a non-directory on the way is an error wrapping ENOTDIR and
// ErrInvalid, and a symbolic link one wrapping ErrUnsafe.
func (c *cursor) to(comps []string, mk func(d *hosttree.Dir, name string) (*hosttree.Dir, error)) (*hosttree.Dir, error) {
	k := 0
	for k < len(c.names) && k < len(comps) && c.names[k] == comps[k] {
		k++
	}
	for len(c.dirs) > k {
		c.pop()
	}
	for i := k; i < len(comps); i++ {
		parent := c.root
		if i > 0 {
			parent = c.dirs[i-1]
		}
		d, err := openDir(parent, comps[i], mk)
		if err != nil {
			return nil, err
		}
		hosttree.Push(&c.dirs, d)
		c.names = append(c.names, comps[i])
	}
	if len(comps) == 0 {
		return c.root, nil
	}
	return c.dirs[len(comps)-1], nil
}

func (c *cursor) pop() {
	d := c.dirs[len(c.dirs)-1]
	hosttree.Pop(&c.dirs)
	c.names = c.names[:len(c.dirs)]
	d.Close()
}

func (c *cursor) close() {
	for len(c.dirs) > 0 {
		c.pop()
	}
}

// openDir opens the directory name in d, making it with mk when missing
// (unless mk is nil), and says what is in the way otherwise.
func openDir(d *hosttree.Dir, name string, mk func(d *hosttree.Dir, name string) (*hosttree.Dir, error)) (*hosttree.Dir, error) {
	c, err := d.OpenDir(name)
	if err == nil {
		return c, nil
	}
	q := hosttree.Quote(d.Join(name))
	if errors.Is(err, unix.ENOENT) {
		if mk != nil {
			return mk(d, name)
		}
		return nil, fmt.Errorf("%s: %w", q, errMissing)
	}
	st, lerr := d.Lstat(name)
	switch {
	case lerr != nil:
		return nil, err
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return nil, fmt.Errorf("%w: %s is a symbolic link", ErrUnsafe, q)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, q, unix.ENOTDIR)
	}
	return nil, err
}
