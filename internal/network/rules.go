package network

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Mode is a sandbox's network mode.
type Mode string

// Network modes.
const (
	// ModeNone: loopback only.
	ModeNone Mode = "none"
	// ModeEgress: outbound connections under the sandbox's rules.
	ModeEgress Mode = "egress"
)

// ParseMode checks a mode given by a user.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeNone, ModeEgress:
		return Mode(s), nil
	}
	return "", fmt.Errorf("network mode %q: want none or egress", s)
}

// Rules are a sandbox's allow and deny lists, as the user gave them: each
// entry an IPv4 address, an IPv4 CIDR or a domain pattern
// ("example.com", "*.example.com").
type Rules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// MaxRules bounds each list.
const MaxRules = 256

// DefaultBlocked are the ranges a sandbox cannot reach unless an allow
// rule opens them: private, shared, loopback, link-local (metadata
// services at 169.254.169.254 among them), multicast and reserved ones.
// The host's own addresses and other sandboxes are never reachable,
// whatever the rules (the host's table refuses them).
var DefaultBlocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// cidrRule is one CIDR of the rules with its verdict.
type cidrRule struct {
	net   netip.Prefix
	allow bool
}

// compiled are rules split into what the firewall and the resolver each
// enforce.
type compiled struct {
	cidrs      []cidrRule // most specific first; on a tie, deny first
	allowNames []string
	denyNames  []string
}

// compile checks rules and splits them. The error names the bad entry.
func compile(r Rules, validName func(string) error) (compiled, error) {
	var c compiled
	for _, list := range []struct {
		entries []string
		allow   bool
		flag    string
	}{{r.Allow, true, "--allow"}, {r.Deny, false, "--deny"}} {
		if len(list.entries) > MaxRules {
			return c, fmt.Errorf("%s: %d entries, at most %d", list.flag, len(list.entries), MaxRules)
		}
		for _, e := range list.entries {
			p, isNet, err := parseCIDR(e)
			switch {
			case err != nil:
				return c, fmt.Errorf("%s %q: %w", list.flag, e, err)
			case isNet:
				c.cidrs = append(c.cidrs, cidrRule{p, list.allow})
			default:
				name := strings.TrimSuffix(strings.ToLower(e), ".")
				if err := validName(name); err != nil {
					return c, fmt.Errorf("%s %q: not an IPv4 address, CIDR or domain name: %w", list.flag, e, err)
				}
				if list.allow {
					c.allowNames = append(c.allowNames, name)
				} else {
					c.denyNames = append(c.denyNames, name)
				}
			}
		}
	}
	slices.SortStableFunc(c.cidrs, func(a, b cidrRule) int {
		if a.net.Bits() != b.net.Bits() {
			return b.net.Bits() - a.net.Bits()
		}
		switch {
		case a.allow == b.allow:
			return 0
		case !a.allow:
			return -1
		}
		return 1
	})
	return c, nil
}

// parseCIDR reads an address or CIDR; isNet is false (and err nil) for
// what looks like neither, a name.
func parseCIDR(s string) (p netip.Prefix, isNet bool, err error) {
	if s == "" {
		return p, false, fmt.Errorf("empty entry")
	}
	looksNumeric := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r == '.' || r == '/' || r == ':' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F')
	}) < 0 && strings.ContainsAny(s, ".:/") && strings.ContainsAny(s, "0123456789")
	if strings.Contains(s, "/") {
		p, err = netip.ParsePrefix(s)
	} else if a, aerr := netip.ParseAddr(s); aerr == nil {
		p, err = a.Prefix(a.BitLen())
	} else if looksNumeric && !strings.ContainsAny(s, "abcdefABCDEF") {
		err = aerr
	} else {
		return p, false, nil
	}
	if err != nil {
		return p, true, err
	}
	if !p.Addr().Is4() {
		return p, true, fmt.Errorf("IPv6 is not supported: sandboxes have IPv4 only")
	}
	if p.Masked() != p {
		return p, true, fmt.Errorf("host bits set (did you mean %s?)", p.Masked())
	}
	return p, true, nil
}
