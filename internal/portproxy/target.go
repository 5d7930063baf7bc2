package portproxy

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// target is the sandbox port a proxy request names.
type target struct {
	name string // the sandbox's name
	port int
	// prefix is the path form's prefix ("/sandboxes/NAME/ports/PORT"),
	// cut before forwarding; "" for the host form.
	prefix string
	// bare: a path form URL without the slash after the port, which the
	// proxy redirects to the URL with it (so that relative links work).
	bare bool
}

var (
	errBadHost = errors.New("malformed Host header")
	errNoRoute = errors.New("not a port URL")
)

// parseTarget finds the target of a request to the proxy of domain (in
// lower case, without a trailing dot) from its Host header and its path
// as sent (escaped): the host form PORT-NAME.DOMAIN, else the path form
// /sandboxes/NAME/ports/PORT/…. A Host that is not a well-formed host
// name or IP address with an optional port, or that is a subdomain of
// domain without the host form, is errBadHost; a path that is not of the
// path form on any other host is errNoRoute.
func parseTarget(host, escapedPath, domain string) (target, error) {
	hostname, err := parseHost(host)
	if err != nil {
		return target{}, err
	}
	if label, ok := strings.CutSuffix(hostname, "."+domain); ok {
		return parseLabel(label)
	}
	return parsePath(escapedPath)
}

// parseHost checks a Host header, HOSTNAME[:PORT] or [IPv6][:PORT], and
// returns the host name in lower case without a trailing dot ("" for an
// IP literal in brackets).
func parseHost(h string) (string, error) {
	if h == "" || len(h) > 261 {
		return "", errBadHost
	}
	if rest, ok := strings.CutPrefix(h, "["); ok {
		ip, port, ok := strings.Cut(rest, "]")
		if a, err := netip.ParseAddr(ip); !ok || err != nil || !a.Is6() || a.Zone() != "" {
			return "", errBadHost
		}
		if port != "" && !validHostPort(strings.TrimPrefix(port, ":"), strings.HasPrefix(port, ":")) {
			return "", errBadHost
		}
		return "", nil
	}
	name, port, hasPort := strings.Cut(h, ":")
	if hasPort && !validHostPort(port, true) {
		return "", errBadHost
	}
	return parseHostname(strings.ToLower(name))
}

// validHostPort reports whether p, the port of a Host header after its
// colon, is a decimal number from 1 to 65535.
func validHostPort(p string, colon bool) bool {
	if !colon || p == "" || len(p) > 5 {
		return false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, _ := strconv.Atoi(p)
	return n >= 1 && n <= 65535
}

// parseHostname checks a host name: dot-separated labels, none empty, of
// lower-case letters, digits and dashes, 253 characters at most (a single
// trailing dot is dropped).
func parseHostname(name string) (string, error) {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return "", errBadHost
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return "", errBadHost
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", errBadHost
			}
		}
	}
	return name, nil
}

// parseLabel reads the host form's first label, PORT-NAME.
func parseLabel(label string) (target, error) {
	portText, name, ok := strings.Cut(label, "-")
	port, okPort := parsePort(portText)
	if !ok || !okPort || !nameRE.MatchString(name) {
		return target{}, errBadHost
	}
	return target{name: name, port: port}, nil
}

// parsePort reads a port number: decimal, no leading zero, 1 to 65535.
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(s)
	return n, n <= 65535
}

// parsePath reads the path form, /sandboxes/NAME/ports/PORT[/…].
func parsePath(p string) (target, error) {
	rest, ok := strings.CutPrefix(p, "/sandboxes/")
	if !ok {
		return target{}, errNoRoute
	}
	name, rest, ok := strings.Cut(rest, "/")
	if !ok || !nameRE.MatchString(name) {
		return target{}, errNoRoute
	}
	rest, ok = strings.CutPrefix(rest, "ports/")
	if !ok {
		return target{}, errNoRoute
	}
	portText, _, slash := strings.Cut(rest, "/")
	port, ok := parsePort(portText)
	if !ok {
		return target{}, errNoRoute
	}
	return target{name: name, port: port, prefix: pathPrefix(name, port), bare: !slash}, nil
}
