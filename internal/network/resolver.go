package network

import (
	"github.com/cairn-sandbox/cairn/internal/network/nsfile"

	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/cairn-sandbox/cairn/internal/network/dns"
)

// resolver is a sandbox's DNS resolver: sockets on the gateway's port 53
// in its router namespace, served by package dns, which applies the
// sandbox's domain rules; what it resolves for an allowed name the
// sandbox may reach (the resolved set), for the record's TTL.
type resolver struct {
	cancel context.CancelFunc
	udp    net.PacketConn
	tcp    net.Listener
	ns     *dns.Resolver
}

// validName checks a domain pattern of the rules.
var validName = dns.ValidPattern

// CheckRules checks rules as Attach and Update would, for a caller that
// stores them first: the error names the bad entry.
func CheckRules(r Rules) error {
	_, err := compile(r, validName)
	return err
}

func (m *Manager) startResolver(n *sandboxNet) (*resolver, error) {
	router := n.routerNS()
	ns, err := dns.New(dns.Config{
		Upstream: m.cfg.DNSUpstream,
		Policy:   namePolicy(n.policy),
		Resolved: func(a netip.Addr, ttl time.Duration) {
			if err := addResolved(router, []netip.Addr{a}, ttl); err != nil {
				slog.Warn("let a sandbox reach an address resolved for an allowed name", "container", n.id, "addr", a, "err", err)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	r := &resolver{ns: ns}
	addr := netip.AddrPortFrom(GatewayAddr, 53).String()
	err = nsfile.Run(router, func() error {
		var err error
		if r.udp, err = net.ListenPacket("udp4", addr); err != nil {
			return err
		}
		r.tcp, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		r.close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.ns.ServeUDP(ctx, r.udp)
	go r.ns.ServeTCP(ctx, r.tcp)
	return r, nil
}

func (r *resolver) setPolicy(p egressPolicy) error {
	return r.ns.SetPolicy(namePolicy(p))
}

// namePolicy is what the resolver enforces of p.
func namePolicy(p egressPolicy) dns.Policy {
	return dns.Policy{Allow: p.rules.allowNames, Deny: p.rules.denyNames}
}

func (r *resolver) close() {
	if r.cancel != nil {
		r.cancel()
	}
	if r.udp != nil {
		r.udp.Close()
	}
	if r.tcp != nil {
		r.tcp.Close()
	}
}
