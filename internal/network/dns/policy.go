package dns

import (
	"net/netip"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Policy is a sandbox's domain rules: lists of patterns (see ValidPattern).
// A name that matches an Allow pattern is Allowed, whatever Deny says; one
// that matches only a Deny pattern is Denied; any other name is Neutral.
type Policy struct {
	Allow []string
	Deny  []string
}

// Decision is what a Policy says about one name.
type Decision int

const (
	// Neutral: no pattern matches. The name resolves, and its addresses are
	// not reported to Config.Resolved.
	Neutral Decision = iota
	// Allowed: an Allow pattern matches. The name resolves, and every
	// address of the answer is reported to Config.Resolved first.
	Allowed
	// Denied: a Deny pattern matches and no Allow pattern does. The name
	// gets NXDOMAIN at once; the upstream never sees it.
	Denied
)

func (d Decision) String() string {
	switch d {
	case Neutral:
		return "neutral"
	case Allowed:
		return "allowed"
	case Denied:
		return "denied"
	}
	return "decision(?)"
}

const (
	maxNameLen  = 253 // a domain name in text form, without the trailing dot
	maxLabelLen = 63
)

// ValidPattern reports whether p is a domain pattern: "example.com"
// matches that name only; "*.example.com" matches every name under
// example.com (a.example.com, a.b.example.com) but not example.com itself.
// Patterns are case-insensitive and a trailing dot is ignored. Labels hold
// letters, digits, '-' (not first or last) and '_'; "*" is allowed only as
// the whole first label, and not alone. An IP address is not a pattern
// (the CIDR rules are for those). The error has code V02.
func ValidPattern(p string) error {
	_, err := canonicalPattern(p)
	return err
}

// canonicalPattern returns p in lower case without a trailing dot, or why
// it is not a pattern.
func canonicalPattern(p string) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", invalidArgument("bad domain pattern %q: "+format, append([]any{p}, args...)...)
	}
	name := strings.ToLower(strings.TrimSuffix(p, "."))
	switch {
	case name == "":
		return bad("empty")
	case len(name) > maxNameLen:
		return bad("longer than %d characters", maxNameLen)
	case name == "*":
		return bad(`"*" alone would match every name; list the domains, e.g. "*.example.com"`)
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return bad("an IP address; use a CIDR rule for addresses")
	}
	labels := strings.Split(name, ".")
	for i, l := range labels {
		switch {
		case l == "":
			return bad("empty label (two dots in a row, or a leading dot)")
		case len(l) > maxLabelLen:
			return bad("label %q is longer than %d characters", l, maxLabelLen)
		case l == "*" && i == 0:
			continue
		case strings.Contains(l, "*"):
			return bad(`"*" may only be the whole first label, as in "*.example.com"`)
		case l[0] == '-' || l[len(l)-1] == '-':
			return bad("label %q starts or ends with '-'", l)
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return bad("label %q holds %q; only letters, digits, '-' and '_' are allowed", l, string(rune(c)))
			}
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return bad("its last label %q is a number, which no domain has (an IP address?)", last)
	}
	return name, nil
}

// Decide says what p makes of name, a domain name in text form (case and a
// trailing dot do not matter). Invalid patterns in p match nothing.
func (p Policy) Decide(name string) Decision {
	return compilePolicy(p).decide(name)
}

// compiledPolicy is a Policy as sets, so that a decision costs one lookup
// per label of the name whatever the number of patterns.
type compiledPolicy struct {
	allowExact, allowUnder map[string]bool // "a.b" and "*.a.b" (stored as "a.b")
	denyExact, denyUnder   map[string]bool
}

// compilePolicy keeps p's valid patterns; Validate says whether there were others.
func compilePolicy(p Policy) *compiledPolicy {
	c := &compiledPolicy{
		allowExact: map[string]bool{}, allowUnder: map[string]bool{},
		denyExact: map[string]bool{}, denyUnder: map[string]bool{},
	}
	add := func(patterns []string, exact, under map[string]bool) {
		for _, s := range patterns {
			name, err := canonicalPattern(s)
			if err != nil {
				continue
			}
			if rest, ok := strings.CutPrefix(name, "*."); ok {
				under[rest] = true
			} else {
				exact[name] = true
			}
		}
	}
	add(p.Allow, c.allowExact, c.allowUnder)
	add(p.Deny, c.denyExact, c.denyUnder)
	return c
}

// Validate returns the first invalid pattern's error (code V02), or nil.
func (p Policy) Validate() error {
	for _, list := range [][]string{p.Allow, p.Deny} {
		for _, s := range list {
			if err := ValidPattern(s); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *compiledPolicy) decide(name string) Decision {
	name = lowerASCII(strings.TrimSuffix(name, "."))
	if name == "" {
		return Neutral
	}
	if matches(name, c.allowExact, c.allowUnder) {
		return Allowed
	}
	if matches(name, c.denyExact, c.denyUnder) {
		return Denied
	}
	return Neutral
}

// matches reports whether name is in exact or strictly under a name in under.
func matches(name string, exact, under map[string]bool) bool {
	if exact[name] {
		return true
	}
	for rest := name; ; {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
		if under[rest] {
			return true
		}
	}
}

// lowerASCII lowers A-Z only: DNS compares names case-insensitively in
// ASCII, and a name from the guest may hold any byte.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

func invalidArgument(format string, args ...any) error {
	return errdefs.New(api.CodeInvalidArgument, format, args...)
}
