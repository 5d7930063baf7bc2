// Package hosts is cairn on several hosts (issue 22): each cairnd
// registers itself in the metadata store and keeps a heartbeat; a host
// whose heartbeat is older than DownAfter is down. Per-sandbox work runs
// on the sandbox's host (Mine); the work of a whole account (off-site
// deletes, repairs and garbage collections) runs on one leader at a time,
// chosen with a PostgreSQL advisory lock; and each account's repository
// has one writer at a time across hosts, under an advisory lock of its
// own (AccountWriter). With SQLite there is one host: it is always the
// leader, and the locks are this process's. See docs/several-hosts.md.
package hosts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Timing of the heartbeat, the down marking and the leader's lock.
const (
	// HeartbeatEvery is how often a host renews its heartbeat.
	HeartbeatEvery = 2 * time.Second
	// DownAfter is how old a heartbeat is when its host counts as down.
	DownAfter = 10 * time.Second
	// LeaderRetry is how often a host that is not the leader tries to
	// take the leader's lock (and the leader checks it still holds it).
	LeaderRetry = 2 * time.Second
)

// Locks are advisory locks held across hosts: PostgreSQL's session
// locks, each on a connection of its own (postgres.Store.TryLock).
type Locks interface {
	// TryLock takes the lock key without waiting; a lock another session
	// holds is an error wrapping metadata.ErrConflict.
	TryLock(ctx context.Context, key int64) (Held, error)
}

// Held is a lock held.
type Held interface {
	// Check fails once the lock may be lost (its connection broke).
	Check(ctx context.Context) error
	// Release lets go of it; the lock is free even when it fails.
	Release() error
}

// Keys of the advisory locks.
const (
	// LeaderLock is the leader's lock ("cairnldr").
	LeaderLock int64 = 0x636169726e6c6472
	// accountLockBase plus an account's id is the lock of its repository's
	// writer ("cair" in the high 32 bits, the id in the low ones).
	accountLockBase int64 = 0x63616972 << 32
)

// AccountLock is the key of the lock of account id's repository writer.
func AccountLock(id int64) int64 { return accountLockBase + id }

// Config is what a Registry needs.
type Config struct {
	Store metadata.Store
	// Self is this host: its ID and Name at least (RegisterHost fills in
	// the times; PeerKeyHash is made here).
	Self metadata.Host
	// Locks are the locks across hosts; nil: one host (SQLite), always
	// the leader.
	Locks Locks
	Now   func() time.Time
}

// Registry is this host's place among the hosts.
type Registry struct {
	cfg     Config
	self    metadata.Host
	peerKey string // hex; sent by this host with every request it forwards
	leader  atomic.Bool

	mu      sync.Mutex
	hosts   map[string]metadata.Host // by id, as last read
	readAt  time.Time
	writers map[int64]*sync.Mutex // one writer per account in this process
	// held bounds the accounts' writer locks held at once: each holds a
	// connection of the store's pool, which the writes need too.
	held chan struct{}
}

// maxWriters is how many accounts' repository writer locks a host holds
// at once; the other accounts' queues wait their turn.
const maxWriters = 4

