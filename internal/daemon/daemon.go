// Package daemon assembles cairnd: it locks the data dir, opens the pool,
// the metadata store and the runtime, re-adopts running sandboxes, and
// serves the API on the unix socket until its context ends. Stopping the
// daemon leaves sandboxes running; the next start adopts them.
package daemon

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/access"
	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"github.com/cairn-sandbox/cairn/internal/activity"
	"github.com/cairn-sandbox/cairn/internal/agent"
	"github.com/cairn-sandbox/cairn/internal/catalog"
	"github.com/cairn-sandbox/cairn/internal/disks"
	"github.com/cairn-sandbox/cairn/internal/evacuate"
	"github.com/cairn-sandbox/cairn/internal/hosts"
	"github.com/cairn-sandbox/cairn/internal/httpedge"
	"github.com/cairn-sandbox/cairn/internal/image"
	"github.com/cairn-sandbox/cairn/internal/image/build"
	"github.com/cairn-sandbox/cairn/internal/lease"
	"github.com/cairn-sandbox/cairn/internal/localtier"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/metrics"
	"github.com/cairn-sandbox/cairn/internal/network"
	"github.com/cairn-sandbox/cairn/internal/offsite"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/portproxy"
	"github.com/cairn-sandbox/cairn/internal/sandbox"
	"github.com/cairn-sandbox/cairn/internal/sandbox/runsc"
	"github.com/cairn-sandbox/cairn/internal/schedule"
	"github.com/cairn-sandbox/cairn/internal/server"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Version is cairn's version, set at build time with -ldflags.
var Version = "dev"

// What the API server is given for each of its roles (server.Deps).
var (
	_ server.Sandboxes    = (*sandbox.Manager)(nil)
	_ server.Rewinds      = (*sandbox.Manager)(nil)
	_ server.Processes    = (*sandbox.Manager)(nil)
	_ server.Files        = sandboxFiles{}
	_ server.FS           = (*agent.Host)(nil)
	_ server.SandboxViews = (*catalog.Catalog)(nil)
	_ server.Checkpoints  = (*catalog.Catalog)(nil)
	_ server.Accounts     = (*catalog.Catalog)(nil)
	_ server.SandboxScope = (*catalog.Catalog)(nil)
	_ server.Images       = imageService{}
	_ server.Operations   = (*operation.Registry)(nil)
	_ server.Ports        = (*portproxy.Service)(nil)
	_ server.Access       = (*access.Service)(nil)
	_ server.Hosts        = (*hosts.Forwarder)(nil)
	_ access.Emptier      = (*sandbox.Manager)(nil)

	_ sandbox.Runtime       = (*runsc.Runsc)(nil)
	_ catalog.Live          = (*sandbox.Instances)(nil)
	_ catalog.Hosts         = (*hosts.Registry)(nil)
	_ schedule.Checkpointer = (*sandbox.Manager)(nil)
	_ schedule.Expirer      = (*catalog.Catalog)(nil)
)

