// Package offsite keeps an account's checkpoints in its two off-site
// locations: a background queue uploads every checkpoint to the account's
// repository (package repo: chunked, deduplicated, compressed, encrypted),
// deletes from it what the account deleted, brings a location that missed
// uploads or deletes up to date once it answers again, and reads
// checkpoints back for a restore or a verify. docs/offsite.md says how it
// behaves; docs/repository-format.md is the format.
//
// The metadata store is the truth about which checkpoints exist: a
// checkpoint row without an off-site manifest is waiting for its upload,
// and a manifest the store queued for deletion (its checkpoint was deleted)
// is deleted. A manifest that no row names and that was never queued here
// stays: another daemon's, or the account's from before a lost host. So a
// daemon killed at any point converges on restart: an upload that did not
// record its manifest is redone, a delete that did not reach the
// repository is done again, and a new host pointed at a dead one's
// locations deletes nothing of what they hold.
package offsite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/hosttree"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/repo"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

// Disks lends the upload queue checkpoint disks (package disks; FromDisks
// adapts it).
type Disks interface {
	// Open lends checkpoint ck's disk under a lease for purpose; the held
	// directory stays unchanged until Release, and the lease's context
	// ends when a delete of the checkpoint revokes it. An error wrapping
	// disks.ErrLocalGone says the checkpoint has no local copy. An upload
	// holds its checkpoint's disk and, to read only what changed, its
	// parent's (see repo.BackupOptions.ParentDir).
	Open(ctx context.Context, ck metadata.Checkpoint, purpose string) (Held, error)
	// DiskBytes is about how many bytes a held directory refers to (0 if
	// unknown): the total an upload's progress is measured against.
	DiskBytes(ctx context.Context, dir string) int64
}

// Held is a disk lent under a lease.
type Held interface {
	Path() string
	// MemoryDir is the checkpoint's memory image, lent with its disk and
	// checked (runsc's files are there); "" for a checkpoint without one,
	// or whose image is missing or damaged.
	MemoryDir() string
	Context() context.Context
	Release()
}

// FromDisks adapts the disks component to Disks.
func FromDisks(d *disks.Disks) Disks { return lender{d} }

type lender struct{ d *disks.Disks }

