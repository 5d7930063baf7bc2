package network

import (
	"github.com/cairn-sandbox/cairn/internal/network/nsfile"

	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config is how cairnd's sandboxes reach the outside.
type Config struct {
	// Dir holds the bound namespaces and per-sandbox files
	// (DATA-DIR/net); its path also names this cairnd's host links and
	// table, so that two cairnds on one host (tests) stay apart.
	Dir string
	// Uplink is the interface sandboxes reach the outside through; "":
	// the one of the default IPv4 route. Nothing goes out another one.
	Uplink string
	// Range holds the host-side links' addresses (a /30 each); the zero
	// value is DefaultRange. It must not overlap the host's networks.
	Range netip.Prefix
	// DNSUpstream is the resolver the sandboxes' resolvers ask
	// ("IP:PORT"); "": the first nameserver of /etc/resolv.conf.
	DNSUpstream string
}

// Attachment is what a sandbox's container needs of its network.
type Attachment struct {
	NetNS      string // the sandbox's network namespace (a bound file)
	ResolvConf string // a file to bind on /etc/resolv.conf
}

// Manager makes, changes and removes the sandboxes' networks.
type Manager struct {
	cfg     Config
	host    hostTable
	blocked []netip.Prefix // refused unless allowed: DefaultBlocked and the uplink's networks

	mu   sync.Mutex
	nets map[string]*sandboxNet // by container name
	used map[int]string         // slot -> container name
}

// sandboxNet is one sandbox's network.
type sandboxNet struct {
	id       string
	slot     int
	dir      string
	policy   egressPolicy
	resolver *resolver // nil in mode none
}

func (n *sandboxNet) routerNS() string  { return filepath.Join(n.dir, "router") }
func (n *sandboxNet) sandboxNS() string { return filepath.Join(n.dir, "sandbox") }

// New checks cfg, writes the host's table of this cairnd and turns on
// IPv4 forwarding if it is off (then the table forwards nothing but the
// sandboxes' traffic). Networks left from before (a restart, a crash)
// are found again: Attach adopts those of running sandboxes, Sweep
// removes the rest.
func New(cfg Config) (*Manager, error) {
	if cfg.Range == (netip.Prefix{}) {
		cfg.Range = DefaultRange
	}
	if slots(cfg.Range) == 0 {
		return nil, fmt.Errorf("network range %s: want an IPv4 prefix of /30 or wider", cfg.Range)
	}
	cfg.Range = cfg.Range.Masked()
	if cfg.Uplink == "" {
		up, err := defaultUplink()
		if err != nil {
			return nil, err
		}
		cfg.Uplink = up
	}
	nets, err := linkNetworks(cfg.Uplink)
	if err != nil {
		return nil, err
	}
	for _, p := range nets {
		if p.Overlaps(cfg.Range) {
			return nil, fmt.Errorf("network range %s overlaps the uplink's network %s: give cairnd another --network-range", cfg.Range, p)
		}
	}
	if cfg.DNSUpstream == "" {
		up, err := resolvConfUpstream("/etc/resolv.conf")
		if err != nil {
			return nil, err
		}
		cfg.DNSUpstream = up
	}
	if _, err := netip.ParseAddrPort(cfg.DNSUpstream); err != nil {
		return nil, fmt.Errorf("DNS upstream %q: want IP:PORT", cfg.DNSUpstream)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	host := hostTableFor(cfg.Dir)
	host.uplink, host.hostRange = cfg.Uplink, cfg.Range
	m := &Manager{
		cfg:     cfg,
		host:    host,
		blocked: append(append([]netip.Prefix(nil), DefaultBlocked...), nets...),
		nets:    map[string]*sandboxNet{},
		used:    map[int]string{},
	}
	if m.host.forwardOnlyOurs, err = enableForwarding(forwardingMarker); err != nil {
		return nil, err
	}
	if err := m.host.write(); err != nil {
		return nil, fmt.Errorf("host firewall table %s: %w", m.host.name, err)
	}
	slog.Info("sandbox networks", "uplink", cfg.Uplink, "range", cfg.Range, "dns_upstream", cfg.DNSUpstream,
		"table", "inet "+m.host.name, "links", m.host.linkPrefix+"*")
	return m, nil
}

// forwardingMarker says that a cairnd turned IPv4 forwarding on (since
// the host booted: /run is a tmpfs), for every cairnd on the host.
const forwardingMarker = "/run/cairn-forwarding-was-off"

// enableForwarding turns IPv4 forwarding on if it is off and reports
// whether it was off before a cairnd first turned it on (kept in marker).
func enableForwarding(marker string) (bool, error) {
	const path = "/proc/sys/net/ipv4/ip_forward"
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	if strings.TrimSpace(string(b)) == "0" {
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			return false, err
		}
		if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
			return false, fmt.Errorf("turn on IPv4 forwarding: %w", err)
		}
		slog.Info("turned on IPv4 forwarding; cairnd's table forwards nothing but the sandboxes' traffic")
	}
	_, err = os.Stat(marker)
	return err == nil, nil
}

