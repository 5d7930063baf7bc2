// Package local is a Backend over a directory: the embedded default
// location. Saves write a temporary file, fsync it, rename it into place and
// fsync the directory, so an object is either whole and durable or absent.
// Creates link the fsynced temporary file to its name instead of renaming
// it: link(2) fails if the name exists, which makes Create exclusive.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
)

// tmpDir holds files being written; it is never listed.
const tmpDir = ".tmp"

// Backend stores objects as files under a directory.
type Backend struct{ root string }

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend over dir, creating it if needed.
func New(dir string) (*Backend, error) {
	if err := os.MkdirAll(filepath.Join(dir, tmpDir), 0o700); err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	return &Backend{root: dir}, nil
}

func (b *Backend) path(name string) (string, error) {
	if err := backend.CheckName(name); err != nil {
		return "", err
	}
	if name == tmpDir || strings.HasPrefix(name, tmpDir+"/") {
		return "", fmt.Errorf("invalid object name %q: reserved", name)
	}
	return filepath.Join(b.root, filepath.FromSlash(name)), nil
}

// Save implements backend.Backend.
func (b *Backend) Save(ctx context.Context, name string, data []byte) error {
	if err := b.put(ctx, name, data, os.Rename); err != nil {
		return fmt.Errorf("save %s: %w", name, err)
	}
	return nil
}

// Create implements backend.Backend.
func (b *Backend) Create(ctx context.Context, name string, data []byte) error {
	err := b.put(ctx, name, data, func(tmp, p string) error {
		err := os.Link(tmp, p)
		_ = os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w (%w)", backend.ErrExists, err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	return nil
}

// put writes data to a temporary file, fsyncs it, moves it to name's path
// with place (which consumes the temporary file) and fsyncs the directory.
func (b *Backend) put(ctx context.Context, name string, data []byte, place func(tmp, p string) error) error {
	p, err := b.path(name)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	// The temporary directory is made again in case someone removed it.
	if err := os.MkdirAll(filepath.Join(b.root, tmpDir), 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(b.root, tmpDir, hex.EncodeToString(r[:]))
	if err := writeSync(tmp, data); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := place(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func writeSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Load implements backend.Backend.
func (b *Backend) Load(ctx context.Context, name string) ([]byte, error) {
	p, err := b.path(name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, notFound(err))
	}
	return data, nil
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (%w)", backend.ErrNotFound, err)
	}
	return err
}

// Stat implements backend.Backend.
func (b *Backend) Stat(ctx context.Context, name string) (backend.Info, error) {
	p, err := b.path(name)
	if err != nil {
		return backend.Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return backend.Info{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return backend.Info{}, fmt.Errorf("stat %s: %w", name, notFound(err))
	}
	if fi.IsDir() {
		return backend.Info{}, fmt.Errorf("stat %s: %w (a directory)", name, backend.ErrNotFound)
	}
	return backend.Info{Name: name, Size: fi.Size()}, nil
}

// List implements backend.Backend.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Info, error) {
	// Walk only the deepest directory the prefix names.
	start := b.root
	if i := strings.LastIndexByte(prefix, '/'); i > 0 {
		start = filepath.Join(b.root, filepath.FromSlash(prefix[:i]))
	}
	var out []backend.Info
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == tmpDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(rel, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		out = append(out, backend.Info{Name: rel, Size: fi.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	return out, nil
}

// Remove implements backend.Backend.
func (b *Backend) Remove(ctx context.Context, name string) error {
	p, err := b.path(name)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}
