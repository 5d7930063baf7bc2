package browse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Entry is one directory a sandbox sees under /.cairn/checkpoints: Name is
// the directory's name there (a checkpoint id such as "v6"), Path the
// directory in the pool it shows, relative to the pool's root
// ("checkpoints/<id>").
type Entry struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// maxTable is the largest table the server reads; a sandbox sees five
// entries, so anything near this is not a table cairnd wrote.
const maxTable = 1 << 20

// ValidName reports whether s can be an entry's name or a sandbox id: one
// path component, at most 200 bytes, not starting with "." (which also
// rules out "." and ".."), without "/" or NUL. The dot rule keeps the
// names apart from the temporary files Publish writes.
func ValidName(s string) bool {
	return s != "" && len(s) <= 200 && s[0] != '.' && !strings.ContainsAny(s, "/\x00")
}

// validPath checks an entry's path: relative, clean, not the pool root
// itself, no ".." component, no NUL.
func validPath(p string) error {
	switch {
	case p == "" || p == ".":
		return errors.New("empty path (the pool root is never served)")
	case filepath.IsAbs(p):
		return fmt.Errorf("path %q is absolute; paths are relative to the pool root", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q has a NUL byte", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (want %q)", p, filepath.Clean(p))
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return fmt.Errorf("path %q leaves the pool", p)
		}
	}
	return nil
}

// Validate checks entries as Publish and the server do: valid, distinct
// names and valid paths.
func Validate(entries []Entry) error {
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if !ValidName(e.Name) {
			return fmt.Errorf("browse entry name %q is not a valid name", e.Name)
		}
		if seen[e.Name] {
			return fmt.Errorf("browse entry name %q is listed twice", e.Name)
		}
		seen[e.Name] = true
		if err := validPath(e.Path); err != nil {
			return fmt.Errorf("browse entry %q: %w", e.Name, err)
		}
	}
	return nil
}

// SandboxDir is the directory of the view mounted at mountpoint that
// sandbox sandboxID binds read-only at /.cairn/checkpoints. It exists once
// the sandbox's table is published.
func SandboxDir(mountpoint, sandboxID string) string {
	return filepath.Join(mountpoint, sandboxID)
}

// tablePath is the table file of sandboxID in the tables directory.
func tablePath(tables, sandboxID string) string {
	return filepath.Join(tables, sandboxID+".json")
}

// Publish makes sandboxID's directory in the view list exactly entries (an
// empty list: an empty directory). It writes the table atomically: a
// temporary file in tables, fsync, rename over the table, fsync of the
// directory; a crash leaves the old table or the new one, never a mix. The
// server sees the new table at the next look into that directory. Bad
// entries are refused and nothing is written.
func Publish(tables, sandboxID string, entries []Entry) error {
	if !ValidName(sandboxID) {
		return fmt.Errorf("browse: sandbox id %q is not a valid name", sandboxID)
	}
	if err := Validate(entries); err != nil {
		return err
	}
	if entries == nil {
		entries = []Entry{}
	}
	data, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(tables, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(tables, "."+sandboxID+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), tablePath(tables, sandboxID)); err != nil {
		return err
	}
	return syncDir(tables)
}

// Unpublish removes sandboxID's table, and with it its directory from the
// view. Removing a table that does not exist is not an error.
func Unpublish(tables, sandboxID string) error {
	if !ValidName(sandboxID) {
		return fmt.Errorf("browse: sandbox id %q is not a valid name", sandboxID)
	}
	if err := os.Remove(tablePath(tables, sandboxID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(tables)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// parseTable reads a table as the server does: entries that fail the
// checks are left out, each with a reason in bad, and the rest served. A
// file that is not a JSON list of entries yields none.
func parseTable(data []byte) (entries []Entry, bad []string) {
	var all []Entry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&all); err != nil {
		return nil, []string{"table is not a JSON list of entries: " + err.Error()}
	}
	seen := make(map[string]bool, len(all))
	for _, e := range all {
		if err := Validate([]Entry{e}); err != nil {
			bad = append(bad, err.Error())
			continue
		}
		if seen[e.Name] {
			bad = append(bad, fmt.Sprintf("browse entry name %q is listed twice; the first is served", e.Name))
			continue
		}
		seen[e.Name] = true
		entries = append(entries, e)
	}
	return entries, bad
}

// errBadTable marks a table file that is no table at all: it serves nothing.
var errBadTable = errors.New("not a table")

// readTable reads sandboxID's table; ok is false when it does not exist.
// The file is read through an open descriptor so that its size and the
// bytes read belong to the same file.
func readTable(tables, sandboxID string) (data []byte, st unix.Stat_t, ok bool, err error) {
	f, err := os.Open(tablePath(tables, sandboxID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, st, false, nil
	}
	if err != nil {
		return nil, st, false, err
	}
	defer f.Close()
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, st, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st, true, fmt.Errorf("%w: %s is not a regular file", errBadTable, f.Name())
	}
	if st.Size > maxTable {
		return nil, st, true, fmt.Errorf("%w: %s is %d bytes, more than a table can be", errBadTable, f.Name(), st.Size)
	}
	data = make([]byte, st.Size)
	n, err := f.ReadAt(data, 0)
	if err != nil && n != len(data) {
		return nil, st, false, err
	}
	return data, st, true, nil
}
