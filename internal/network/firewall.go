package network

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The firewall: one table in each sandbox's router namespace (its rules),
// one in the host's namespace for every sandbox of this cairnd (NAT to the
// uplink, and nothing from a sandbox to the host or between sandboxes).
// Each is replaced whole, in one transaction, so it is never half made.

// routerTable is the table's name in a router namespace (cairnd's own
// namespace: nothing else is there).
const routerTable = "cairn"

// resolvedSet holds the addresses the resolver found for allowed names,
// each until its TTL runs out.
const resolvedSet = "resolved"

// nftIn runs fn with an nftables connection to the namespace at nsPath
// ("" for the host's) and commits what it queued.
func nftIn(nsPath string, fn func(c *nftables.Conn) error) error {
	var opts []nftables.ConnOption
	if nsPath != "" {
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		opts = append(opts, nftables.WithNetNSFd(fd))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return err
	}
	if err := fn(c); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	return nil
}

// egressPolicy is what the router's egress chain enforces.
type egressPolicy struct {
	mode    Mode
	rules   compiled
	blocked []netip.Prefix // refused unless a CIDR rule allows them
}

// writeRouterTable replaces the router namespace's table. The resolved
// set starts empty: the resolver fills it again as names are looked up.
func writeRouterTable(nsPath string, p egressPolicy) error {
	return nftIn(nsPath, func(c *nftables.Conn) error {
		t := &nftables.Table{Family: nftables.TableFamilyINet, Name: routerTable}
		// Add then delete then add: deleting a table that is not there
		// fails the whole transaction.
		c.AddTable(t)
		c.DelTable(t)
		c.AddTable(t)
		set := &nftables.Set{Table: t, Name: resolvedSet, KeyType: nftables.TypeIPAddr, HasTimeout: true}
		if err := c.AddSet(set, nil); err != nil {
			return err
		}
		refuse := c.AddChain(&nftables.Chain{Table: t, Name: "refuse"})
		for _, e := range refuseRules() {
			c.AddRule(&nftables.Rule{Table: t, Chain: refuse, Exprs: e})
		}
		egress := c.AddChain(&nftables.Chain{Table: t, Name: "egress"})
		addEgressRules(c, t, egress, set, p)

		dropPolicy := nftables.ChainPolicyDrop
		fwd := c.AddChain(&nftables.Chain{Table: t, Name: "forward", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &dropPolicy})
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: exprs(established(), accept())})
		// A sandbox sends from its own address only.
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: exprs(iif(gatewayLink), saddrNot(GuestAddr), drop())})
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: exprs(iif(gatewayLink), oif(upLink), jump("egress"))})

		acceptPolicy := nftables.ChainPolicyAccept
		in := c.AddChain(&nftables.Chain{Table: t, Name: "input", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &acceptPolicy})
		c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: exprs(established(), accept())})
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			if p.mode == ModeEgress {
				c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: exprs(iif(gatewayLink), l4proto(proto), dport(53), accept())})
			}
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: exprs(iif(gatewayLink), jump("refuse"))})
		c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: exprs(iif(upLink), drop())})

		// Every DNS query goes to the sandbox's resolver, whatever server
		// it was sent to, so no name escapes the rules.
		pre := c.AddChain(&nftables.Chain{Table: t, Name: "prerouting", Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: exprs(iif(gatewayLink), ipv4(), l4proto(proto), dport(53), dnatTo(GatewayAddr, 53))})
		}
		post := c.AddChain(&nftables.Chain{Table: t, Name: "postrouting", Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
		c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: exprs(oif(upLink), masquerade())})
		return nil
	})
}

// addEgressRules queues the egress chain's rules: addresses resolved for
// allowed names, then the CIDR rules (most specific first), then the
// ranges blocked by default; everything else is allowed.
func addEgressRules(c *nftables.Conn, t *nftables.Table, egress *nftables.Chain, set *nftables.Set, p egressPolicy) {
	add := func(e []expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: egress, Exprs: e}) }
	if p.mode != ModeEgress {
		add(jump("refuse"))
		return
	}
	add(exprs(daddrInSet(set), accept()))
	for _, r := range p.rules.cidrs {
		if r.allow {
			add(exprs(daddrIn(r.net), accept()))
		} else {
			add(exprs(daddrIn(r.net), jump("refuse")))
		}
	}
	for _, b := range p.blocked {
		add(exprs(daddrIn(b), jump("refuse")))
	}
	add(accept())
}

