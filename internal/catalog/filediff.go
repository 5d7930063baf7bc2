package catalog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/textdiff"
	"golang.org/x/sys/unix"
)

// DiffFile returns how the file at path (as the sandbox sees it, e.g.
// /etc/app.conf) differs between checkpoint from and checkpoint to (""
// the current disk). Each tree is read through package hosttree, never
// following a symbolic link: a link shows as not a regular file. F01 when
// neither side has the file.
func (c *Catalog) DiffFile(ctx context.Context, account, name, from, to, file string) (api.FileDiff, error) {
	parts, err := diffPath(file)
	if err != nil {
		return api.FileDiff{}, err
	}
	fromPath, toPath, done, err := c.diffTrees(ctx, account, name, from, to)
	if err != nil {
		return api.FileDiff{}, err
	}
	defer done()
	out := api.FileDiff{Path: "/" + strings.Join(parts, "/")}
	a, err := readSide(fromPath, parts)
	if err != nil {
		return out, err
	}
	b, err := readSide(toPath, parts)
	if err != nil {
		return out, err
	}
	switch {
	case a.missing && b.missing:
		return out, errdefs.New(api.CodeNoFile, "%s is in neither state", out.Path)
	case a.tooLarge || b.tooLarge:
		out.TooLarge = true
	case a.binary || b.binary:
		out.Binary = true
	default:
		nameA, nameB := from+out.Path, "now"+out.Path
		if to != "" {
			nameB = to + out.Path
		}
		if a.missing {
			nameA = "/dev/null"
		}
		if b.missing {
			nameB = "/dev/null"
		}
		diff, ok := textdiff.Unified(nameA, nameB, string(a.data), string(b.data))
		out.Unified, out.TooLarge = diff, !ok
	}
	return out, nil
}

// diffPath checks a path of a file in the sandbox and returns its names.
func diffPath(p string) ([]string, error) {
	bad := errdefs.New(api.CodeInvalidArgument, "path %q: an absolute path of a file in the sandbox, such as /etc/hosts", p)
	if !strings.HasPrefix(p, "/") || len(p) > 4096 || strings.ContainsRune(p, 0) || path.Clean(p) != p || p == "/" {
		return nil, bad
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, n := range parts {
		if n == "" || n == "." || n == ".." {
			return nil, bad
		}
	}
	return parts, nil
}

// side is one state's version of the file.
type side struct {
	data                      []byte
	missing, binary, tooLarge bool
}

// readSide reads the file named by parts below root: missing when a name
// on the way does not exist, binary when it is not a regular file (a
// link, a device, a directory) or not text.
func readSide(root string, parts []string) (side, error) {
	dir, err := hosttree.OpenRoot(root)
	if err != nil {
		return side{}, err
	}
	defer dir.Close()
	for _, n := range parts[:len(parts)-1] {
		next, err := dir.OpenDir(n)
		if errors.Is(err, unix.ENOENT) {
			return side{missing: true}, nil
		}
		if err != nil {
			return side{binary: true}, nil // a link or a file where a directory should be
		}
		defer next.Close()
		dir = next
	}
	last := parts[len(parts)-1]
	st, err := dir.Lstat(last)
	if errors.Is(err, unix.ENOENT) {
		return side{missing: true}, nil
	}
	if err != nil {
		return side{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return side{binary: true}, nil
	}
	if st.Size > api.MaxTextDiff {
		return side{tooLarge: true}, nil
	}
	f, err := dir.OpenFile(last, os.O_RDONLY, 0)
	if err != nil {
		return side{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, api.MaxTextDiff+1))
	if err != nil {
		return side{}, err
	}
	if len(data) > api.MaxTextDiff {
		return side{tooLarge: true}, nil
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return side{binary: true}, nil
	}
	return side{data: data}, nil
}
