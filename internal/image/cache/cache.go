// Package cache keeps the pool's cache of read-only subvolumes by key:
// what an image pull or build starts from instead of doing the work again
// (the tree after a chain of layers, the result of a build step).
//
// An entry is a read-only btrfs subvolume at pool/cache/KEY, made whole
// by one snapshot of a finished tree, so a crash leaves it either there
// and complete or not there. Entries are evictable at any time: nothing
// refers to one but work that holds it (Use) while snapshotting from it;
// images and sandboxes are snapshots of their own and keep their extents.
//
// Keys say whose an entry is. A layer chain's ("layers-HASH", LayersKey)
// is everyone's: its tree is the layers' content, named by their digests,
// and any pull of those layers makes the same one. A build step's
// ("step-ACCOUNT-HASH", StepKey) is its account's alone: a RUN step's
// tree is whatever the command made of it, so a step another account
// built is never a hit (it could hold that account's files, or a tree it
// poisoned), and the account is read back from the key (Entry.Account).
package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/volume"
)

// keyPattern is what a key must match: a layer chain's, or a build
// step's with its account (a positive id, in decimal without leading
// zeros), each with a sha256 in hex.
var keyPattern = regexp.MustCompile(`^(layers-[0-9a-f]{64}|step-[1-9][0-9]{0,18}-[0-9a-f]{64})$`)

// ValidKey reports whether key can name an entry.
func ValidKey(key string) bool { return keyPattern.MatchString(key) }

// LayersKey is the key of the tree of a chain of layers whose chain id
// is the hex sha256 hash: shared by every account.
func LayersKey(hash string) string { return "layers-" + hash }

// StepKey is the key of a build step's tree in account's cache, hash
// being the step's own key (a hex sha256).
func StepKey(account int64, hash string) string {
	return "step-" + strconv.FormatInt(account, 10) + "-" + hash
}

// accountOf returns the account of a valid key, 0 for a key of no
// account (a layer chain's).
func accountOf(key string) int64 {
	rest, ok := strings.CutPrefix(key, "step-")
	if !ok {
		return 0
	}
	id, _, _ := strings.Cut(rest, "-")
	n, _ := strconv.ParseInt(id, 10, 64)
	return n
}

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
	// Account is the account whose build made a step's entry; 0 for a
	// layer chain's (everyone's) and for what is not a valid key.
	Account int64
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
		if ValidKey(n) {
			e.Account = accountOf(n)
		}
		if fi, err := os.Stat(c.pool.CachePath(n)); err == nil {
			e.CreatedAt = fi.ModTime().UTC()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// EntriesOf lists the entries of account's build steps, oldest first.
func (c *Cache) EntriesOf(account int64) ([]Entry, error) {
	all, err := c.Entries()
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range all {
		if account > 0 && e.Account == account {
			out = append(out, e)
		}
	}
	return out, nil
}

// Prune deletes every entry remove says to (all of them when remove is
// nil) and returns how many went. What is not a valid entry (a stray
// file, a step's entry of an older cairn, whose key named no account)
// goes too.
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