func (l lender) Open(ctx context.Context, ck metadata.Checkpoint, purpose string) (Held, error) {
	h, err := l.d.Open(ctx, ck, purpose)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func (l lender) DiskBytes(ctx context.Context, dir string) int64 { return l.d.DiskBytes(ctx, dir) }

// pollInterval is how often the queue looks for work when nobody woke it.
const pollInterval = 5 * time.Second

// Service is the off-site side of one account.
type Service struct {
	cfg     Config
	store   metadata.Store
	account metadata.Account
	now     func() time.Time
	wake    chan struct{}

	disk     Disks
	observer Observer // nil: nobody is told about uploads
	cluster  Cluster  // nil: one host
	// readOrders is cairnd's data directory, where each sandbox keeps the
	// order of its last boot's reads (accessorder.PathFor); "": none.
	readOrders string

	mu        sync.Mutex
	repo      *repo.Repository // nil until opened
	repoErr   error            // why repo is nil
	openRetry backoff
	upload    *transfer             // the running upload
	ckFail    map[string]*ckFailure // by checkpoint id
	locErr    map[string]error      // by location: why it lags
	locRetry  map[string]*backoff
	repairing string              // the location being brought up to date
	holders   map[string][]string // manifest → locations holding it (refreshHolders)
	kept      int                 // manifests no row names and none queued, as last logged
	// gcDue says a delete did not reach every location: once they all
	// answer, a garbage collection frees there what the delete freed in
	// the others (see collectIfDue).
	gcDue bool

	// Set once the repository is open: what a key slot is made of, for a
	// location that lacks one.
	key      *crypto.Key
	secret   []byte
	locs     []repo.Location
	freshKey bool // this daemon made the key file: no repository can exist for it yet

	metas map[string]remoteMeta // manifest → what it says (manifests never change)
	// memoryLost: memory checkpoints whose upload found no usable memory
	// image here; their manifest holds the disk only, and that is all
	// that can go off-site (not tried again until a restart).
	memoryLost map[string]bool
}

type transfer struct {
	ck   string
	prog api.TransferProgress
}

type ckFailure struct {
	err   error
	retry backoff
	final bool // not retried (the local copy is gone, or unstorable)
	// unstorable: the repository cannot store the tree (repo.ErrUnstorable),
	// which no retry changes.
	unstorable bool
}

// maxErrText bounds the text of an error that is logged or shown: an error
// can name a path inside a sandbox, which can be thousands of bytes.
const maxErrText = 400

// errText is err's text for a log line or a state's detail, cut to
// maxErrText bytes.
func errText(err error) string {
	return hosttree.Shorten(err.Error(), maxErrText)
}

// backoff spaces attempts: 1 s, 2 s, 4 s… up to max.
type backoff struct {
	n    int
	next time.Time
}

func (b *backoff) failed(now time.Time, max time.Duration) {
	d := time.Second << min(b.n, 16)
	b.n++
	b.next = now.Add(min(d, max))
}

func (b *backoff) due(now time.Time) bool { return !now.Before(b.next) }

// New returns the service of account, reading checkpoint disks from
// disk. cfg must have its defaults (Config.WithDefaults).
func New(cfg Config, store metadata.Store, account metadata.Account, disk Disks, now func() time.Time) *Service {
	return &Service{cfg: cfg, store: store, account: account, disk: disk, now: now, wake: make(chan struct{}, 1),
		ckFail: map[string]*ckFailure{}, locErr: map[string]error{}, locRetry: map[string]*backoff{}, memoryLost: map[string]bool{}}
}

// Enabled reports whether off-site copies are on.
func (s *Service) Enabled() bool { return !s.cfg.Disabled }

// Locations returns the names of the account's locations.
func (s *Service) Locations() []string {
	var out []string
	for _, l := range s.cfg.Locations {
		out = append(out, l.Name)
	}
	return out
}

// Wake tells the queue that checkpoints were created or deleted.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run works the queue until ctx ends.
func (s *Service) Run(ctx context.Context) {
	if s.cfg.Disabled {
		return
	}
	for {
		more := s.step(ctx)
		wait := s.untilDue()
		if more {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-time.After(wait):
		}
	}
}

// untilDue is how long the queue may sleep: until the next retry of a
// failed upload, location or repository open is due, at most
// pollInterval. (Sleeping a whole pollInterval past a backoff of 1 s
// would make every retry wait 5 s.)
func (s *Service) untilDue() time.Duration {
	now := s.now()
	wait := pollInterval
	due := func(b *backoff) { wait = min(wait, max(b.next.Sub(now), 0)) }
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.repo == nil {
		due(&s.openRetry)
	}
	for _, f := range s.ckFail {
		if !f.final {
			due(&f.retry)
		}
	}
	for name := range s.locErr {
		if b := s.locRetry[name]; b != nil {
			due(b)
		}
	}
	return wait
}

// step does one piece of work and reports whether more is waiting.
//
// With several hosts, a step is this host's turn as the account's one
// writer (Cluster.AccountWriter): it reads the heads again, since another
// host may have committed since, and then writes. Only the leader does
// the account-wide work (queued deletes, repairs, garbage collections);
// each host uploads the checkpoints whose disks are in its pool.
func (s *Service) step(ctx context.Context) bool {
	r := s.ensureRepo(ctx)
	if r == nil {
		return false
	}
	if s.cluster != nil {
		release, err := s.cluster.AccountWriter(ctx, s.account.ID)
		if err != nil {
			if ctx.Err() == nil {
				slog.Warn("off-site: wait for the account's writer lock", "err", err)
			}
			return false
		}
		defer release()
		if s.cluster.Shared() {
			s.reload(ctx, r)
		}
	}
	// The account's checkpoints, those of deleted sandboxes and automatic
	// ones included: the repository holds exactly their manifests.
	cks, err := s.store.ListCheckpoints(ctx, s.account.ID, metadata.CheckpointFilter{IncludeAuto: true})
	if err != nil {
		slog.Warn("off-site: list checkpoints", "err", err)
		return false
	}
	defer s.refreshHolders(r)
	s.forgetFailures(cks)
	// Another host's checkpoints are its own to upload; their memory
	// images live on it.
	mine := s.uploadable(cks)
	s.learnMemory(ctx, r, mine)
	leader := s.cluster == nil || s.cluster.Leader()
	if leader {
		s.deleteQueued(ctx, r, cks)
	}
	if s.uploadNext(ctx, r, mine) {
		return true
	}
	if leader {
		s.repairLagging(ctx, r)
		s.collectIfDue(ctx, r)
	}
	return false
}

// Cluster is what an account's service needs of the hosts around it
// (hosts.Registry).
type Cluster interface {
	// Shared reports whether other hosts may write the repository too.
	Shared() bool
	// Mine reports whether a checkpoint naming hostID has its disk here.
	Mine(hostID string) bool
	// Leader reports whether this host does the account-wide work now.
	Leader() bool
	// AccountWriter waits until this host is the account's one writer.
	AccountWriter(ctx context.Context, accountID int64) (release func(), err error)
}

// uploadable keeps the checkpoints whose disks this host reads.
func (s *Service) uploadable(cks []metadata.Checkpoint) []metadata.Checkpoint {
	if s.cluster == nil {
		return cks
	}
	out := make([]metadata.Checkpoint, 0, len(cks))
	for _, ck := range cks {
		if s.cluster.Mine(ck.HostID) {
			out = append(out, ck)
		}
	}
	return out
}

// ensureRepo opens (or, on first use, creates) the repository; nil while
// it cannot.
func (s *Service) ensureRepo(ctx context.Context) *repo.Repository {
	s.mu.Lock()
	if s.repo != nil || !s.openRetry.due(s.now()) {
		r := s.repo
		s.mu.Unlock()
		return r
	}
	s.mu.Unlock()
	r, err := s.openRepo(ctx)
	if err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.repoErr == nil || s.repoErr.Error() != err.Error() {
			slog.Warn("off-site repository unavailable", "err", err)
		}
		s.repoErr = err
		s.openRetry.failed(s.now(), time.Duration(s.cfg.RetryMax))
		return nil
	}
	unavailable := r.Unavailable()
	s.refreshHolders(r)
	s.mu.Lock()
	s.repo, s.repoErr, s.openRetry = r, nil, backoff{}
	for name, e := range unavailable {
		s.locErr[name] = e
	}
	s.mu.Unlock()
	slog.Info("off-site repository open", "locations", s.Locations())
	return r
}

