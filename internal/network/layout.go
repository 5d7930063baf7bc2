package network

import (
	"fmt"
	"net"
	"net/netip"
)

// The sandbox's side of the layout, the same in every sandbox.
var (
	// GuestAddr is the sandbox's address; GatewayAddr its gateway and DNS
	// resolver (the router namespace).
	GuestAddr   = netip.MustParseAddr("10.250.250.2")
	GatewayAddr = netip.MustParseAddr("10.250.250.1")
	guestPrefix = 30

	// Fixed so that the ARP cache in a memory image stays right.
	guestMAC   = net.HardwareAddr{0x02, 0xca, 0x1e, 0x00, 0x00, 0x02}
	gatewayMAC = net.HardwareAddr{0x02, 0xca, 0x1e, 0x00, 0x00, 0x01}
)

// Interface names inside the namespaces (the same in each).
const (
	guestLink   = "eth0" // sandbox ns
	gatewayLink = "gw0"  // router ns, towards the sandbox
	upLink      = "up0"  // router ns, towards the host
)

// DefaultRange is where the host-side links' addresses come from: a /30
// per running sandbox.
var DefaultRange = netip.MustParsePrefix("10.251.0.0/16")

// slotAddrs are the two ends of slot's host link: the host's and the
// router namespace's.
func slotAddrs(r netip.Prefix, slot int) (host, router netip.Addr, err error) {
	if slot < 0 || slot >= slots(r) {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("network slot %d outside %s", slot, r)
	}
	base := r.Masked().Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += uint32(slot) * 4
	at := func(v uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return at(n + 1), at(n + 2), nil
}

// slots is how many sandboxes range r has room for.
func slots(r netip.Prefix) int {
	if !r.Addr().Is4() || r.Bits() > 30 {
		return 0
	}
	n := 1 << (30 - r.Bits())
	return min(n, 1<<16)
}