// resolvConfUpstream is the first IPv4 nameserver of a resolv.conf.
func resolvConfUpstream(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("DNS upstream: %w (give cairnd --dns-upstream)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && a.Is4() {
				return netip.AddrPortFrom(a, 53).String(), nil
			}
		}
	}
	return "", fmt.Errorf("DNS upstream: no IPv4 nameserver in %s (give cairnd --dns-upstream)", path)
}

// Attach makes the network of container key (or takes over the one a
// previous cairnd made for it, if the container still runs) under mode
// and rules, and returns what the container needs. In mode none the
// network is there but lets nothing through (a sandbox switched to none
// while it runs keeps its interface until it boots again).
func (m *Manager) Attach(ctx context.Context, key string, mode Mode, rules Rules) (Attachment, error) {
	if err := validKey(key); err != nil {
		return Attachment{}, err
	}
	c, err := compile(rules, validName)
	if err != nil {
		return Attachment{}, err
	}
	policy := egressPolicy{mode: mode, rules: c, blocked: m.blocked}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.nets[key]
	if n == nil {
		n, err = m.adopt(key, policy)
		if err != nil {
			slog.Warn("network left by an earlier cairnd: making it again", "container", key, "err", err)
			m.removeLocked(key)
			n, err = m.create(key, policy)
		}
		if err != nil {
			return Attachment{}, err
		}
	}
	return Attachment{NetNS: n.sandboxNS(), ResolvConf: filepath.Join(n.dir, "resolv.conf")}, nil
}

// Exists reports whether container key has a network (made by this
// cairnd or an earlier one).
func (m *Manager) Exists(key string) bool {
	if validKey(key) != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nets[key] != nil {
		return true
	}
	_, err := os.Stat(filepath.Join(m.cfg.Dir, key, "slot"))
	return err == nil
}

// validKey checks a container name used as a directory name.
func validKey(key string) error {
	if key == "" || key == "." || key == ".." || strings.ContainsAny(key, "/\x00") || len(key) > 128 {
		return fmt.Errorf("network: bad container name %q", key)
	}
	return nil
}

// create makes container id's network: namespaces, links, table, resolver.
func (m *Manager) create(id string, policy egressPolicy) (n *sandboxNet, err error) {
	slot, err := m.freeSlot()
	if err != nil {
		return nil, err
	}
	n = &sandboxNet{id: id, slot: slot, dir: filepath.Join(m.cfg.Dir, id), policy: policy}
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		return nil, err
	}
	// The slot first: a sweep after a crash finds the host link by it.
	if err := os.WriteFile(filepath.Join(n.dir, "slot"), []byte(strconv.Itoa(slot)), 0o600); err != nil {
		return nil, err
	}
	m.used[slot] = id
	m.nets[id] = n
	defer func() {
		if err != nil {
			m.removeLocked(id)
		}
	}()
	resolvConf := "# written by cairnd: the sandbox's resolver, which applies its domain rules\nnameserver " + GatewayAddr.String() + "\n"
	if err := os.WriteFile(filepath.Join(n.dir, "resolv.conf"), []byte(resolvConf), 0o644); err != nil {
		return nil, err
	}
	for _, ns := range []string{n.routerNS(), n.sandboxNS()} {
		if err := nsfile.New(ns); err != nil {
			return nil, fmt.Errorf("network namespace: %w", err)
		}
	}
	hostAddr, routerAddr, err := slotAddrs(m.cfg.Range, slot)
	if err != nil {
		return nil, err
	}
	if err := makeLinks(hostLinkName(m.host.linkPrefix, slot), hostAddr, routerAddr, n.routerNS(), n.sandboxNS()); err != nil {
		return nil, err
	}
	if err := writeRouterTable(n.routerNS(), policy); err != nil {
		return nil, fmt.Errorf("sandbox firewall: %w", err)
	}
	if n.resolver, err = m.startResolver(n); err != nil {
		return nil, fmt.Errorf("sandbox resolver: %w", err)
	}
	return n, nil
}

