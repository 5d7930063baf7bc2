package accessorder

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FileName is the name of the file, in a sandbox's host directory, that
// keeps the order recorded at its last boot.
const FileName = "access-order.json"

// Save writes o to path atomically (a new file renamed over the old).
func Save(path string, o Order) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Load reads an order written by Save; a missing file is an empty order.
func Load(path string) (Order, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Order{}, nil
	}
	if err != nil {
		return Order{}, err
	}
	var o Order
	if err := json.Unmarshal(b, &o); err != nil {
		return Order{}, fmt.Errorf("%s: %w", path, err)
	}
	return o.Clean(), nil
}

// Clean drops what is not a plain relative path inside a root (absolute,
// with "..", empty) and repeats: an order read back from a file or a
// manifest is only a hint, and a hint never names a path outside the tree
// it is for.
func (o Order) Clean() Order {
	out := Order{Partial: o.Partial}
	seen := map[string]bool{}
	for _, f := range o.Files {
		c := filepath.Clean(f)
		if f == "" || filepath.IsAbs(c) || c == "." || c == ".." || strings.HasPrefix(c, "../") || seen[c] {
			continue
		}
		seen[c] = true
		out.Files = append(out.Files, c)
	}
	return out
}

// PathFor is where the order of sandbox id's last boot is kept under
// cairnd's data directory.
func PathFor(dataDir, sandboxID string) string {
	return filepath.Join(dataDir, "sandboxes", sandboxID, FileName)
}

// Capped is o cut to its first files whose names take at most maxBytes
// in all: what travels in a manifest has a bound. A cut order is Partial.
func (o Order) Capped(maxBytes int) Order {
	out := Order{Partial: o.Partial}
	used := 0
	for _, f := range o.Files {
		b, _ := json.Marshal(f) // with its quotes and escapes, as it is written
		if used+len(b)+1 > maxBytes {
			out.Partial = true
			break
		}
		used += len(b) + 1
		out.Files = append(out.Files, f)
	}
	return out
}

// Rank returns, for a path, its place in o (0 first) and whether o names
// it at all; paths are compared as Clean leaves them.
func (o Order) Rank() func(path string) (int, bool) {
	at := make(map[string]int, len(o.Files))
	for i, f := range o.Files {
		if _, seen := at[f]; !seen {
			at[f] = i
		}
	}
	return func(path string) (int, bool) {
		i, ok := at[filepath.Clean(path)]
		return i, ok
	}
}