// Register records this host in the store (a new peer key each start)
// and returns its registry; Run keeps it alive.
func Register(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, err
	}
	r := &Registry{cfg: cfg, peerKey: hex.EncodeToString(key[:]), writers: map[int64]*sync.Mutex{}, held: make(chan struct{}, maxWriters)}
	self := cfg.Self
	self.PeerKeyHash = hashKey(r.peerKey)
	stored, err := cfg.Store.RegisterHost(ctx, self)
	if errors.Is(err, metadata.ErrConflict) {
		return nil, fmt.Errorf("host name %q is another host's (give this one its own with --host-name): %w", self.Name, err)
	} else if err != nil {
		return nil, err
	}
	r.self = stored
	if cfg.Locks == nil {
		r.leader.Store(true)
	}
	if _, err := r.refresh(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Self is this host as registered.
func (r *Registry) Self() metadata.Host { return r.self }

// Shared reports whether other hosts may share the store (PostgreSQL).
func (r *Registry) Shared() bool { return r.cfg.Locks != nil }

// Mine reports whether a row naming hostID (a sandbox's, a checkpoint's,
// a disk delete's) is this host's to work on. A row naming no host is
// the one host's with SQLite; with PostgreSQL the first host took those
// rows when it registered.
func (r *Registry) Mine(hostID string) bool {
	return hostID == r.self.ID || hostID == "" && !r.Shared()
}

// Leader reports whether this host does the account-wide work now.
func (r *Registry) Leader() bool { return r.leader.Load() }

// PeerKey is the key this host proves itself with to the others.
func (r *Registry) PeerKey() string { return r.peerKey }

// Run renews the heartbeat and contends for the leader's lock until ctx
// ends; the lock is let go then.
func (r *Registry) Run(ctx context.Context) {
	if !r.Shared() {
		<-ctx.Done()
		return
	}
	var held Held
	defer func() {
		if held != nil {
			held.Release()
		}
	}()
	beat := time.NewTicker(HeartbeatEvery)
	defer beat.Stop()
	lead := time.NewTicker(LeaderRetry)
	defer lead.Stop()
	held = r.contend(ctx, held)
	for {
		select {
		case <-ctx.Done():
			r.leader.Store(false)
			return
		case <-beat.C:
			if err := r.cfg.Store.Heartbeat(ctx, r.self.ID); err != nil && ctx.Err() == nil {
				slog.Warn("hosts: heartbeat", "err", err)
			}
			if _, err := r.refresh(ctx); err != nil && ctx.Err() == nil {
				slog.Warn("hosts: read the hosts", "err", err)
			}
		case <-lead.C:
			held = r.contend(ctx, held)
		}
	}
}

// contend checks the leader's lock held, or tries to take it.
func (r *Registry) contend(ctx context.Context, held Held) Held {
	if held != nil {
		cctx, cancel := context.WithTimeout(ctx, LeaderRetry)
		err := held.Check(cctx)
		cancel()
		if err == nil {
			return held
		}
		slog.Warn("hosts: the leader's lock may be lost; no longer the leader", "err", err)
		r.leader.Store(false)
		held.Release()
	}
	h, err := r.cfg.Locks.TryLock(ctx, LeaderLock)
	if err != nil {
		if !errors.Is(err, metadata.ErrConflict) && ctx.Err() == nil {
			slog.Warn("hosts: take the leader's lock", "err", err)
		}
		return nil
	}
	slog.Info("hosts: this host is the leader (off-site deletes, repairs and garbage collections of every account)", "host", r.self.Name)
	r.leader.Store(true)
	return h
}

// refresh reads the hosts again.
func (r *Registry) refresh(ctx context.Context) (map[string]metadata.Host, error) {
	hs, err := r.cfg.Store.ListHosts(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]metadata.Host, len(hs))
	for _, h := range hs {
		m[h.ID] = h
	}
	r.mu.Lock()
	r.hosts, r.readAt = m, r.cfg.Now()
	r.mu.Unlock()
	return m, nil
}

// known returns the hosts as last read, read again when older than
// HeartbeatEvery or when id is not among them.
func (r *Registry) known(ctx context.Context, id string) (map[string]metadata.Host, error) {
	r.mu.Lock()
	m, at := r.hosts, r.readAt
	r.mu.Unlock()
	if _, ok := m[id]; ok && r.cfg.Now().Sub(at) < HeartbeatEvery {
		return m, nil
	}
	return r.refresh(ctx)
}

// Up reports whether h's heartbeat is recent; this host is always up.
func (r *Registry) Up(h metadata.Host) bool {
	return h.ID == r.self.ID || !r.Shared() || r.cfg.Now().Sub(h.HeartbeatAt) < DownAfter
}