// Config is cairnd's configuration; the zero value of each field but
// InitBinary means the embedded default.
type Config struct {
	DataDir string // default /var/lib/cairn
	// Database is where the metadata lives: "" for SQLite in
	// DataDir/cairn.db, or a postgres://USER@HOST/DB URL (see
	// docs/postgres.md).
	Database   string
	Socket     string // default /run/cairn/cairn.sock
	Pool       string // an existing btrfs directory; default: a loop file in DataDir
	PoolSize   int64  // size of a new loop file; default 20 GiB
	Runsc      string // runsc binary; default: found on PATH
	InitBinary string // cairn-init binary on the host
	CacheDir   string // downloads kept between image builds; default DataDir/cache
	DiskLimit  int64  // the default account's disk limit in bytes; 0 is unlimited
	// DefaultDisk is the disk size of a sandbox created without --disk;
	// default DefaultDiskSize (at most the pool's size).
	DefaultDisk int64
	// BootReads is how long after each boot a sandbox's reads are
	// recorded (package accessorder); 0 records none.
	BootReads time.Duration
	// PoolReserve is the part of the pool kept from sandboxes' data for
	// the metadata of checkpoints and deletes; default volume.Reserve's.
	PoolReserve int64
	// LazyFillRate bounds the background fill of a lazy restore, in
	// bytes per second; 0: as fast as it goes.
	LazyFillRate int64
	// Offsite is the accounts' off-site configurations by account name
	// (the config file's); an account without one has two directories
	// and a key file of its own under DataDir (see offsite.ForAccount).
	Offsite map[string]offsite.Config
	// LocalTier are the accounts' local-tier policies by account name
	// (the config file's); an account without one has
	// localtier.DefaultPolicy.
	LocalTier map[string]localtier.Policy
	// Network is how sandboxes reach the outside (its Dir is set to
	// DataDir/net); NetworkOff runs every sandbox with loopback only.
	Network    network.Config
	NetworkOff bool
	// ProxyListen is the TCP address of the port proxy (default
	// portproxy.DefaultListen), ProxyDomain its domain (default
	// portproxy.DefaultDomain): a published port is reached as
	// http://PORT-NAME.DOMAIN:PORT/. See docs/ports.md.
	ProxyListen string
	ProxyDomain string
	// ProxyTLSCert and ProxyTLSKey, both or neither, are the PEM files
	// of the proxy's certificate (for *.ProxyDomain and ProxyDomain):
	// with them it serves HTTPS only, read again when they change.
	ProxyTLSCert string
	ProxyTLSKey  string
	// Listen is the TCP address of the API over HTTPS, for API tokens
	// ("": the unix socket only). TLSCert and TLSKey are its certificate
	// (both or neither; neither: cairnd's own, self-signed, in
	// DATA-DIR/tls).
	Listen          string
	TLSCert, TLSKey string
	// HostName is this host's name among the hosts (default: the
	// machine's); Advertise the ADDR:PORT the others reach its API at
	// (default: Listen's, when it names an address); HostCapacity the
	// running sandboxes it is meant for (0: no bound). See
	// docs/several-hosts.md.
	HostName     string
	Advertise    string
	HostCapacity int
	// BuildMax caps what a build's RUN steps may be given (--memory,
	// --cpus, --step-timeout of cairn image build); a zero field is the
	// host's RAM, its cores, api.MaxStepTimeout. The defaults of a build
	// that asks nothing are api's, at most these.
	BuildMax build.Limits
}

// DefaultDiskSize is the disk size of a sandbox created without --disk,
// unless cairnd's --default-disk says otherwise.
const DefaultDiskSize = 10 << 30

func (c *Config) defaults() {
	if c.DefaultDisk == 0 {
		c.DefaultDisk = DefaultDiskSize
	}
	if c.DataDir == "" {
		c.DataDir = "/var/lib/cairn"
	}
	if c.Socket == "" {
		c.Socket = "/run/cairn/cairn.sock"
	}
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(c.DataDir, "cache")
	}
	if c.ProxyListen == "" {
		c.ProxyListen = portproxy.DefaultListen
	}
	if c.ProxyDomain == "" {
		c.ProxyDomain = portproxy.DefaultDomain
	}
}