// rewriteEgress replaces the egress chain's rules in one transaction,
// leaving the resolved set (and the connections already open) as they are.
func rewriteEgress(nsPath string, p egressPolicy) error {
	return nftIn(nsPath, func(c *nftables.Conn) error {
		t := &nftables.Table{Family: nftables.TableFamilyINet, Name: routerTable}
		set, err := c.GetSetByName(t, resolvedSet)
		if err != nil {
			return fmt.Errorf("router table: %w", err)
		}
		egress := &nftables.Chain{Table: t, Name: "egress"}
		c.FlushChain(egress)
		addEgressRules(c, t, egress, set, p)
		return nil
	})
}

// addResolved lets the sandbox reach addrs for ttl.
func addResolved(nsPath string, addrs []netip.Addr, ttl time.Duration) error {
	var elems []nftables.SetElement
	for _, a := range addrs {
		if a.Is4() {
			b := a.As4()
			elems = append(elems, nftables.SetElement{Key: b[:], Timeout: ttl})
		}
	}
	if len(elems) == 0 {
		return nil
	}
	return nftIn(nsPath, func(c *nftables.Conn) error {
		t := &nftables.Table{Family: nftables.TableFamilyINet, Name: routerTable}
		set := &nftables.Set{Table: t, Name: resolvedSet, KeyType: nftables.TypeIPAddr, HasTimeout: true}
		// An element already there keeps its old timeout unless it is
		// deleted first; both in one transaction.
		if err := c.SetAddElements(set, elems); err != nil {
			return err
		}
		if err := c.SetDeleteElements(set, elems); err != nil {
			return err
		}
		return c.SetAddElements(set, elems)
	})
}

// hostTable is what the host's table of this cairnd enforces.
type hostTable struct {
	name       string       // cairn-<tag>
	linkPrefix string       // of every host-side link: "cn<tag>"
	uplink     string       // interface sandboxes reach the outside through
	hostRange  netip.Prefix // the host-side links' addresses
	// forwardOnlyOurs: cairnd turned IPv4 forwarding on, so whatever else
	// the host would now forward is dropped, as before.
	forwardOnlyOurs bool
}

// write replaces the host's table of this cairnd.
func (h hostTable) write() error {
	return nftIn("", func(c *nftables.Conn) error {
		t := &nftables.Table{Family: nftables.TableFamilyINet, Name: h.name}
		c.AddTable(t)
		c.DelTable(t)
		c.AddTable(t)
		ours := h.linkPrefix + "*"
		acceptPolicy := nftables.ChainPolicyAccept
		fwd := c.AddChain(&nftables.Chain{Table: t, Name: "forward", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &acceptPolicy})
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: exprs(iif(ours), oif(h.uplink), accept())})
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: exprs(iif(h.uplink), oif(ours), established(), accept())})
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: exprs(iif(ours), drop())})
		c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: exprs(oif(ours), drop())})
		if h.forwardOnlyOurs {
			c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: drop()})
		}
		// Nothing from a sandbox reaches the host itself: not cairnd, not
		// any port of the host's.
		in := c.AddChain(&nftables.Chain{Table: t, Name: "input", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &acceptPolicy})
		refuse := c.AddChain(&nftables.Chain{Table: t, Name: "refuse"})
		for _, e := range refuseRules() {
			c.AddRule(&nftables.Rule{Table: t, Chain: refuse, Exprs: e})
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: in, Exprs: exprs(iif(ours), jump("refuse"))})
		post := c.AddChain(&nftables.Chain{Table: t, Name: "postrouting", Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
		c.AddRule(&nftables.Rule{Table: t, Chain: post, Exprs: exprs(saddrIn(h.hostRange), oif(h.uplink), masquerade())})
		return nil
	})
}

// remove deletes the host's table of this cairnd, if it is there.
func (h hostTable) remove() error {
	return nftIn("", func(c *nftables.Conn) error {
		t := &nftables.Table{Family: nftables.TableFamilyINet, Name: h.name}
		c.AddTable(t)
		c.DelTable(t)
		return nil
	})
}