// adopt takes over the network an earlier cairnd made for container id:
// its rules are written again (the addresses resolved so far kept) and
// its resolver started again.
func (m *Manager) adopt(id string, policy egressPolicy) (*sandboxNet, error) {
	dir := filepath.Join(m.cfg.Dir, id)
	b, err := os.ReadFile(filepath.Join(dir, "slot"))
	if errors.Is(err, os.ErrNotExist) {
		return m.create(id, policy)
	}
	if err != nil {
		return nil, err
	}
	slot, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || slot < 0 || slot >= slots(m.cfg.Range) {
		return nil, fmt.Errorf("slot file: %q", b)
	}
	if owner, taken := m.used[slot]; taken && owner != id {
		return nil, fmt.Errorf("slot %d is taken by %s", slot, owner)
	}
	n := &sandboxNet{id: id, slot: slot, dir: dir, policy: policy}
	if !nsfile.Is(n.routerNS()) || !nsfile.Is(n.sandboxNS()) {
		return nil, fmt.Errorf("namespaces gone")
	}
	if err := rewriteEgress(n.routerNS(), policy); err != nil {
		return nil, err
	}
	m.used[slot] = id
	m.nets[id] = n
	if n.resolver, err = m.startResolver(n); err != nil {
		return nil, err
	}
	slog.Info("network taken over from an earlier cairnd", "container", id, "slot", slot)
	return n, nil
}

func (m *Manager) freeSlot() (int, error) {
	for s := range slots(m.cfg.Range) {
		if _, taken := m.used[s]; taken {
			continue
		}
		// A slot file of a network not adopted yet keeps its slot too.
		if m.slotOnDisk(s) {
			continue
		}
		return s, nil
	}
	return 0, fmt.Errorf("no free network slot in %s (%d sandboxes with networking)", m.cfg.Range, len(m.used))
}

// slotOnDisk reports whether a network directory not in use holds slot.
func (m *Manager) slotOnDisk(slot int) bool {
	entries, _ := os.ReadDir(m.cfg.Dir)
	for _, e := range entries {
		if _, ours := m.nets[e.Name()]; ours || !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.cfg.Dir, e.Name(), "slot"))
		if err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(slot) {
			return true
		}
	}
	return false
}

// Update changes the mode and rules of container id's network at once, for
// new connections; those open stay. A sandbox without a network (it is
// not running, or runs in mode none) gets them at its next start.
func (m *Manager) Update(id string, mode Mode, rules Rules) error {
	c, err := compile(rules, validName)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.nets[id]
	if n == nil {
		return nil
	}
	policy := egressPolicy{mode: mode, rules: c, blocked: m.blocked}
	if err := rewriteEgress(n.routerNS(), policy); err != nil {
		return err
	}
	n.policy = policy
	if n.resolver != nil {
		return n.resolver.setPolicy(policy)
	}
	return nil
}

// Detach removes container id's network, if it has one.
func (m *Manager) Detach(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removeLocked(id)
}

// removeLocked removes everything of container id's network there is: its
// resolver, host link (the rest of the links go with their namespaces),
// namespaces and directory.
func (m *Manager) removeLocked(id string) error {
	dir := filepath.Join(m.cfg.Dir, id)
	n := m.nets[id]
	slot := -1
	if n != nil {
		if n.resolver != nil {
			n.resolver.close()
		}
		slot = n.slot
	} else if b, err := os.ReadFile(filepath.Join(dir, "slot")); err == nil {
		if s, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			slot = s
		}
	}
	var errs []error
	if slot >= 0 {
		errs = append(errs, deleteHostLink(hostLinkName(m.host.linkPrefix, slot)))
	}
	errs = append(errs, nsfile.Remove(filepath.Join(dir, "sandbox")), nsfile.Remove(filepath.Join(dir, "router")))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove network of container %s: %w", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	delete(m.nets, id)
	if owner, ok := m.used[slot]; ok && owner == id {
		delete(m.used, slot)
	}
	return nil
}

