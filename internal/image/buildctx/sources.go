package buildctx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors Sources returns (wrapped, naming the pattern).
var (
	// ErrOutside: a source pattern that leaves the build context.
	ErrOutside = errors.New("outside the build context")
	// ErrNotFound: a source pattern that matches nothing.
	ErrNotFound = errors.New("not found in the build context")
)

// Source is one thing a COPY or ADD copies: a file, directory or symbolic
// link of the build context (or of another tree opened as a root). It is
// valid while the root given to Sources is open and unchanged.
type Source struct {
	// Path is where it is below the root, as the pattern named it (a
	// wildcard replaced by what it matched): '/'-separated, "." for the
	// root itself. A symbolic link on the way is kept in it, not
	// replaced by its target.
	Path string
	// Mode is its type and permissions, of the object itself (a
	// symbolic link is a link, not what it points to).
	Mode fs.FileMode

	tree   *tree
	parent string // Path's directory, "" for the root
	name   string // Path's last component, "" for the root
}

// IsDir reports whether the source is a directory (not a link to one).
func (s Source) IsDir() bool { return s.Mode.IsDir() }

// tree is the root a Source is in.
type tree struct {
	root     *os.File
	rootSt   unix.Stat_t
	reserved *unix.Stat_t // ReservedDir at the top, when it is a directory
}

// hidden reports whether st is the reserved directory: never a source,
// nor anything in it.
func (t *tree) hidden(st *unix.Stat_t) bool {
	return t.reserved != nil && sameFile(st, t.reserved)
}

// Sources resolves the source patterns of a COPY or ADD against root,
// the directory cairnd extracted the build context into (whose names came
// from the client: nothing in it is trusted), and returns what they name,
// pattern by pattern, each pattern's matches in byte order of the names.
//
// A pattern is a path relative to the root (a leading "/" is dropped) and
// is cleaned; one that leaves the root with ".." is an error wrapping
// ErrOutside. Its components may hold the wildcards of path.Match, matched
// against the names in the directory. The components before the last are
// directories, a symbolic link among them resolved inside the root (as if
// root were "/": a link can never lead out of it); the last component is
// taken as it is: a symbolic link is a source of its own, copied as a
// link. The reserved directory (ReservedDir) at the top of the root is
// never a source, whatever the path to it. A pattern that matches
// nothing is an error wrapping ErrNotFound.
func Sources(root *os.File, patterns []string) ([]Source, error) {
	if len(patterns) == 0 {
		return nil, errors.New("no source files were specified")
	}
	t := &tree{root: root}
	rootfd := fdOf(root)
	if err := unix.Fstat(rootfd, &t.rootSt); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: "the build context", Err: err}
	}
	if st, err := lstatAt(rootfd, ReservedDir); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		t.reserved = &st
	}
	var out []Source
	for _, p := range patterns {
		found, err := t.match(p)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	return out, nil
}

// cleanSource returns the source pattern p cleaned, below the root.
func cleanSource(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("source %q: a NUL byte", p)
	}
	rel := path.Clean(strings.TrimLeft(p, "/"))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("source %q: %w", p, ErrOutside)
	}
	return rel, nil
}

// hasMeta reports whether a component holds a wildcard (or an escape).
func hasMeta(c string) bool { return strings.ContainsAny(c, `*?[\`) }

// match returns what the pattern p matches.
func (t *tree) match(p string) ([]Source, error) {
	rel, err := cleanSource(p)
	if err != nil {
		return nil, err
	}
	comps := splitRel(rel)
	if len(comps) == 0 {
		return []Source{{Path: ".", Mode: fileMode(&t.rootSt), tree: t}}, nil
	}
	for _, c := range comps {
		if _, err := path.Match(c, ""); err != nil {
			return nil, fmt.Errorf("source %q: %w", p, err)
		}
	}
	wild := false
	parents := []string{""}
	for _, c := range comps[:len(comps)-1] {
		var next []string
		for _, dir := range parents {
			if !hasMeta(c) {
				next = append(next, joinRel(dir, c))
				continue
			}
			wild = true
			err := t.each(dir, c, func(dfd int, name string, st *unix.Stat_t) error {
				sub := joinRel(dir, name)
				fd, err := openIn(fdOf(t.root), sub, unix.O_PATH|unix.O_DIRECTORY)
				if err == nil {
					unix.Close(fd)
					next = append(next, sub)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("source %q: %w", p, err)
			}
		}
		parents = next
	}
	last := comps[len(comps)-1]
	wild = wild || hasMeta(last)
	var out []Source
	for _, dir := range parents {
		err := t.each(dir, last, func(dfd int, name string, st *unix.Stat_t) error {
			out = append(out, Source{Path: joinRel(dir, name), Mode: fileMode(st), tree: t, parent: dir, name: name})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", p, err)
		}
	}
	if len(out) == 0 {
		if wild {
			return nil, fmt.Errorf("source %q: no source files were specified: %w", p, ErrNotFound)
		}
		return nil, fmt.Errorf("source %q: file %w or excluded by .dockerignore", p, ErrNotFound)
	}
	return out, nil
}

// each calls fn for each name in the directory dir (resolved inside the
// root) that matches the component c, with its lstat, in byte order; a
// dir that does not exist or is not a directory holds nothing, and the
// reserved directory is never met.
func (t *tree) each(dir, c string, fn func(dfd int, name string, st *unix.Stat_t) error) error {
	dfd, err := openIn(fdOf(t.root), dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	d := openFile(dfd, "/"+dir)
	defer d.Close()
	var dst unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err != nil {
		return err
	}
	if t.hidden(&dst) {
		return nil
	}
	names := []string{c}
	if hasMeta(c) {
		if names, err = d.Readdirnames(-1); err != nil {
			return fmt.Errorf("read directory /%s: %w", dir, err)
		}
		slices.Sort(names)
	}
	for _, name := range names {
		if ok, _ := path.Match(c, name); !ok {
			continue
		}
		st, err := lstatAt(dfd, name)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "lstat", Path: "/" + joinRel(dir, name), Err: err}
		}
		if t.hidden(&st) {
			continue
		}
		if err := fn(dfd, name, &st); err != nil {
			return err
		}
	}
	return nil
}

// fileMode converts a stat's mode to an fs.FileMode.
func fileMode(st *unix.Stat_t) fs.FileMode {
	m := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// openParent opens the directory holding s (the root for the root
// itself), resolved inside the root.
func (s *Source) openParent() (*os.File, error) {
	fd, err := openIn(fdOf(s.tree.root), s.parent, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", s.Path, err)
	}
	return openFile(fd, "/"+s.parent), nil
}
