package dns

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	// MaxInFlight bounds the queries one Resolver works on at once, over
	// UDP and TCP together. A query beyond it is answered SERVFAIL at once
	// (so a guest's resolver moves on instead of waiting for a timeout).
	MaxInFlight = 64
	// maxTCPConns bounds a Resolver's open TCP connections; one beyond it
	// is closed as soon as it is accepted.
	maxTCPConns = 16
	// tcpIdleTimeout is how long a TCP connection may take to send its
	// next query (the whole of it) before it is closed.
	tcpIdleTimeout = 10 * time.Second
	// tcpWriteTimeout is how long a TCP client may take to read an answer.
	tcpWriteTimeout = 5 * time.Second
	// defaultTimeout is Config.Timeout when it is not set.
	defaultTimeout = 5 * time.Second
	// acceptRetry is the pause after a failed Accept or ReadFrom that did
	// not end the server (out of file descriptors, say).
	acceptRetry = 50 * time.Millisecond
)

// Config is what a Resolver needs.
type Config struct {
	// Upstream is the resolver queries are forwarded to, as "IP:PORT".
	Upstream string
	// Policy is the initial domain policy; SetPolicy changes it.
	Policy Policy
	// Resolved, if set, is called for every A and AAAA address of an
	// upstream answer to a question whose name the policy Allows (the
	// records of the name itself or of its CNAME chain's names), with the
	// record's TTL clamped to [MinTTL, MaxTTL], before the answer is sent
	// to the client. It may block briefly (an nftables update): the answer
	// waits for it. It is called from several goroutines at once.
	Resolved func(addr netip.Addr, ttl time.Duration)
	// Timeout bounds the upstream part of one query, the UDP exchange and
	// a TCP retry together: past it the client gets SERVFAIL. Default 5s.
	Timeout time.Duration
	// Logger gets one Debug record per query; default slog.Default().
	Logger *slog.Logger
}

// Resolver is one sandbox's DNS resolver: it answers the guest's queries
// under a Policy, forwarding those it does not deny to the upstream. It is
// safe for concurrent use; ServeUDP and ServeTCP run side by side.
type Resolver struct {
	upstream netip.AddrPort
	timeout  time.Duration
	resolved func(netip.Addr, time.Duration)
	log      *slog.Logger
	policy   atomic.Pointer[compiledPolicy]
	inFlight chan struct{} // a slot per query being worked on
	tcpConns chan struct{} // a slot per open TCP connection
	tcpIdle  time.Duration // tcpIdleTimeout (shorter in tests)
}

// New returns a Resolver for cfg, or an error (code V02) when the upstream
// is not "IP:PORT" or a pattern of the policy is not valid.
func New(cfg Config) (*Resolver, error) {
	up, err := netip.ParseAddrPort(cfg.Upstream)
	if err != nil {
		return nil, invalidArgument("DNS upstream %q is not IP:PORT: %v", cfg.Upstream, err)
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	r := &Resolver{
		upstream: up,
		timeout:  cfg.Timeout,
		resolved: cfg.Resolved,
		log:      cfg.Logger,
		inFlight: make(chan struct{}, MaxInFlight),
		tcpConns: make(chan struct{}, maxTCPConns),
		tcpIdle:  tcpIdleTimeout,
	}
	if r.timeout <= 0 {
		r.timeout = defaultTimeout
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.policy.Store(compilePolicy(cfg.Policy))
	return r, nil
}

// SetPolicy replaces the policy for every query that starts after it
// returns (queries already forwarded finish under the old one). An invalid
// pattern is an error (code V02) and leaves the policy as it was.
func (r *Resolver) SetPolicy(p Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	r.policy.Store(compilePolicy(p))
	return nil
}

// ServeUDP answers the queries that arrive on pc until ctx ends or pc is
// closed, then returns nil once every answer in progress is done. It
// reads datagrams of up to 4096 bytes (a longer one gets FORMERR).
func (r *Resolver) ServeUDP(ctx context.Context, pc net.PacketConn) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { pc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	buf := make([]byte, maxQuery+1) // one more, so that a longer datagram shows
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			r.log.Warn("dns: reading a query", "err", err)
			time.Sleep(acceptRetry)
			continue
		}
		msg := bytes.Clone(buf[:n])
		select {
		case r.inFlight <- struct{}{}:
		default:
			if out := r.busy(msg); out != nil {
				pc.WriteTo(out, addr)
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-r.inFlight }()
			if out := r.handle(ctx, msg, false); out != nil {
				pc.WriteTo(out, addr)
			}
		})
	}
}

