// Package cache keeps the pool's cache of read-only subvolumes by key:
// what an image pull or build starts from instead of doing the work again
// (the tree after a chain of layers, the result of a build step).
//
// An entry is a read-only btrfs subvolume at pool/cache/KEY, made whole
// by one snapshot of a finished tree, so a crash leaves it either there
// and complete or not there. Entries are evictable at any time: nothing
// refers to one but work that holds it (Use) while snapshotting from it;
// images and sandboxes are snapshots of their own and keep their extents.
package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/volume"
)

// keyPattern is what a key must match: a kind and a sha256 in hex
// ("layers-…", "step-…").
var keyPattern = regexp.MustCompile(`^[a-z]+-[0-9a-f]{64}$`)

// ValidKey reports whether key can name an entry.
func ValidKey(key string) bool { return keyPattern.MatchString(key) }

// Cache is the pool's cache. Use and Put may run at once; Prune waits
// for every Use to end and holds new ones back while it deletes.
type Cache struct {
	pool *volume.Pool
	mu   sync.RWMutex
}

// New returns the cache of pool.
func New(pool *volume.Pool) *Cache { return &Cache{pool: pool} }

// Entry is one cached subvolume.
type Entry struct {
	Key       string
	CreatedAt time.Time
}

// Use calls fn with the path of entry key while no prune can delete it,
// and reports whether there was one; fn is not called if there was not.
// fn must only read the entry (snapshot it).
func (c *Cache) Use(ctx context.Context, key string, fn func(path string) error) (bool, error) {
	if !ValidKey(key) {
		return false, fmt.Errorf("cache key %q is not a kind and a hex sha256", key)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	path := c.pool.CachePath(key)
	ok, err := volume.IsSubvolume(path)
	if err != nil || !ok {
		return false, err
	}
	return true, fn(path)
}

// Has reports whether entry key is there.
func (c *Cache) Has(key string) bool {
	if !ValidKey(key) {
		return false
	}
	ok, _ := volume.IsSubvolume(c.pool.CachePath(key))
	return ok
}

// Put makes entry key a read-only snapshot of the subvolume src, unless
// there is one already (two builds of one step: the first one stays).
func (c *Cache) Put(ctx context.Context, key, src string) error {
	if !ValidKey(key) {
		return fmt.Errorf("cache key %q is not a kind and a hex sha256", key)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	path := c.pool.CachePath(key)
	if ok, err := volume.IsSubvolume(path); err != nil || ok {
		return err
	}
	if err := c.pool.Snapshot(ctx, src, path, true); err != nil {
		if ok, _ := volume.IsSubvolume(path); ok {
			return nil // made by another at the same instant
		}
		return fmt.Errorf("cache %s: %w", key, err)
	}
	return nil
}

// Entries lists the entries, oldest first.
func (c *Cache) Entries() ([]Entry, error) {
	names, err := c.pool.CacheNames()
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, n := range names {
		e := Entry{Key: n}
		if fi, err := os.Stat(c.pool.CachePath(n)); err == nil {
			e.CreatedAt = fi.ModTime().UTC()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Prune deletes every entry remove says to (all of them when remove is
// nil) and returns how many went. What is not a valid entry (a stray
// file) goes too.
func (c *Cache) Prune(ctx context.Context, remove func(Entry) bool) (int, error) {
	entries, err := c.Entries()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var paths []string
	for _, e := range entries {
		if remove == nil || !ValidKey(e.Key) || remove(e) {
			paths = append(paths, c.pool.CachePath(e.Key))
		}
	}
	if len(paths) == 0 {
		return 0, nil
	}
	failed := c.pool.ReclaimAll(ctx, paths)
	var errs []error
	for p, err := range failed {
		errs = append(errs, fmt.Errorf("%s: %w", c.pool.Rel(p), err))
	}
	return len(paths) - len(failed), errors.Join(errs...)
}
