package offsite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Set is the off-site side of every account: each account has its own
// Service, with its own key and its own two locations, made when first
// needed (an account created while cairnd runs gets one at its first
// checkpoint) and run from then on.
type Set struct {
	store    metadata.Store
	disk     Disks
	now      func() time.Time
	dataDir  string
	configs  map[string]Config // by account name, from the config file
	observer Observer
	cluster  Cluster

	mu        sync.Mutex
	services  map[int64]*Service
	stops     map[int64]func() // ends a running service's queue and waits for it
	forgotten map[int64]bool   // deleted accounts: no service again
	runCtx    context.Context  // set by Run; nil before
}

// SetConfig is what NewSet needs.
type SetConfig struct {
	Store   metadata.Store
	Disk    Disks
	Now     func() time.Time
	DataDir string
	// Accounts are the off-site configs the config file gives, by
	// account name. An account without one gets the default of
	// AccountDefaults.
	Accounts map[string]Config
	// Cluster is the hosts around this one (hosts.Registry); nil: one
	// host, which uploads every checkpoint and is the one writer.
	Cluster Cluster
}

// NewSet checks every configured account's off-site config and returns
// the set. Nothing is opened yet.
func NewSet(cfg SetConfig) (*Set, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Set{store: cfg.Store, disk: cfg.Disk, now: cfg.Now, dataDir: cfg.DataDir, cluster: cfg.Cluster, configs: map[string]Config{}, services: map[int64]*Service{}, stops: map[int64]func(){}, forgotten: map[int64]bool{}}
	for name, c := range cfg.Accounts {
		if err := metadata.ValidateAccountName(name); err != nil {
			return nil, fmt.Errorf("off-site config of account %q: %w", name, err)
		}
		if _, err := ForAccount(c, cfg.DataDir, metadata.Account{Name: name}); err != nil {
			return nil, fmt.Errorf("account %s: %w", name, err)
		}
		s.configs[name] = c
	}
	return s, nil
}

// ForAccount fills what cfg leaves out with account's defaults and checks
// the rest. The default account keeps its key and locations where a
// cairnd of one account kept them, DATA-DIR/offsite/{account.key,primary,
// secondary}; another account's are under DATA-DIR/offsite/account-<id>/,
// so no two accounts share a key or a repository by default.
func ForAccount(cfg Config, dataDir string, acct metadata.Account) (Config, error) {
	if acct.Name != metadata.DefaultAccount {
		dir := filepath.Join(dataDir, "offsite", "account-"+strconv.FormatInt(acct.ID, 10))
		if cfg.KeyFile == "" {
			cfg.KeyFile = filepath.Join(dir, "account.key")
		}
		if len(cfg.Locations) == 0 {
			cfg.Locations = []LocationConfig{
				{Name: "primary", Dir: filepath.Join(dir, "primary")},
				{Name: "secondary", Dir: filepath.Join(dir, "secondary")},
			}
		}
	}
	return cfg.WithDefaults(dataDir)
}

// SetObserver sets who is told about uploads, for every account's
// service; call it before Run.
func (s *Set) SetObserver(o Observer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observer = o
	for _, svc := range s.services {
		svc.SetObserver(o)
	}
}

// For returns the service of the account with that id, making it (and
// running it, once Run was called) the first time; nil when there is no
// such account.
func (s *Set) For(accountID int64) *Service {
	s.mu.Lock()
	svc := s.services[accountID]
	s.mu.Unlock()
	if svc != nil {
		return svc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := metadata.AccountByID(ctx, s.store, accountID)
	if err != nil {
		if !errors.Is(err, metadata.ErrNotFound) {
			slog.Warn("off-site: look up an account", "err", err)
		}
		return nil
	}
	return s.add(a)
}

// add makes account's service unless it has one.
func (s *Set) add(acct metadata.Account) *Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	if svc := s.services[acct.ID]; svc != nil {
		return svc
	}
	if s.forgotten[acct.ID] {
		return nil // deleted while it was being looked up
	}
	cfg, err := ForAccount(s.configs[acct.Name], s.dataDir, acct)
	if err != nil {
		// Only a config file's entry can be wrong, and NewSet checked
		// those; defaults always pass.
		slog.Error("off-site: account config", "account", acct.Name, "err", err)
		cfg = Config{Disabled: true}
	}
	svc := New(cfg, s.store, acct, s.disk, s.now)
	svc.cluster = s.cluster
	svc.readOrders = s.dataDir
	if s.observer != nil {
		svc.SetObserver(s.observer)
	}
	s.services[acct.ID] = svc
	if s.runCtx != nil {
		s.start(acct.ID, svc)
	}
	return svc
}

// start runs svc's queue until Run's context ends or Forget stops it;
// s.mu is held.
func (s *Set) start(id int64, svc *Service) {
	ctx, cancel := context.WithCancel(s.runCtx)
	done := make(chan struct{})
	s.stops[id] = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			slog.Warn("off-site: a stopped account's queue did not end within a minute")
		}
	}
	go func() {
		defer close(done)
		svc.Run(ctx)
	}()
}

// Forget stops the service of a deleted account and removes its default
// repository directory and key file (DATA-DIR/offsite/account-<id>),
// unless the config file gave it locations of its own: what it held
// there was deleted with its checkpoints. Its id is never given again.
func (s *Set) Forget(acct metadata.Account) {
	if acct.Name == metadata.DefaultAccount {
		return
	}
	s.mu.Lock()
	stop := s.stops[acct.ID]
	delete(s.stops, acct.ID)
	delete(s.services, acct.ID)
	s.forgotten[acct.ID] = true
	_, configured := s.configs[acct.Name]
	s.mu.Unlock()
	if stop != nil {
		stop() // its queue has stopped writing before the directory goes
	}
	if configured {
		return
	}
	dir := filepath.Join(s.dataDir, "offsite", "account-"+strconv.FormatInt(acct.ID, 10))
	if err := os.RemoveAll(dir); err != nil {
		slog.Warn("off-site: remove a deleted account's repository directory", "dir", dir, "err", err)
	}
}

// Run makes the service of every account there is and works their
// queues until ctx ends; services made later run too.
func (s *Set) Run(ctx context.Context) {
	s.addMissing(ctx)
	s.mu.Lock()
	s.runCtx = ctx
	for id, svc := range s.services {
		s.start(id, svc)
	}
	s.mu.Unlock()
	<-ctx.Done()
}

// Wake tells every account's queue that checkpoints were created or
// deleted; an account made since the last call gets its service (and its
// first checkpoint its upload) here.
func (s *Set) Wake() {
	s.addMissing(context.Background())
	for _, svc := range s.all() {
		svc.Wake()
	}
}

// addMissing makes the service of each account that has none yet.
func (s *Set) addMissing(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	accts, err := s.store.ListAccounts(ctx)
	if err != nil {
		slog.Warn("off-site: list accounts", "err", err)
		return
	}
	for _, a := range accts {
		s.add(a)
	}
}

// all returns the services made so far, by account id.
func (s *Set) all() []*Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int64, 0, len(s.services))
	for id := range s.services {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]*Service, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.services[id])
	}
	return out
}

// Services returns every account's service made so far, ordered by
// account id (the metrics read each one's lag).
func (s *Set) Services() []*Service { return s.all() }
