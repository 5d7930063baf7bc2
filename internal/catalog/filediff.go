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
	// Each comparison may take a table of 16 MiB: a few at a time.
	select {
	case fileDiffs <- struct{}{}:
		defer func() { <-fileDiffs }()
	case <-ctx.Done():
		return api.FileDiff{}, ctx.Err()
	}
	fromPath, toPath, done, err := c.diffTrees(ctx, account, name, from, to)
	if err != nil {
		return api.FileDiff{}, err
	}
	defer done()
	out := api.FileDiff{Path: "/" + strings.Join(parts, "/")}
	a, err := readSide(fromPath, parts)
	if err == nil {
		var b side
		if b, err = readSide(toPath, parts); err == nil {
			return diffSides(out, from, to, a, b)
		}
	}
	// The host's paths stay out of the answer.
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return out, errdefs.New(api.CodeFileFailed, "%s could not be read: %v", out.Path, err)
}

// diffSides compares the two versions of the file.
func diffSides(out api.FileDiff, from, to string, a, b side) (api.FileDiff, error) {
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

// fileDiffs bounds how many file diffs run at once.
var fileDiffs = make(chan struct{}, 2)

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
	// Non-blocking, so that a fifo put there does not hang the diff (and
	// the lease it holds); what it is is asked of the open file.
	f, err := dir.OpenFile(last, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return side{missing: true}, nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENXIO), errors.Is(err, unix.EISDIR), errors.Is(err, unix.ENOTDIR):
		return side{binary: true}, nil // a link, a socket, a directory
	case err != nil:
		return side{}, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return side{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return side{binary: true}, nil
	}
	if st.Size > api.MaxTextDiff {
		return side{tooLarge: true}, nil
	}
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