// ServeTCP answers DNS over TCP (RFC 7766: each message after a 2-byte
// length, several queries per connection, answered as each is ready) on
// the connections l accepts, until ctx ends or l is closed; it closes l
// and every connection it accepted, and returns nil once they are done.
func (r *Resolver) ServeTCP(ctx context.Context, l net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer l.Close()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			r.log.Warn("dns: accepting a TCP connection", "err", err)
			time.Sleep(acceptRetry)
			continue
		}
		select {
		case r.tcpConns <- struct{}{}:
		default:
			c.Close()
			continue
		}
		wg.Go(func() {
			defer func() { <-r.tcpConns }()
			r.serveConn(ctx, c)
		})
	}
}

// serveConn answers the queries of one TCP connection until it closes,
// goes idle, sends something that is not a query of at most maxQuery
// bytes, or ctx ends.
func (r *Resolver) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	var writeMu sync.Mutex
	write := func(b []byte) {
		writeMu.Lock()
		defer writeMu.Unlock()
		c.SetWriteDeadline(time.Now().Add(tcpWriteTimeout))
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
			c.Close() // a client that does not read its answers is done
		}
	}
	for {
		c.SetReadDeadline(time.Now().Add(r.tcpIdle))
		msg, err := readTCPMessage(c, maxQuery)
		if err != nil {
			return
		}
		select {
		case r.inFlight <- struct{}{}:
		default:
			if out := r.busy(msg); out != nil {
				write(out)
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-r.inFlight }()
			if out := r.handle(ctx, msg, true); out != nil {
				write(out)
			}
		})
	}
}

// busy is the answer to a query that finds every in-flight slot taken.
func (r *Resolver) busy(msg []byte) []byte {
	q, err := parseQuery(msg)
	var ref *refusal
	switch {
	case errors.Is(err, errDrop):
		return nil
	case errors.As(err, &ref):
		return q.reply(ref.rcode, false)
	}
	r.log.Debug("dns: too many queries in flight", "name", printable(q.question.Name.String()))
	return q.reply(dnsmessage.RCodeServerFailure, false)
}

// handle answers one query from a guest; nil means no answer at all.
func (r *Resolver) handle(ctx context.Context, msg []byte, overTCP bool) []byte {
	start := time.Now()
	q, err := parseQuery(msg)
	var ref *refusal
	switch {
	case errors.Is(err, errDrop):
		r.log.Debug("dns: dropped a datagram that is not a query", "bytes", len(msg))
		return nil
	case errors.As(err, &ref):
		r.log.Debug("dns: refused a query", "rcode", ref.rcode, "why", printable(ref.reason))
		return q.reply(ref.rcode, false)
	}
	name := q.question.Name.String()
	decision := r.policy.Load().decide(name)
	logDone := func(rcode dnsmessage.RCode, err error) {
		attrs := []any{"name", printable(name), "type", q.question.Type, "policy", decision,
			"rcode", rcode, "tcp", overTCP, "took", time.Since(start)}
		if err != nil {
			attrs = append(attrs, "err", err)
		}
		r.log.Debug("dns: query", attrs...)
	}
	if decision == Denied {
		logDone(dnsmessage.RCodeNameError, nil)
		return q.reply(dnsmessage.RCodeNameError, false)
	}

	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	size := q.udpSize
	if overTCP {
		size = maxUDPSize
	}
	m, err := r.exchangeUDP(ctx, q, size)
	if err == nil && m.Truncated && overTCP {
		m, err = r.exchangeTCP(ctx, q)
	}
	if err != nil {
		logDone(dnsmessage.RCodeServerFailure, fmt.Errorf("upstream: %w", err))
		return q.reply(dnsmessage.RCodeServerFailure, false)
	}

	if decision == Allowed {
		addrs := chainAddrs(m, q.question.Name) // also caps the chain's TTLs in m
		if r.resolved != nil {
			for _, a := range addrs {
				r.resolved(a.addr, a.ttl)
			}
		}
	}
	m.ID = q.id
	out, err := m.Pack()
	if err != nil {
		logDone(dnsmessage.RCodeServerFailure, fmt.Errorf("repacking the upstream's answer: %w", err))
		return q.reply(dnsmessage.RCodeServerFailure, false)
	}
	if !overTCP && len(out) > q.udpSize {
		// The upstream ignored the size asked for: the client gets TC and
		// asks again over TCP.
		logDone(m.RCode, nil)
		return q.reply(m.RCode, true)
	}
	logDone(m.RCode, nil)
	return out
}

// printable escapes every byte of s that is not printable ASCII, so that
// what a guest put in a name reaches a log as plain text.
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c > ' ' && c < 0x7f && c != '\\' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}
