package network

import (
	"github.com/cairn-sandbox/cairn/internal/network/nsfile"

	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// resolver is a sandbox's DNS resolver: sockets on the gateway's port 53
// in its router namespace, served by a name server that applies the
// sandbox's domain rules and lets the sandbox reach what it resolved for
// an allowed name.
type resolver struct {
	cancel context.CancelFunc
	udp    net.PacketConn
	tcp    net.Listener
	ns     nameServer
}

// nameServer is what answers the queries (package network/dns).
type nameServer interface {
	ServeUDP(ctx context.Context, pc net.PacketConn) error
	ServeTCP(ctx context.Context, l net.Listener) error
	SetPolicy(allow, deny []string)
}

// newNameServer makes the name server of one sandbox; resolved is called
// with the addresses of allowed names before they are answered.
var newNameServer func(upstream string, allow, deny []string, resolved func(netip.Addr, time.Duration)) nameServer

// validName checks a domain pattern of the rules.
var validName = func(string) error { return errors.New("domain rules are not supported yet") }

func (m *Manager) startResolver(n *sandboxNet) (*resolver, error) {
	if n.policy.mode != ModeEgress || newNameServer == nil {
		return nil, nil
	}
	r := &resolver{}
	addr := netip.AddrPortFrom(GatewayAddr, 53).String()
	err := nsfile.Run(n.routerNS(), func() error {
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
	router := n.routerNS()
	r.ns = newNameServer(m.cfg.DNSUpstream, n.policy.rules.allowNames, n.policy.rules.denyNames, func(a netip.Addr, ttl time.Duration) {
		if err := addResolved(router, []netip.Addr{a}, ttl); err != nil {
			slog.Warn("let a sandbox reach an address resolved for an allowed name", "sandbox", n.id, "addr", a, "err", err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.ns.ServeUDP(ctx, r.udp)
	go r.ns.ServeTCP(ctx, r.tcp)
	return r, nil
}

func (r *resolver) setPolicy(p egressPolicy) {
	if r.ns != nil {
		r.ns.SetPolicy(p.rules.allowNames, p.rules.denyNames)
	}
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
