// Command cairnd is cairn's daemon: it runs sandboxes and serves the API the
// cairn CLI talks to. See `cairnd --help`.
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/cairn-sandbox/cairn/internal/accessorder"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/browse"
	"github.com/cairn-sandbox/cairn/internal/daemon"
	"github.com/cairn-sandbox/cairn/internal/lazy"
	"github.com/cairn-sandbox/cairn/internal/network"
	"github.com/cairn-sandbox/cairn/internal/portproxy"
	"github.com/cairn-sandbox/cairn/internal/sandbox"
)

func main() {
	// `cairnd browse-server …` is the process that serves the sandboxes'
	// /.cairn/checkpoints (started by cairnd itself; see docs/browse.md).
	if len(os.Args) > 1 && os.Args[1] == browse.ServerCommand {
		os.Exit(browse.Main(os.Args[2:]))
	}
	// `cairnd lazyfs …` serves the root of a sandbox restored lazily
	// (started by cairnd itself; see docs/lazy-restore.md).
	if len(os.Args) > 1 && os.Args[1] == lazy.ServerCommand {
		os.Exit(lazy.Main(os.Args[2:]))
	}
	var cfg daemon.Config
	var poolSize, logLevel, diskLimit, configFile, defaultDisk, poolReserve string
	flag.StringVar(&configFile, "config", "", "JSON config file with the account's off-site locations (default: two directories under the data dir; see docs/offsite.md)")
	flag.StringVar(&cfg.DataDir, "data-dir", "/var/lib/cairn", "directory for the pool, metadata and per-sandbox files")
	flag.StringVar(&cfg.Database, "database", "", "metadata database: a postgres://USER[:PASSWORD]@HOST[:PORT]/DB URL (see docs/postgres.md; default: SQLite in DATA-DIR/cairn.db)")
	flag.StringVar(&cfg.Socket, "socket", "/run/cairn/cairn.sock", "unix socket of the API (mode 0600)")
	flag.StringVar(&cfg.Pool, "pool", "", "an existing btrfs directory to use as the pool (default: a loop file in the data dir)")
	flag.StringVar(&poolSize, "pool-size", "20G", "size of the pool's sparse loop file when it is created")
	flag.StringVar(&cfg.Runsc, "runsc", "", "path of gVisor's runsc (default: found on PATH)")
	flag.StringVar(&cfg.InitBinary, "init", "", "path of the cairn-init binary (default: cairn-init next to cairnd)")
	flag.StringVar(&cfg.CacheDir, "cache-dir", "", "downloads kept between image builds (default: DATA-DIR/cache)")
	flag.StringVar(&diskLimit, "disk-limit", "", "the account's limit on disk used by sandboxes and checkpoints, e.g. 50G (default: unlimited)")
	flag.StringVar(&defaultDisk, "default-disk", "10G", "disk size of a sandbox created without --disk, the image's files included (at most the pool's size)")
	flag.StringVar(&poolReserve, "pool-reserve", "", "part of the pool kept from sandboxes' data, for the metadata of checkpoints and deletes (default: a tenth of the pool, 256M to 4G)")
	var lazyFillRate string
	flag.StringVar(&lazyFillRate, "lazy-fill-rate", "", "bound on the background fill of a lazy restore, bytes per second, e.g. 50M (default: as fast as it goes; reads are never held back)")
	var buildMaxMemory, buildMaxCPUs, buildMaxTimeout string
	flag.StringVar(&buildMaxMemory, "build-max-memory", "", "the most memory a build's RUN step may be given with cairn image build --memory, e.g. 8G (default: the host's RAM; a build that asks none gets 2G, at most this)")
	flag.StringVar(&buildMaxCPUs, "build-max-cpus", "", "the most CPUs a build's RUN step may be given with --cpus, e.g. 2 (default and when a build asks none: the host's cores)")
	flag.StringVar(&buildMaxTimeout, "build-max-step-timeout", "", "the longest a build's RUN step may run with --step-timeout, e.g. 2h (default: 24h; a build that asks none gets 30m, at most this)")
	var netRange string
	flag.StringVar(&cfg.Network.Uplink, "network-uplink", "", "interface sandboxes reach the outside through; nothing goes out another (default: the default IPv4 route's)")
	flag.StringVar(&cfg.Network.DNSUpstream, "dns-upstream", "", "IP:PORT of the resolver the sandboxes' resolvers ask (default: the first nameserver of /etc/resolv.conf)")
	flag.StringVar(&netRange, "network-range", network.DefaultRange.String(), "IPv4 range of the host's ends of the sandboxes' links, a /30 per running sandbox; must not overlap the host's networks")
	flag.BoolVar(&cfg.NetworkOff, "network-off", false, "no networking: every sandbox has loopback only, and one whose mode is egress does not start (N01)")
	flag.StringVar(&cfg.ProxyListen, "proxy-listen", portproxy.DefaultListen, "TCP address of the port proxy, which forwards HTTP and WebSocket to published ports (see docs/ports.md)")
	flag.StringVar(&cfg.ProxyDomain, "proxy-domain", portproxy.DefaultDomain, "domain of the port proxy: a published port is reached as PORT-NAME.DOMAIN (needs wildcard DNS to this host; *.localhost resolves here)")
	flag.StringVar(&cfg.ProxyTLSCert, "proxy-tls-cert", "", "PEM certificate of the port proxy (for DOMAIN and *.DOMAIN); with --proxy-tls-key it serves HTTPS only, and reads both again when they change")
	flag.StringVar(&cfg.ProxyTLSKey, "proxy-tls-key", "", "PEM private key of --proxy-tls-cert")
	flag.StringVar(&cfg.Listen, "listen", "", "ADDR:PORT of the API over HTTPS for API tokens (e.g. 0.0.0.0:7443); the unix socket stays, root only")
	flag.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate of --listen (default: a self-signed one made in DATA-DIR/tls, its fingerprint logged)")
	flag.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	flag.DurationVar(&cfg.BootReads, "boot-reads", accessorder.DefaultWindow, "how long after each boot a sandbox's reads are recorded, the order a lazy restore of its checkpoints fetches in first (see docs/lazy-restore.md); 0 records none")
	flag.StringVar(&cfg.HostName, "host-name", "", "this host's name among the hosts that share --database (default: the machine's host name; see docs/several-hosts.md)")
	flag.StringVar(&cfg.Advertise, "advertise", "", "ADDR:PORT at which the other hosts reach this host's --listen (default: --listen's address, when it names one)")
	flag.IntVar(&cfg.HostCapacity, "host-capacity", 0, "how many running sandboxes this host is meant for: placement weighs hosts by it (default: no bound)")
	flag.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println("cairnd", daemon.Version)
		return
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fatal(fmt.Errorf("--log-level: %w", err))
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))

	size, err := sandbox.ParseSize(poolSize)
	if err != nil {
		fatal(fmt.Errorf("--pool-size: %w", err))
	}
	cfg.PoolSize = size
	if diskLimit != "" {
		if cfg.DiskLimit, err = sandbox.ParseSize(diskLimit); err != nil {
			fatal(fmt.Errorf("--disk-limit: %w", err))
		}
	}
	if cfg.DefaultDisk, err = sandbox.ParseSize(defaultDisk); err != nil {
		fatal(fmt.Errorf("--default-disk: %w", err))
	}
	if lazyFillRate != "" {
		if cfg.LazyFillRate, err = sandbox.ParseSize(lazyFillRate); err != nil {
			fatal(fmt.Errorf("--lazy-fill-rate: %w", err))
		}
	}
	if poolReserve != "" {
		if cfg.PoolReserve, err = sandbox.ParseSize(poolReserve); err != nil {
			fatal(fmt.Errorf("--pool-reserve: %w", err))
		}
	}
	if buildMaxMemory != "" {
		if cfg.BuildMax.MemoryBytes, err = bounds.ParseSize("--build-max-memory", buildMaxMemory, api.MinMemoryBytes, api.MaxMemoryBytes); err != nil {
			fatal(err)
		}
	}
	if buildMaxCPUs != "" {
		if cfg.BuildMax.CPUs, err = bounds.ParseFloat("--build-max-cpus", buildMaxCPUs, api.MinCPUs, api.MaxCPUs, false); err != nil {
			fatal(err)
		}
	}
	if buildMaxTimeout != "" {
		if cfg.BuildMax.StepTimeout, err = bounds.ParseDuration("--build-max-step-timeout", buildMaxTimeout, api.MinStepTimeout, api.MaxStepTimeout, time.Second); err != nil {
			fatal(err)
		}
	}
	if cfg.Network.Range, err = netip.ParsePrefix(netRange); err != nil {
		fatal(fmt.Errorf("--network-range: %w", err))
	}
	if configFile != "" {
		if err := daemon.LoadFile(configFile, &cfg); err != nil {
			fatal(err)
		}
	}
	if cfg.InitBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			fatal(err)
		}
		cfg.InitBinary = filepath.Join(filepath.Dir(exe), "cairn-init")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := daemon.Run(ctx, cfg); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cairnd:", err)
	os.Exit(1)
}