// Host returns the host with that id.
func (r *Registry) Host(ctx context.Context, id string) (metadata.Host, error) {
	m, err := r.known(ctx, id)
	if err != nil {
		return metadata.Host{}, err
	}
	h, ok := m[id]
	if !ok {
		return metadata.Host{}, fmt.Errorf("host %s: %w", id, metadata.ErrNotFound)
	}
	return h, nil
}

// Hosts returns every host, by name.
func (r *Registry) Hosts(ctx context.Context) ([]metadata.Host, error) {
	return r.cfg.Store.ListHosts(ctx)
}

// NameOf is the name of the host with that id ("" for none, or an
// unknown one), from the hosts as last read.
func (r *Registry) NameOf(id string) string {
	if id == "" {
		if r.Shared() {
			return ""
		}
		return r.self.Name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hosts[id].Name
}

// Where returns the name of the host with that id and whether it is down;
// "" with one host (SQLite).
func (r *Registry) Where(id string) (name string, down bool) {
	if !r.Shared() {
		return "", false
	}
	return r.NameOf(id), r.DownID(id)
}

// DownID reports whether the host with that id is known and down.
func (r *Registry) DownID(id string) bool {
	if id == "" || id == r.self.ID || !r.Shared() {
		return false
	}
	r.mu.Lock()
	h, ok := r.hosts[id]
	r.mu.Unlock()
	return ok && !r.Up(h)
}

// DownNow is DownID on the hosts read again now (DownID's view may be a
// heartbeat old): what a take-over of a host's sandboxes checks. A read
// that fails counts as up.
func (r *Registry) DownNow(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.refresh(ctx); err != nil {
		return false
	}
	return r.DownID(id)
}

// VerifyPeer checks a forwarded request's proof: key is the peer key of
// the host with id hostID as it registered at its last start.
func (r *Registry) VerifyPeer(ctx context.Context, hostID, key string) (metadata.Host, error) {
	if hostID == "" || key == "" {
		return metadata.Host{}, errors.New("no host id or key")
	}
	h, err := r.Host(ctx, hostID)
	if err != nil {
		return metadata.Host{}, err
	}
	want, got := h.PeerKeyHash, hashKey(key)
	if subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
		// The host may have started again since the hosts were read.
		if m, err := r.refresh(ctx); err == nil && subtle.ConstantTimeCompare([]byte(m[hostID].PeerKeyHash), []byte(got)) == 1 {
			return m[hostID], nil
		}
		return metadata.Host{}, errors.New("the key is not the host's")
	}
	return h, nil
}

// AccountWriter waits until this host is the one writer of account id's
// repository and returns the release; every host's writes to the
// repository (backups, deletes, repairs, garbage collections) go through
// it, so they never overlap. With one host it is a lock of this process.
func (r *Registry) AccountWriter(ctx context.Context, id int64) (release func(), err error) {
	r.mu.Lock()
	mu := r.writers[id]
	if mu == nil {
		mu = &sync.Mutex{}
		r.writers[id] = mu
	}
	r.mu.Unlock()
	mu.Lock() // one writer in this process first: the lock below is per session
	if !r.Shared() {
		return mu.Unlock, nil
	}
	select {
	case r.held <- struct{}{}:
	case <-ctx.Done():
		mu.Unlock()
		return nil, ctx.Err()
	}
	giveUp := func() {
		<-r.held
		mu.Unlock()
	}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		h, err := r.cfg.Locks.TryLock(ctx, AccountLock(id))
		if err == nil {
			return func() {
				if err := h.Release(); err != nil {
					slog.Warn("hosts: release an account's writer lock", "account", id, "err", err)
				}
				giveUp()
			}, nil
		}
		if !errors.Is(err, metadata.ErrConflict) {
			giveUp()
			return nil, fmt.Errorf("the account's repository writer lock: %w", err)
		}
		select {
		case <-ctx.Done():
			giveUp()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}