// Run runs cairnd until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	if os.Geteuid() != 0 {
		return errors.New("cairnd must run as root (it mounts btrfs and runs gVisor)")
	}
	if err := checkDatabase(cfg.Database); err != nil { // checked before anything is made
		return err
	}
	remote, err := loadRemoteTLS(cfg)
	if err != nil {
		return err
	}
	var keyPair *portproxy.KeyPair
	if cfg.ProxyTLSCert != "" || cfg.ProxyTLSKey != "" {
		if keyPair, err = portproxy.LoadKeyPair(cfg.ProxyTLSCert, cfg.ProxyTLSKey); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	raiseFileLimit()
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()

	// The metadata first: a database cairnd cannot use (or that another
	// cairnd holds) stops it before it makes a pool.
	db, locks, closeDB, err := openStore(ctx, cfg.Database, cfg.DataDir)
	if err != nil {
		return err
	}
	defer closeDB()
	hostID, err := loadHostID(cfg.DataDir)
	if err != nil {
		return err
	}
	// This host among the hosts that share the store: a name another
	// host has stops it here, before it makes a pool.
	registry, err := registerHost(ctx, cfg, db, locks, hostID, remote)
	if err != nil {
		return err
	}

	runscPath, err := runsc.Find(cfg.Runsc)
	if err != nil {
		return err
	}
	var pool *volume.Pool
	if cfg.Pool != "" {
		pool, err = volume.OpenDir(cfg.Pool)
	} else {
		pool, err = volume.OpenLoop(ctx, cfg.DataDir, cfg.PoolSize)
	}
	if err != nil {
		return fmt.Errorf("storage pool: %w", err)
	}
	limit, err := pool.KeepReserve(ctx, cfg.PoolReserve)
	if err != nil {
		return fmt.Errorf("storage pool: %w", err)
	}
	slog.Info("pool space kept for sandboxes and checkpoints", "limit", limit)
	// Every change of a sandbox's row that users follow (state, crash,
	// OOM kill, checkpoint) goes to its event stream too.
	hub := activity.NewHub(time.Now)
	store := activity.Recording(db, hub)
	if _, err := store.EnsureAccount(ctx, metadata.DefaultAccount); err != nil {
		return err
	}
	opsCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOps()
	go registry.Run(opsCtx)
	leases := lease.New(store, lease.NewOwner(hostID), time.Now)
	go leases.Run(opsCtx)
	runtime := runsc.New(runscPath, filepath.Join(cfg.DataDir, "runsc"))
	view, browseDir, err := openView(ctx, cfg.DataDir, pool)
	if err != nil {
		return fmt.Errorf("browse view: %w", err)
	}
	dsk := disks.New(disks.Config{Pool: pool, Store: store, Leases: leases, Runtime: runtime, View: view, Now: time.Now, DiskLimit: cfg.DiskLimit,
		HostID: hostID, Mine: registry.Mine})
	if err := dsk.Sweep(ctx, lease.OwnerPrefix(hostID)); err != nil {
		return fmt.Errorf("recover checkpoint disks: %w", err)
	}
	offsites, err := offsite.NewSet(offsite.SetConfig{Store: store, Disk: offsite.FromDisks(dsk), Now: time.Now, DataDir: cfg.DataDir, Accounts: cfg.Offsite, Cluster: registry})
	if err != nil {
		return err
	}

	ops := operation.NewRegistry(opsCtx, time.Now)
	images := image.New(pool, cfg.CacheDir, store)
	// The management socket of each sandbox is served by the API server,
	// which itself needs the manager: bind it late.
	var srv *server.Server
	instances := sandbox.NewInstances()
	cat := catalog.New(catalog.Config{Store: store, Pool: pool, Disks: dsk, Leases: leases, Ops: ops, Live: instances, Offsite: offsites, Hosts: registry,
		Fill: func(id string) *api.Fill { return sandbox.FillOf(cfg.DataDir, id) }})
	// Metrics: observed by the manager, the upload queue and the API
	// server; sandboxes by state and the off-site lag read at each scrape.
	obs := metrics.New(Version, metrics.Sources{States: cat, Lags: offsiteLags(offsites)})
	offsites.SetObserver(obs)
	var nets sandbox.Networks
	var netMgr *network.Manager
	if !cfg.NetworkOff {
		cfg.Network.Dir = filepath.Join(cfg.DataDir, "net")
		if netMgr, err = network.New(cfg.Network); err != nil {
			return fmt.Errorf("sandbox networks (cairnd --network-off runs without them): %w", err)
		}
		defer netMgr.Close()
		nets = netMgr
	}
	// One fanotify group over the pool records the reads of each boot,
	// for the order of a lazy restore's fetch (package accessorder).
	var reads *accessorder.Watcher
	if cfg.BootReads > 0 {
		reads = accessorder.NewWatcher(pool.Root())
		defer reads.Close()
	}
	mgr, err := sandbox.NewManager(sandbox.Config{
		Reads:         reads,
		ReadsWindow:   cfg.BootReads,
		Networks:      nets,
		Instances:     instances,
		Catalog:       cat,
		SandboxAPI:    func(id string) http.Handler { return srv.SandboxHandler(id) },
		DataDir:       cfg.DataDir,
		InitBinary:    cfg.InitBinary,
		DefaultDisk:   cfg.DefaultDisk,
		Store:         store,
		Pool:          pool,
		Images:        images,
		Runtime:       runtime,
		Ops:           ops,
		Now:           time.Now,
		Disks:         dsk,
		Leases:        leases,
		BrowseDir:     browseDir,
		Offsite:       offsites,
		HostID:        hostID,
		Mine:          registry.Mine,
		Down:          registry.DownNow,
		HostDownAfter: hosts.DownAfter,
		HostName:      registry.NameOf,
		Observer:      obs,
		Activity:      hub.Publish,
		LazyFillRate:  cfg.LazyFillRate,
	})
	if err != nil {
		return err
	}
	defer mgr.Close()
	ops.SetArchive(mgr.ArchivedOperation)
	// The port proxy. A cairnd whose proxy address is taken still serves
	// its API (the URLs it prints name the address it was given).
	proxyAddr := cfg.ProxyListen
	proxyLn, err := net.Listen("tcp", cfg.ProxyListen)
	if err != nil {
		slog.Error("port proxy not served: cannot listen", "address", cfg.ProxyListen, "err", err)
	} else {
		defer proxyLn.Close()
		proxyAddr = proxyLn.Addr().String()
	}
	// The proxy dials into a sandbox through the manager, which knows its
	// running container's network.
	ports, err := portproxy.New(portproxy.Config{Store: store, Dialer: mgr, Domain: cfg.ProxyDomain, Addr: proxyAddr, TLS: keyPair != nil})
	if err != nil {
		return err
	}
	info := api.ServerInfo{Version: Version, Runtime: runscPath, Pool: pool.Root()}
	var fingerprint func() string // the API listener's certificate's
	if remote != nil {
		if err := remote.listen(cfg.Listen); err != nil {
			return err
		}
		defer remote.ln.Close()
		info.Listen = "https://" + remote.ln.Addr().String()
		fingerprint = remote.fingerprint
	}
	accessSvc := access.New(access.Config{Store: store, Now: time.Now, Purge: access.Purge{Ops: ops, Emptier: mgr,
		Revoked: func(ids []string) { srv.EndTokenSessions(ids...) },
		OffsiteOn: func(acct metadata.Account) bool {
			svc := offsites.For(acct.ID)
			return svc != nil && svc.Enabled()
		},
		Forget: func(ctx context.Context, acct metadata.Account) {
			offsites.Forget(acct)
			if n, err := images.PruneAccountSteps(ctx, acct.ID); err != nil {
				slog.Warn("drop a deleted account's build steps from the cache", "account", acct.Name, "err", err)
			} else if n > 0 {
				slog.Info("build steps of a deleted account dropped from the cache", "account", acct.Name, "entries", n)
			}
		}}})
	forwarder := hosts.NewForwarder(registry, store, images.Builtin)
	srv = server.New(server.Deps{
		Sandboxes: mgr, Rewinds: mgr, Processes: mgr, Files: sandboxFiles{mgr}, Views: cat, Checkpoints: cat, Accounts: cat, Scope: cat, Access: accessSvc, Audit: accessSvc,
		Images: imageService{Catalog: images, ops: ops, builder: newBuilder(pool, images, runtime, netMgr, cfg.DataDir), accounts: store,
			buildMax: build.HostLimits(cfg.BuildMax, hostMemory())}, Operations: ops, Ports: ports, Activity: hub,
		Requests: obs, Fingerprint: fingerprint, Hosts: forwarder,
		Evacuations: &evacuate.Evacuator{Hosts: forwarder, Store: store, Ops: ops, Local: mgr.Evacuate},
	}, info)
	if err := mgr.Recover(ctx); err != nil {
		return fmt.Errorf("recover sandboxes: %w", err)
	}
	go mgr.RunLifetimes(opsCtx)
	if registry.Shared() {
		go mgr.RunStaleCopies(opsCtx)
	}
	if netMgr != nil {
		// After the recovery, what runs has its network again; the rest
		// of what networks left (a crash, a reboot) goes.
		names, err := runtime.List(ctx)
		if err != nil {
			return fmt.Errorf("list containers: %w", err)
		}
		netMgr.Sweep(func(name string) bool { return slices.Contains(names, name) })
	}

	tier := localtier.New(localtier.Config{Store: store, Disks: dsk, Complete: localtier.ServicesComplete(offsites), Policies: cfg.LocalTier, Now: time.Now, Mine: registry.Mine})
	go schedule.New(schedule.Config{Store: store, Pool: pool, Checkpoints: mgr, Expirer: cat, Disks: dsk,
		PoolWatch: dsk.NewPoolWatch(), LocalTier: tier, Now: time.Now,
		Mine: registry.Mine, Leader: registry.Leader, Down: registry.DownID}).Run(opsCtx)
	go offsites.Run(opsCtx)
	go accessSvc.PruneAudit(opsCtx)

	ln, err := listen(cfg.Socket)
	if err != nil {
		return err
	}
	lim := httpedge.Host("api socket")
	httpSrv := httpedge.NewServer(socketHandler(srv, obs.Handler()), lim)
	httpSrv.RegisterOnShutdown(srv.StopFollowers)
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(httpedge.Listen(ln, lim)) }()
	var proxySrv *http.Server
	if proxyLn != nil {
		proxySrv = portproxy.NewServer(ports.Proxy())
		var l net.Listener = httpedge.Listen(proxyLn, portproxy.Limits())
		scheme := "http"
		if keyPair != nil {
			l, scheme = tls.NewListener(l, keyPair.TLSConfig()), "https"
		}
		go func() {
			if err := proxySrv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				slog.Error("port proxy stopped", "err", err)
			}
		}()
		slog.Info("port proxy ready", "address", proxyAddr, "domain", cfg.ProxyDomain, "scheme", scheme)
	}
	var remoteSrv *http.Server
	if remote != nil {
		remoteSrv = remote.serve(remoteHandler(srv, accessSvc, obs.Handler(), registry.Self().ID, forwarder))
		go remote.keepRenewed(opsCtx)
		slog.Info("API listener ready", "address", info.Listen, "tls_fingerprint", remote.fingerprint(), "self_signed", remote.selfSigned)
	}
	slog.Info("cairnd ready", "socket", cfg.Socket, "data", cfg.DataDir, "pool", pool.Root(), "runsc", runscPath, "version", Version)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	slog.Info("cairnd stopping; sandboxes keep running")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	httpSrv.Shutdown(sctx)
	if remoteSrv != nil {
		remoteSrv.Shutdown(sctx)
	}
	if proxySrv != nil {
		proxySrv.Shutdown(sctx)
	}
	return nil
}