// Sweep removes what networks of sandboxes that keep does not name left
// on the host: namespaces, directories and host links (a crash, a
// sandbox deleted while cairnd was down). Run it once at start, after the
// running sandboxes were attached.
func (m *Manager) Sweep(keep func(id string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		slog.Warn("sweep networks", "err", err)
		return
	}
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || m.nets[id] != nil || keep(id) {
			continue
		}
		if err := m.removeLocked(id); err != nil {
			slog.Warn("sweep network", "container", id, "err", err)
		} else {
			slog.Info("removed a network left behind", "container", id)
		}
	}
	links, err := hostLinks(m.host.linkPrefix)
	if err != nil {
		slog.Warn("sweep host links", "err", err)
		return
	}
	for _, l := range links {
		slot, err := strconv.Atoi(strings.TrimPrefix(l, m.host.linkPrefix))
		if _, used := m.used[slot]; err == nil && used {
			continue
		}
		if err := deleteHostLink(l); err != nil {
			slog.Warn("sweep host link", "link", l, "err", err)
		}
	}
}

// Close stops the resolvers (at shutdown). The networks stay: sandboxes
// keep running while cairnd is down, and the next cairnd adopts them.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range m.nets {
		if n.resolver != nil {
			n.resolver.close()
		}
	}
}

// DialSandbox connects to TCP port inside container id, from
// its router namespace.
func (m *Manager) DialSandbox(ctx context.Context, id string, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d out of range", port)
	}
	m.mu.Lock()
	n := m.nets[id]
	m.mu.Unlock()
	if n == nil {
		return nil, ErrNoNetwork
	}
	var conn net.Conn
	err := nsfile.Run(n.routerNS(), func() error {
		d := net.Dialer{Timeout: 10 * time.Second}
		var err error
		conn, err = d.DialContext(ctx, "tcp4", netip.AddrPortFrom(GuestAddr, uint16(port)).String())
		return err
	})
	return conn, err
}

// ErrNoNetwork: the sandbox has no network (not running, or mode none).
var ErrNoNetwork = errors.New("the sandbox has no network: it is not running, or its network mode is none")

// RemoveHostState removes what New put on the host: this cairnd's table
// and, if a cairnd turned IPv4 forwarding on and no other cairnd's table
// is left, forwarding again. For tests and an uninstall: the sandboxes'
// networks must be detached first (see CleanHost).
func (m *Manager) RemoveHostState() error {
	if err := m.host.remove(); err != nil {
		return err
	}
	others, err := m.host.otherCairnTables()
	if err != nil || others {
		return err
	}
	if _, err := os.Stat(forwardingMarker); err != nil {
		return nil
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0o644); err != nil {
		return err
	}
	return os.Remove(forwardingMarker)
}

// CleanHost removes everything the networks of the cairnd whose network
// directory is dir left on the host: its sandboxes' namespaces and links,
// its table, and forwarding if a cairnd turned it on and no other cairnd
// is left. For a cairnd that is not running (tests, an uninstall).
func CleanHost(dir string) error {
	m := &Manager{cfg: Config{Dir: dir}, host: hostTableFor(dir), nets: map[string]*sandboxNet{}, used: map[int]string{}}
	m.Sweep(func(string) bool { return false })
	return m.RemoveHostState()
}

// LinkPrefix is how the host-side links of the cairnd whose network
// directory is dir begin: what it may create, sweep and delete, and
// nothing else.
func LinkPrefix(dir string) string { return hostTableFor(dir).linkPrefix }

// hostTableFor names the host table and links of the cairnd whose network
// directory is dir.
func hostTableFor(dir string) hostTable {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	tag := hex.EncodeToString(sum[:2])
	return hostTable{name: "cairn-" + tag, linkPrefix: "cn" + tag}
}
