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
	"github.com/cairn-sandbox/cairn/internal/image/cache"
)

// The layer cache. A pull keeps the trees of some of its layer chains
// (keptChains) in the pool's cache (package cache), keyed by chain ID
// (oci.ChainIDs): an entry "layers-HEX" is a read-only snapshot of the tree after the first i
// layers of some image, taken right after layer i was applied and its
// content matched its diff id, before anything of cairn's was added. A
// later pull whose first k chain IDs have entries starts from a writable
// snapshot of the deepest one and fetches only the layers above it.
// Entries are evictable (PruneCache): images and sandboxes are snapshots
// of their own.

// layerKey is the cache key of the tree of a chain ID.
func layerKey(chain v1.Hash) string { return cache.LayersKey(chain.Hex) }

// keepEvery is how many compressed bytes of layers a pull applies, at
// least, between two chains it keeps, but for its top chain, which it
// always keeps. A kept chain costs a snapshot, and with it the wait for
// the tree's files to be written out (five kept of six layers cost about
// 3% of a pull of 300 MiB, bench/RESULTS.md); the layers between two kept
// chains are what a pull that shares a prefix ending between them fetches
// again.
const keepEvery = 8 << 20

// keptChains says which chains (by their top layer, from 1) a pull of
// layers of these compressed sizes keeps in the cache: the top one, and
// each one at which the layers since the last kept add up to keepEvery.
// It depends on the sizes alone, so every pull of an image keeps the
// same chains.
func keptChains(sizes []int64) map[int]bool {
	kept := map[int]bool{}
	var since int64
	for i, size := range sizes {
		since += max(size, 0)
		if since >= keepEvery || i == len(sizes)-1 {
			kept[i+1] = true
			since = 0
		}
	}
	return kept
}

// layerSizes are the compressed sizes of img's layers, as its manifest
// gives them.
func layerSizes(img v1.Image) ([]int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	var sizes []int64
	for _, l := range m.Layers {
		sizes = append(sizes, l.Size)
	}
	return sizes, nil
}

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

// keepLayers is oci.UnpackOptions.Applied for a pull into tmp: it puts
// the tree of the chains kept (keptChains) in the cache. A cache that
// fails is logged, not the pull's failure.
func (c *Catalog) keepLayers(ctx context.Context, tmp string, kept map[int]bool) func(int, v1.Hash) error {
	return func(i int, chain v1.Hash) error {
		if !kept[i] {
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

// PruneAccountSteps deletes the cache entries of the build steps of the
// account with that id (deleted: its ids are never given again).
func (c *Catalog) PruneAccountSteps(ctx context.Context, accountID int64) (int, error) {
	return c.cache.Prune(ctx, func(e cache.Entry) bool { return accountID > 0 && e.Account == accountID })
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
