// Package lease holds the metadata store's leases for one cairnd: it
// acquires them (waiting while another holder has the resource, when
// asked), renews them while they are held, cancels a holder's context when
// its lease is revoked or lost, and wakes the waiters of this process when
// a lease is released.
//
// A lease is a row of the store (metadata.Lease), so it holds across
// processes and, with a shared store, across hosts: an exclusive lease on
// "sandbox/<id>" is the one mechanism for "one lifecycle change at a time
// per sandbox"; shared leases on "checkpoint/<id>" keep a checkpoint's disk
// while it is read (an upload, a restore, a fork). A holder that dies
// stops renewing: its leases expire after TTL, and a restarted cairnd on the
// same host reclaims its predecessor's at once (Reclaim).
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// DefaultTTL is how long a lease lives without renewal.
const DefaultTTL = time.Minute

// pollEvery is how often a waiter looks at the store again when no release
// in this process woke it (the holder may be another process).
const pollEvery = 25 * time.Millisecond

// HeldError is the error of Acquire when another lease holds the resource
// and the caller did not wait. It wraps metadata.ErrConflict.
type HeldError struct{ Holder metadata.Lease }

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is held (%s) by %s", e.Holder.Resource, e.Holder.Purpose, e.Holder.Owner)
}

func (e *HeldError) Unwrap() error { return metadata.ErrConflict }

// Manager holds the leases of one owner.
type Manager struct {
	store metadata.Store
	owner string
	ttl   time.Duration
	now   func() time.Time

	mu       sync.Mutex
	held     map[string]*Lease // by lease id
	released chan struct{}     // closed and replaced at every release
	onFree   []func(resource string)
}

// New returns the lease manager of owner ("host/<host id>/<instance>").
// Call Run to renew leases while they are held.
func New(store metadata.Store, owner string, now func() time.Time) *Manager {
	if now == nil {
		now = time.Now
	}
	return &Manager{store: store, owner: owner, ttl: DefaultTTL, now: now,
		held: map[string]*Lease{}, released: make(chan struct{})}
}

// Owner is the owner name this manager's leases carry.
func (m *Manager) Owner() string { return m.owner }

// OnRelease registers fn, called (in its own goroutine) with the resource
// of every lease this manager releases.
func (m *Manager) OnRelease(fn func(resource string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onFree = append(m.onFree, fn)
}

// Options say what kind of lease to take.
type Options struct {
	Exclusive bool
	Purpose   string
	// WaitFor decides, given the lease in the way, whether to wait for it
	// (true) or fail at once with a *HeldError. nil: fail at once.
	WaitFor func(holder metadata.Lease) bool
}

// WaitAlways waits for any holder.
func WaitAlways(metadata.Lease) bool { return true }

// Lease is one held lease.
type Lease struct {
	m      *Manager
	row    metadata.Lease
	ctx    context.Context
	cancel context.CancelCauseFunc
	once   sync.Once
}

// Acquire takes a lease on resource, waiting (until ctx ends) while a
// conflicting lease holds it if opts.WaitFor says so.
func (m *Manager) Acquire(ctx context.Context, resource string, opts Options) (*Lease, error) {
	for {
		m.mu.Lock()
		released := m.released
		m.mu.Unlock()
		row := metadata.Lease{
			ID: newID(), Resource: resource, Exclusive: opts.Exclusive, Owner: m.owner,
			Purpose: opts.Purpose, Expires: m.now().Add(m.ttl),
		}
		got, err := m.store.AcquireLease(ctx, row)
		if err == nil {
			return m.track(got), nil
		}
		if !errors.Is(err, metadata.ErrConflict) || got.ID == "" || got.ID == row.ID {
			return nil, fmt.Errorf("lease %s: %w", resource, err)
		}
		if opts.WaitFor == nil || !opts.WaitFor(got) {
			return nil, &HeldError{Holder: got}
		}
		if err := m.waitFree(ctx, resource, opts.Exclusive, released); err != nil {
			return nil, fmt.Errorf("waiting for %s (%s): %w", resource, got.Purpose, err)
		}
	}
}

// waitFree waits until no live lease of resource conflicts with one of
// the kind asked for, looking with reads (the store's writer stays free
// for the holders): woken by a release in this process, or every
// pollEvery for holders elsewhere.
func (m *Manager) waitFree(ctx context.Context, resource string, exclusive bool, released <-chan struct{}) error {
	for {
		select {
		case <-released:
		case <-time.After(pollEvery):
		case <-ctx.Done():
			return ctx.Err()
		}
		live, err := m.store.Leases(ctx, resource)
		if err != nil {
			return err
		}
		free := true
		for _, l := range live {
			free = free && !(exclusive || l.Exclusive)
		}
		if free {
			return nil
		}
		m.mu.Lock()
		released = m.released
		m.mu.Unlock()
	}
}

func (m *Manager) track(row metadata.Lease) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	l := &Lease{m: m, row: row, ctx: ctx, cancel: cancel}
	m.mu.Lock()
	m.held[row.ID] = l
	m.mu.Unlock()
	return l
}

