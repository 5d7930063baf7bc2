package image

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cairn-sandbox/cairn/api"
)

// The layer cache. A pull keeps the trees of its layer chains in the
// pool's cache (package cache), keyed by chain ID (oci.ChainIDs): an entry
// "layers-HEX" is a read-only snapshot of the tree after the first i
// layers of some image, taken right after layer i was applied and its
// content matched its diff id, before anything of cairn's was added. A
// later pull whose first k chain IDs have entries starts from a writable
// snapshot of the deepest one and fetches only the layers above it.
// Entries are evictable (PruneCache): images and sandboxes are snapshots
// of their own.

// layerKey is the cache key of the tree of a chain ID.
func layerKey(chain v1.Hash) string { return "layers-" + chain.Hex }

// cachedLayers is where the pool's cache says which chains are kept: the
// top one (the image's whole tree, what a pull of the same layers under
// another digest starts from) and every one below it.
func cachedLayers(i, n int) bool { return i <= n }

// startTree makes tmp the tree a pull of an image with these chain IDs
// starts from: a writable snapshot of the deepest chain the cache holds,
// or an empty subvolume. It returns how many layers tmp holds.
func (c *Catalog) startTree(ctx context.Context, chains []v1.Hash, tmp string) (int, error) {
	for k := len(chains); k > 0; k-- {
		ok, err := c.cache.Use(ctx, layerKey(chains[k-1]), func(path string) error {
			return c.pool.Snapshot(ctx, path, tmp, false)
		})
		if err != nil {
			return 0, err
		}
		if ok {
			return k, nil
		}
	}
	return 0, c.pool.Create(ctx, tmp)
}

// keepLayers is oci.UnpackOptions.Applied for a pull into tmp of an
// image of n layers: it puts the tree of the chain in the cache. A cache
// that fails is logged, not the pull's failure.
func (c *Catalog) keepLayers(ctx context.Context, tmp string, n int) func(int, v1.Hash) error {
	return func(i int, chain v1.Hash) error {
		if !cachedLayers(i, n) {
			return nil
		}
		if err := c.cache.Put(ctx, layerKey(chain), tmp); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			slog.Warn("layer cache: keep a chain", "chain", chain.String(), "err", err)
		}
		return nil
	}
}

// PruneCache deletes every entry of the pool's cache (the trees of layer
// chains kept by pulls) and returns how many went. Images and sandboxes
// lose nothing; the next pull fetches every layer again.
func (c *Catalog) PruneCache(ctx context.Context) (api.PruneImagesResult, error) {
	n, err := c.cache.Prune(ctx, nil)
	return api.PruneImagesResult{Removed: n}, err
}

// treeBytes is the size of the files in the tree at root: each regular
// file's once, however many names it has.
func treeBytes(root string) (int64, error) {
	var total int64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += fi.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of the image's files: %w", err)
	}
	return total, nil
}
