// Package network gives each sandbox its own network: two network
// namespaces, addresses laid out so that a memory image fits every copy,
// NAT to the host's uplink, the sandbox's allow and deny rules in
// nftables, a DNS resolver that enforces its domain rules, and a way for
// cairnd to reach a port inside (published ports).
//
// The layout (docs/networking.md has the picture):
//
//	sandbox ns   eth0 10.250.250.2/30 (gVisor's netstack takes it)
//	               | veth
//	router ns    gw0 10.250.250.1/30, the sandbox's resolver on :53,
//	             its rules (table inet cairn), NAT to up0
//	               | veth
//	host         cn<tag><slot> 10.251.x.y/30, NAT to the uplink (table
//	             inet cairn-<tag>: nothing else of the host's is touched)
//
// The sandbox's side is the same in every sandbox (addresses and MAC
// addresses), so a memory image taken in one restores into any other: a
// fork's copies each get their own router namespace and NAT state. The
// router namespace holds everything per sandbox, so deleting it deletes
// the sandbox's rules too; the host keeps one table for all.
package network