// Row is the lease as stored.
func (l *Lease) Row() metadata.Lease { return l.row }

// Context is cancelled when the lease is revoked, lost (it could not be
// renewed) or released: work done under the lease stops with it.
func (l *Lease) Context() context.Context { return l.ctx }

// Release gives the lease up. It is safe to call more than once.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.cancel(errReleased)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.m.store.ReleaseLease(ctx, l.row.ID); err != nil && !errors.Is(err, metadata.ErrNotFound) {
			slog.Warn("release lease (it expires by itself)", "resource", l.row.Resource, "err", err)
		}
		m := l.m
		m.mu.Lock()
		delete(m.held, l.row.ID)
		close(m.released)
		m.released = make(chan struct{})
		hooks := m.onFree
		m.mu.Unlock()
		for _, fn := range hooks {
			go fn(l.row.Resource)
		}
	})
}

var errReleased = errors.New("lease released")

// Revoke revokes the leases of resource with purpose ("" any) and cancels
// the contexts of those this manager holds; their holders release them.
func (m *Manager) Revoke(ctx context.Context, resource, purpose string) error {
	revoked, err := m.store.RevokeLeases(ctx, resource, purpose)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range revoked {
		if l := m.held[r.ID]; l != nil {
			l.cancel(metadata.ErrRevoked)
		}
	}
	return nil
}

// WaitReleased waits until this manager holds no lease of resource, or ctx
// ends. Leases of other owners are not waited for.
func (m *Manager) WaitReleased(ctx context.Context, resource string) error {
	for {
		m.mu.Lock()
		busy := false
		for _, l := range m.held {
			if l.row.Resource == resource {
				busy = true
				break
			}
		}
		released := m.released
		m.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-released:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Holders returns the live leases of resource, of every owner.
func (m *Manager) Holders(ctx context.Context, resource string) ([]metadata.Lease, error) {
	return m.store.Leases(ctx, resource)
}

// Reclaim deletes the expired leases and those an earlier instance on this
// host held (ownerPrefix, e.g. "host/<host id>/"): cairnd calls it at
// start, when no work of its predecessor can still be running.
func (m *Manager) Reclaim(ctx context.Context, ownerPrefix string) ([]metadata.Lease, error) {
	return m.store.ReclaimLeases(ctx, ownerPrefix)
}

// Run renews the held leases every third of their TTL until ctx ends. A
// lease that cannot be renewed (revoked, or reclaimed after it expired) has
// its context cancelled.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.renewAll(ctx)
	}
}

func (m *Manager) renewAll(ctx context.Context) {
	m.mu.Lock()
	held := make([]*Lease, 0, len(m.held))
	for _, l := range m.held {
		held = append(held, l)
	}
	m.mu.Unlock()
	for _, l := range held {
		err := m.store.RenewLease(ctx, l.row.ID, m.now().Add(m.ttl))
		switch {
		case err == nil:
		case errors.Is(err, metadata.ErrRevoked), errors.Is(err, metadata.ErrNotFound):
			l.cancel(err)
		default:
			slog.Warn("renew lease", "resource", l.row.Resource, "err", err)
		}
	}
}

// NewOwner returns an owner name for a new instance on host hostID.
func NewOwner(hostID string) string { return OwnerPrefix(hostID) + newID() }

// OwnerPrefix is the prefix of the owner names of every instance on host
// hostID.
func OwnerPrefix(hostID string) string { return "host/" + hostID + "/" }

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Sandbox leases: the exclusive lease of "sandbox/<id>" is the one
// mechanism for one lifecycle change at a time per sandbox; its purpose
// is the sandbox's transient state (starting, restoring…) while a
// lifecycle operation holds it. Checkpoints and deletes of checkpoints take
// it too, with PurposeCheckpoint, and a diff against the live root holds it
// shared, with PurposeDiff: neither is a state shown to users.
const (
	PurposeCheckpoint = "checkpoint"
	PurposeDiff       = "diff"
)

// SandboxResource is the lease resource of sandbox id.
func SandboxResource(id string) string { return "sandbox/" + id }

// Transient reports whether a sandbox lease's purpose is a lifecycle state
// shown as the sandbox's state.
func Transient(purpose string) bool {
	return purpose != PurposeCheckpoint && purpose != PurposeDiff
}

// QueueSandbox takes sandbox id's lease for a checkpoint (exclusive) or a
// diff (shared), waiting for whatever holds it.
func (m *Manager) QueueSandbox(ctx context.Context, id, purpose string) (*Lease, error) {
	return m.Acquire(ctx, SandboxResource(id), Options{
		Exclusive: purpose != PurposeDiff, Purpose: purpose, WaitFor: WaitAlways,
	})
}

// BusyState returns the transient state of sandbox id while a lifecycle
// operation holds it (see Transient).
func (m *Manager) BusyState(ctx context.Context, id string) (string, bool) {
	holders, err := m.Holders(ctx, SandboxResource(id))
	if err != nil {
		return "", false
	}
	for _, h := range holders {
		if h.Exclusive && Transient(h.Purpose) {
			return h.Purpose, true
		}
	}
	return "", false
}
