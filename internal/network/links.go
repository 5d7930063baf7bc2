package network

import (
	"github.com/cairn-sandbox/cairn/internal/network/nsfile"

	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The links of one sandbox's network: the host's end of the host link
// (named after the slot), the router namespace with both ends it holds,
// and the sandbox's namespace with its eth0.

// hostLinkName is the host-side link of slot.
func hostLinkName(prefix string, slot int) string { return fmt.Sprintf("%s%d", prefix, slot) }

// makeLinks creates and configures the links of a sandbox whose
// namespaces exist at routerNS and sandboxNS.
func makeLinks(hostLink string, hostAddr, routerAddr netip.Addr, routerNS, sandboxNS string) error {
	rfd, err := netns.GetFromPath(routerNS)
	if err != nil {
		return err
	}
	defer rfd.Close()
	sfd, err := netns.GetFromPath(sandboxNS)
	if err != nil {
		return err
	}
	defer sfd.Close()

	// host <-> router
	up := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostLink}, PeerName: upLink, PeerNamespace: netlink.NsFd(int(rfd))}
	if err := netlink.LinkAdd(up); err != nil {
		return fmt.Errorf("add link %s: %w", hostLink, err)
	}
	if err := setAddrUp(nil, hostLink, netip.PrefixFrom(hostAddr, 30), nil); err != nil {
		return err
	}

	rh, err := netlink.NewHandleAt(rfd)
	if err != nil {
		return err
	}
	defer rh.Close()
	// router <-> sandbox
	gw := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: gatewayLink, HardwareAddr: gatewayMAC},
		PeerName: guestLink, PeerHardwareAddr: guestMAC, PeerNamespace: netlink.NsFd(int(sfd))}
	if err := rh.LinkAdd(gw); err != nil {
		return fmt.Errorf("add link %s: %w", gatewayLink, err)
	}
	if err := setAddrUp(rh, "lo", netip.Prefix{}, nil); err != nil {
		return err
	}
	if err := setAddrUp(rh, upLink, netip.PrefixFrom(routerAddr, 30), &hostAddr); err != nil {
		return err
	}
	if err := setAddrUp(rh, gatewayLink, netip.PrefixFrom(GatewayAddr, guestPrefix), nil); err != nil {
		return err
	}
	if err := nsfile.Run(routerNS, func() error {
		return writeSysctls(map[string]string{
			"net/ipv4/ip_forward":             "1",
			"net/ipv6/conf/all/disable_ipv6":  "1",
			"net/ipv4/conf/all/rp_filter":     "1",
			"net/ipv4/conf/default/rp_filter": "1",
		})
	}); err != nil {
		return err
	}

	sh, err := netlink.NewHandleAt(sfd)
	if err != nil {
		return err
	}
	defer sh.Close()
	if err := nsfile.Run(sandboxNS, func() error {
		return writeSysctls(map[string]string{"net/ipv6/conf/all/disable_ipv6": "1"})
	}); err != nil {
		return err
	}
	if err := setAddrUp(sh, "lo", netip.Prefix{}, nil); err != nil {
		return err
	}
	gwAddr := GatewayAddr
	return setAddrUp(sh, guestLink, netip.PrefixFrom(GuestAddr, guestPrefix), &gwAddr)
}

// setAddrUp gives link its address (if p is valid), brings it up and adds
// a default route via gw (if not nil). h nil: the host's namespace.
func setAddrUp(h *netlink.Handle, name string, p netip.Prefix, gw *netip.Addr) error {
	if h == nil {
		var err error
		if h, err = netlink.NewHandle(); err != nil {
			return err
		}
		defer h.Close()
	}
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if p.IsValid() {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 32)}}
		if err := h.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("address %s on %s: %w", p, name, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	if gw != nil {
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw.AsSlice()}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	return nil
}

// writeSysctls sets sysctls of the calling thread's network namespace.
func writeSysctls(kv map[string]string) error {
	for k, v := range kv {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", k, err)
		}
	}
	return nil
}

// deleteHostLink removes a host-side link (its peer goes with it); one
// that is not there is no error.
func deleteHostLink(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		if _, ok := err.(netlink.LinkNotFoundError); ok {
			return nil
		}
		return err
	}
	return netlink.LinkDel(l)
}

// hostLinks lists the host's links whose names start with prefix.
func hostLinks(prefix string) ([]string, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range links {
		if n := l.Attrs().Name; len(n) > len(prefix) && n[:len(prefix)] == prefix {
			out = append(out, n)
		}
	}
	return out, nil
}

// defaultUplink is the interface of the host's default IPv4 route, and
// the IPv4 networks it is on.
func defaultUplink() (string, error) {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return "", err
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			l, err := netlink.LinkByIndex(r.LinkIndex)
			if err != nil {
				return "", err
			}
			return l.Attrs().Name, nil
		}
	}
	return "", fmt.Errorf("no default IPv4 route: give cairnd --network-uplink")
}

// linkNetworks are the IPv4 networks the host's link name is on.
func linkNetworks(name string) ([]netip.Prefix, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("uplink %s: %w", name, err)
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		if ok {
			out = append(out, netip.PrefixFrom(ip, ones).Masked())
		}
	}
	return out, nil
}
