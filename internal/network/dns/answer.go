package dns

import (
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	// MinTTL is the least time an address resolved for an allowed name
	// stays reachable: an answer with TTL 0 must still let the guest
	// connect to what it just resolved.
	MinTTL = 60 * time.Second
	// MaxTTL is the most: a name's addresses change, and an address the
	// guest was given long ago should not stay open for ever. The answer
	// to the guest carries at most this TTL for the records concerned, so
	// that the guest resolves again before its address closes.
	MaxTTL = time.Hour

	// maxChain bounds the CNAME chain followed from the question's name.
	maxChain = 16
)

// resolvedAddr is an address of an allowed name's answer, with how long
// it is to stay reachable.
type resolvedAddr struct {
	addr netip.Addr
	ttl  time.Duration
}

// chainAddrs returns the A and AAAA records of m's answer section that
// answer qname: owned by qname itself or by a name its CNAME chain leads
// to. Other records in the answer (which an upstream may add) do not
// count: the policy allowed qname, not them. It caps the TTL of every
// record of the chain (CNAMEs included) in m at MaxTTL.
func chainAddrs(m *dnsmessage.Message, qname dnsmessage.Name) []resolvedAddr {
	chain := map[string]bool{lowerASCII(qname.String()): true}
	for name, hops := lowerASCII(qname.String()), 0; hops < maxChain; hops++ {
		next := ""
		for _, rr := range m.Answers {
			if c, ok := rr.Body.(*dnsmessage.CNAMEResource); ok && rr.Header.Class == dnsmessage.ClassINET &&
				lowerASCII(rr.Header.Name.String()) == name {
				next = lowerASCII(c.CNAME.String())
				break
			}
		}
		if next == "" || chain[next] {
			break
		}
		chain[next] = true
		name = next
	}
	var out []resolvedAddr
	maxSecs := uint32(MaxTTL / time.Second)
	for i := range m.Answers {
		rr := &m.Answers[i]
		if rr.Header.Class != dnsmessage.ClassINET || !chain[lowerASCII(rr.Header.Name.String())] {
			continue
		}
		var addr netip.Addr
		switch body := rr.Body.(type) {
		case *dnsmessage.AResource:
			addr = netip.AddrFrom4(body.A)
		case *dnsmessage.AAAAResource:
			addr = netip.AddrFrom16(body.AAAA).Unmap() // ::ffff:a.b.c.d reaches a.b.c.d
		case *dnsmessage.CNAMEResource:
		default:
			continue
		}
		rr.Header.TTL = min(rr.Header.TTL, maxSecs)
		if addr.IsValid() {
			ttl := min(max(time.Duration(rr.Header.TTL)*time.Second, MinTTL), MaxTTL)
			out = append(out, resolvedAddr{addr: addr, ttl: ttl})
		}
	}
	return out
}