// raiseFileLimit raises cairnd's soft limit of open files to its hard
// limit: every sandbox costs descriptors (its sockets, the connections to
// them, runsc's pipes), and the caps per sandbox (package httpedge) are
// sized against the hard limit, not the default soft one of 1024.
func raiseFileLimit() {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		slog.Warn("read the open files limit", "err", err)
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			slog.Warn("raise the open files limit", "to", lim.Max, "err", err)
			return
		}
	}
	slog.Info("open files limit", "limit", lim.Cur)
}

// lockDataDir makes sure one cairnd at a time uses the data dir.
func lockDataDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "cairnd.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	// A cairnd that was just killed may hold the lock a moment longer
	// through a child it was starting (a forked process keeps a copy of
	// every descriptor until its exec closes it), so a start right after
	// a crash waits a little before it gives up.
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("data dir %s is in use by another cairnd", dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockWait is how long a start waits for the data dir's lock.
const lockWait = 3 * time.Second

// listen opens the API socket, mode 0600, replacing a stale one.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("another cairnd is listening on %s", path)
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// loadHostID returns this host's id, made once and kept in the data dir:
// the leases of every cairnd on this host carry it, so a restarted cairnd
// reclaims what its predecessor held.
func loadHostID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "host-id")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, os.Rename(tmp, path)
}

// sandboxFiles is the Files API of the manager's sandboxes: their agents'
// file methods.
type sandboxFiles struct{ m *sandbox.Manager }

func (f sandboxFiles) FS(ctx context.Context, account, name string) (server.FS, error) {
	h, err := f.m.FileHost(ctx, account, name)
	if err != nil {
		return nil, err
	}
	return h, nil
}