// refreshHolders caches which locations hold each manifest, for Status.
// The lock rule of the service: never call the repository while holding
// s.mu (a backup holds the repository's lock while it reports progress,
// which takes s.mu).
func (s *Service) refreshHolders(r *repo.Repository) {
	h := map[string][]string{}
	for _, ref := range r.List() {
		h[ref.ID] = r.Holders(ref)
	}
	s.mu.Lock()
	s.holders = h
	s.mu.Unlock()
}

// errWrongKey is what a key file that opens no key slot gets.
var errWrongKey = errors.New("the key file does not open this account's repository (wrong key); checkpoints stay local")

func (s *Service) openRepo(ctx context.Context) (*repo.Repository, error) {
	if s.cluster != nil && s.cluster.Shared() {
		// Another host may be making the repository at this moment: one
		// looks and makes at a time, the others then find it made.
		release, err := s.cluster.AccountWriter(ctx, s.account.ID)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	secret, created, err := keySecret(s.cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	if created {
		s.mu.Lock()
		s.freshKey = true
		s.mu.Unlock()
	}
	locs, err := s.cfg.open()
	if err != nil {
		return nil, err
	}
	var (
		key       *crypto.Key
		withSlots int
		errs      []error
		answering []repo.Location // the locations that listed their key slots
	)
	for _, l := range locs {
		slots, err := l.Backend.List(ctx, "keys/")
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.Name, err))
			continue
		}
		answering = append(answering, l)
		if len(slots) == 0 {
			continue
		}
		withSlots++
		if key != nil {
			continue
		}
		k, err := repo.LoadKey(ctx, l, secret)
		if errors.Is(err, crypto.ErrWrongPassphrase) {
			continue
		} else if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.Name, err))
			continue
		}
		key = k
	}
	switch {
	case key == nil && withSlots > 0:
		return nil, errWrongKey
	case key == nil && (len(answering) == 0 || len(answering) < len(locs) && !s.isFreshKey()):
		// A repository may exist where we cannot look: never make a
		// second one with another key. (With a key file this daemon just
		// made, none can exist that it could open.)
		return nil, fmt.Errorf("locations unreachable: %w", errors.Join(errs...))
	case key == nil:
		if key, err = crypto.NewKey(); err != nil {
			return nil, err
		}
		// In the locations that answer; one that is down gets its key
		// slot and everything else when it is back (repairLagging).
		if err := repo.SaveKey(ctx, key, secret, crypto.DefaultKDF, answering...); err != nil {
			return nil, err
		}
		slog.Info("off-site repository created", "locations", s.Locations())
	}
	// Key slots but no heads where we can look: a new repository, or a
	// crash (or a location failing) between the slots and the heads.
	// Where no head can hide (every location answers, or the key file is
	// this daemon's own), the heads are made now.
	if len(answering) == len(locs) || s.isFreshKey() {
		if err := initWhereEmpty(ctx, key, answering); err != nil {
			return nil, err
		}
	}
	r, err := repo.Open(ctx, key, locs...)
	if errors.Is(err, repo.ErrWrongKey) {
		return nil, errWrongKey
	}
	if err == nil {
		s.mu.Lock()
		s.key, s.secret, s.locs = key, secret, locs
		s.mu.Unlock()
	}
	return r, err
}

