// Package catalog answers what an account holds, as its users see it:
// sandboxes and checkpoints by name and by id with their live state,
// sizes and off-site states; the account's figures; and the few changes
// that are not a sandbox's lifecycle: deleting checkpoints (for users and
// for retention), diff and verify. It reads the metadata store, the
// disks component and the off-site service; it learns what runs from a
// Live source (the sandbox manager's instances), and never starts or
// stops anything.
package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/offsite"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Live is what runs on this host now, per sandbox id.
type Live interface {
	Live(sandboxID string) LiveState
}

// LiveState is the live side of one sandbox.
type LiveState struct {
	Running        bool // cairnd runs (or adopted) its container
	Pid            int
	Container      string
	AgentConnected bool
	// Network is the network its container has: metadata.NetworkNone or
	// NetworkEgress.
	Network string
	// AutoCheckpointNote says why its last automatic checkpoint was
	// skipped; "" when it was not.
	AutoCheckpointNote string
}

// Config is what a Catalog reads.
type Config struct {
	Store  metadata.Store
	Pool   *volume.Pool
	Disks  *disks.Disks
	Leases *lease.Manager
	Ops    *operation.Registry
	Live   Live
	// Offsite is the account's off-site service; nil: off-site copies
	// are off.
	Offsite *offsite.Set
	// Hosts names the host of a sandbox (hosts.Registry); nil: one host,
	// named nowhere.
	Hosts Hosts
	// Fill says how far a sandbox's lazy restore is (nil: its disk is
	// whole); nil: no lazy restores.
	Fill func(sandboxID string) *api.Fill
}

// Hosts says where a sandbox is among the hosts.
type Hosts interface {
	// Where returns the name of the host with that id and whether it is
	// down; "" with one host (SQLite), where no sandbox names its host.
	Where(hostID string) (name string, down bool)
}

// Catalog answers for the account's sandboxes and checkpoints.
type Catalog struct{ cfg Config }

// New returns a catalog.
func New(cfg Config) *Catalog { return &Catalog{cfg: cfg} }

// Lookup returns the sandbox called name in account.
func Lookup(ctx context.Context, store metadata.Store, account, name string) (metadata.Account, metadata.Sandbox, error) {
	acct, err := store.AccountByName(ctx, account)
	if err != nil {
		return acct, metadata.Sandbox{}, fmt.Errorf("account %s: %w", account, err)
	}
	sb, err := store.SandboxByName(ctx, acct.ID, name)
	if errors.Is(err, metadata.ErrNotFound) {
		return acct, sb, errdefs.New(api.CodeNoSandbox, "no sandbox named %q", name)
	}
	return acct, sb, err
}

func (c *Catalog) lookup(ctx context.Context, account, name string) (metadata.Account, metadata.Sandbox, error) {
	return Lookup(ctx, c.cfg.Store, account, name)
}

func (c *Catalog) busyState(ctx context.Context, id string) (string, bool) {
	return c.cfg.Leases.BusyState(ctx, id)
}

// queue takes sandbox sb's lease for purpose, waiting for whatever holds it.
func (c *Catalog) queue(ctx context.Context, sb metadata.Sandbox, purpose string) (*lease.Lease, error) {
	return c.cfg.Leases.QueueSandbox(ctx, sb.ID, purpose)
}

func (c *Catalog) release(l *lease.Lease) { l.Release() }

// publish brings what sandbox sb browses under /.cairn/checkpoints up to
// date; a failure is logged (the next change or start publishes it whole).
func (c *Catalog) publish(ctx context.Context, sb metadata.Sandbox) {
	if err := c.cfg.Disks.Publish(context.WithoutCancel(ctx), sb); err != nil {
		logWarn("refresh /.cairn/checkpoints", err, "sandbox", sb.Name)
	}
}

// offsiteChanged tells the upload queues that checkpoints were deleted.
func (c *Catalog) offsiteChanged() {
	if c.cfg.Offsite != nil {
		c.cfg.Offsite.Wake()
	}
}

// offsiteOf is the off-site side of the account with that id; nil when
// off-site copies are off for it (or there is no such account).
func (c *Catalog) offsiteOf(accountID int64) *offsite.Service {
	if c.cfg.Offsite == nil {
		return nil
	}
	svc := c.cfg.Offsite.For(accountID)
	if svc == nil || !svc.Enabled() {
		return nil
	}
	return svc
}

// LatestCheckpoint is the checkpoint id that names a sandbox's newest
// checkpoint (of any trigger).
const LatestCheckpoint = "latest"

// FindCheckpoint returns sandbox sb's checkpoint with the per-sandbox id
// (v3, auto-…), the account-wide id ref, or its newest for
// LatestCheckpoint; K08 when it has none.
func (c *Catalog) FindCheckpoint(ctx context.Context, sb metadata.Sandbox, ref string) (metadata.Checkpoint, error) {
	return c.findCheckpoint(ctx, sb, ref)
}

// ResolveSnapshot finds a checkpoint named account-wide: its global id,
// its snapshot name, or SANDBOX/ID; K08 when there is none.
func (c *Catalog) ResolveSnapshot(ctx context.Context, acct metadata.Account, ref string) (metadata.Checkpoint, error) {
	return c.resolveSnapshot(ctx, acct, ref)
}

// CheckpointView is checkpoint ck of sandbox sb in its API form, without
// sizes (measuring them commits the pool).
func (c *Catalog) CheckpointView(sb metadata.Sandbox, ck metadata.Checkpoint) api.Checkpoint {
	return c.checkpointView(sb, ck, nil)
}

// OffsiteState is checkpoint ck's off-site state, for messages.
func (c *Catalog) OffsiteState(ck metadata.Checkpoint) string {
	state, _ := c.offsiteStatus(ck)
	return state
}

// Expire deletes a checkpoint retention gave up.
func (c *Catalog) Expire(ctx context.Context, ck metadata.Checkpoint) error {
	return c.deleteCheckpoint(ctx, ck)
}
