// Package disks is the one owner of checkpoint disks and memory images. It
// alone creates them (Take: the checkpoint protocol, the memory image and
// the row), finds them (the checkpoint row says where each lives; nothing
// is found by probing paths), lends them (Open: a lease for a purpose, for
// as long as a reader such as an upload, a restore, a fork or a diff needs
// it), makes sandbox roots from them (Materialize: from the local copy or
// from off-site, the seam lazy restore will use too) and deletes them
// (Delete: frees the space at once, or as soon as the last lease ends).
//
// Layout in the pool (package volume):
//
//	checkpoints/<id>   a checkpoint's disk: read-only snapshot of its sandbox's root
//	memory/<id>        a memory checkpoint's runsc image (a subvolume of its own)
//
// Each checkpoint's data lives in exactly one disk subvolume (and one
// memory subvolume), so btrfs' quota groups tell exactly what deleting it
// frees. The browse view inside a sandbox (/.cairn/checkpoints) reads the
// same subvolumes through a View; nothing ever moves them.
//
// Crash safety: a disk is made before its row, and its row is deleted
// before the disk (the store queues the paths to free in the same
// transaction, see metadata.Store.DiskDeletes). So a crash leaves at worst
// a subvolume no row names, which Sweep deletes at the next start, or a
// queued path, which Collect frees. Leases live in the store
// (package lease): those of a dead daemon are reclaimed at start.
package disks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/checkpoint"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Runtime pauses, resumes and memory-checkpoints a sandbox's container.
type Runtime interface {
	checkpoint.Pauser
	checkpoint.Checkpointer
}

// View publishes which checkpoints a running sandbox sees under
// /.cairn/checkpoints. Publish replaces the whole list at once.
type View interface {
	Publish(sandboxID string, entries []ViewEntry) error
	Unpublish(sandboxID string) error
}

// ViewEntry is one browsable checkpoint: its per-sandbox id and its disk,
// relative to the pool's root.
type ViewEntry struct {
	Name string
	Path string
}

// BrowseCount is how many of a sandbox's newest checkpoints it sees under
// /.cairn/checkpoints.
const BrowseCount = 5

// Config is what Disks needs.
type Config struct {
	Pool    *volume.Pool
	Store   metadata.Store
	Leases  *lease.Manager
	Runtime Runtime
	View    View // nil: no browse view
	Now     func() time.Time
	// DiskLimit is the host's default limit in bytes on what an account's
	// sandboxes and checkpoints take in the pool, for accounts without a
	// limit of their own; 0 is unlimited.
	DiskLimit int64
	// HostID is this host's id, written into the rows of the checkpoints
	// it takes; Mine says whether a row naming a host is this host's (nil:
	// every row is). Disks on other hosts' pools are never looked at,
	// recorded as lost or deleted here.
	HostID string
	Mine   func(hostID string) bool
}

// mine reports whether a row naming hostID has its disk in this pool.
func (d *Disks) mine(hostID string) bool { return d.cfg.Mine == nil || d.cfg.Mine(hostID) }

// Disks owns the checkpoint disks of one pool.
type Disks struct {
	cfg Config

	collecting sync.Mutex // one Collect at a time

	viewMu     sync.Mutex
	pending    map[string]metadata.Sandbox // sandboxes whose view PublishSoon is to refresh
	publishing bool                        // a publishPending worker runs
}

// New returns the owner of the pool's checkpoint disks. Call Sweep before
// anything else, once, at start.
func New(cfg Config) *Disks {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Disks{cfg: cfg}
	cfg.Leases.OnRelease(func(resource string) {
		if strings.HasPrefix(resource, checkpointResource) {
			d.collect(context.Background())
		}
	})
	return d
}

// checkpointResource prefixes the lease resource of a checkpoint's disks.
const checkpointResource = "checkpoint/"

func resourceOf(id string) string { return checkpointResource + id }

// abs turns a pool-relative path from a row into a path on the host. Rows
// are written by cairnd only, but a path is never followed out of the pool.
func (d *Disks) abs(rel string) (string, error) {
	clean := filepath.Clean(rel)
	if rel == "" || filepath.IsAbs(clean) || clean == "." || strings.HasPrefix(clean, "..") {
		return "", fmt.Errorf("disk path %q is not inside the pool", rel)
	}
	return filepath.Join(d.cfg.Pool.Root(), clean), nil
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func logErr(msg string, err error, args ...any) {
	if err != nil {
		slog.Warn(msg, append(args, "err", err)...)
	}
}

// ErrLocalGone is wrapped by errors about a checkpoint whose local copy
// no longer exists.
var ErrLocalGone = errors.New("the checkpoint's local copy is gone")