// initWhereEmpty creates the repository in locs unless one of them holds
// heads already.
func initWhereEmpty(ctx context.Context, key *crypto.Key, locs []repo.Location) error {
	for _, l := range locs {
		heads, err := l.Backend.List(ctx, "heads/")
		if err != nil {
			return fmt.Errorf("%s: %w", l.Name, err)
		}
		if len(heads) > 0 {
			return nil
		}
	}
	if _, err := repo.Init(ctx, key, locs...); err != nil && !errors.Is(err, repo.ErrExists) {
		return err
	}
	return nil
}

func (s *Service) isFreshKey() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freshKey
}

// ensureKeySlot stores a key slot in location name if it has none, so the
// key can be recovered from any location (one that was down when the
// repository was made has none).
func (s *Service) ensureKeySlot(ctx context.Context, name string) error {
	s.mu.Lock()
	key, secret, locs := s.key, s.secret, s.locs
	s.mu.Unlock()
	for _, l := range locs {
		if l.Name != name {
			continue
		}
		slots, err := l.Backend.List(ctx, "keys/")
		if err != nil || len(slots) > 0 {
			return err
		}
		return repo.SaveKey(ctx, key, secret, crypto.DefaultKDF, l)
	}
	return nil
}

func (s *Service) retryOf(location string) *backoff {
	b := s.locRetry[location]
	if b == nil {
		b = &backoff{}
		s.locRetry[location] = b
	}
	return b
}

// noteLocationErrors records the locations that a failed repository call
// could not reach. Only those that failed in it (not in before, what was
// unavailable when it began) count as a failed attempt: the call left the
// others out, and pushing their backoff back at every call would keep
// repairLagging, which alone makes them usable again, from ever trying
// them (an upload queue that fails at once on every step, with both
// locations out, would never recover).
func (s *Service) noteLocationErrors(r *repo.Repository, before map[string]error) {
	unavailable := r.Unavailable()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, e := range unavailable {
		s.locErr[name] = e
		if _, skipped := before[name]; !skipped {
			s.retryOf(name).failed(s.now(), time.Duration(s.cfg.RetryMax))
		}
	}
}

func (s *Service) reload(ctx context.Context, r *repo.Repository) {
	if err := r.Reload(ctx); err != nil {
		slog.Warn("off-site: reload", "err", err)
	}
}

// repairLagging brings a location that misses checkpoints (or was down, or
// failed a call) up to date from the other, when its backoff allows.
func (s *Service) repairLagging(ctx context.Context, r *repo.Repository) {
	refs := r.List()
	for _, name := range s.Locations() {
		s.mu.Lock()
		_, failed := s.locErr[name]
		due := s.retryOf(name).due(s.now())
		s.mu.Unlock()
		// A location that lists a checkpoint another records as deleted
		// missed the end of a delete (a crash between the two commits).
		missed := r.MissedDelete(name)
		if !failed && !missed && !lacks(r, name, refs) || !due {
			continue
		}
		s.mu.Lock()
		s.repairing = name
		s.mu.Unlock()
		err := r.Reload(ctx)
		var rep *repo.Report
		if err == nil {
			if e := r.Unavailable()[name]; e != nil {
				err = e
			} else if rep, err = r.Repair(ctx, name); err == nil {
				err = s.ensureKeySlot(ctx, name)
			}
		}
		s.refreshHolders(r)
		s.mu.Lock()
		s.repairing = ""
		if err != nil {
			s.locErr[name] = err
			s.retryOf(name).failed(s.now(), time.Duration(s.cfg.RetryMax))
			s.mu.Unlock()
			slog.Warn("off-site: location lags", "location", name, "err", errText(err))
			continue
		}
		delete(s.locErr, name)
		delete(s.locRetry, name)
		if missed {
			// The repair gave it the tombstones; the packs only the
			// deleted checkpoints needed go with a collection.
			s.gcDue = true
		}
		s.mu.Unlock()
		slog.Info("off-site: location up to date", "location", name, "copied", len(rep.Repaired))
	}
}

// lacks reports whether location misses one of refs.
func lacks(r *repo.Repository, location string, refs []repo.ManifestRef) bool {
	for _, ref := range refs {
		if !slices.Contains(r.Holders(ref), location) {
			return true
		}
	}
	return false
}
