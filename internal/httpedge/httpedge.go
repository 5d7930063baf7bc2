// Package httpedge bounds what the clients of one HTTP listener of cairnd
// may hold: a cap on the connections open at once (excess ones are
// accepted and closed at once, so they cost no descriptor for long),
// deadlines to read a request's headers and its whole body, and an idle
// timeout between requests. It also serves a client that half-closes its
// side of the connection once it has sent a complete request (see conn).
//
// cairnd serves its own API socket and each sandbox's /.cairn/api.sock
// through it, each with its Limits.
package httpedge

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits are the bounds of one listener.
type Limits struct {
	// Name says whose listener it is, in log lines.
	Name string
	// MaxConns caps the connections open at once; 0: no cap.
	MaxConns int
	// HeaderTimeout is how long a client has to send a request's headers.
	HeaderTimeout time.Duration
	// RequestTimeout is how long a client has to send a whole request,
	// body included, counted from its first byte; a body not received by
	// then fails to read (with an error that is a net.Error whose
	// Timeout() is true).
	RequestTimeout time.Duration
	// IdleTimeout is how long a connection may wait for its next request.
	IdleTimeout time.Duration
}

// Host are the limits of cairnd's own API socket: no cap on connections
// (the socket is the root administrator's alone), 10 s for headers, 30 s
// for a request (bodies are at most 1 MiB, sent over a local socket), two
// minutes idle.
func Host(name string) Limits {
	return Limits{Name: name, HeaderTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
}

// Sandbox are the limits of a sandbox's management socket, whose clients
// are untrusted: at most 16 connections at once (cairn-env uses one per
// command), 5 s for headers, 10 s for a request (bodies are at most a few
// KiB), 30 s idle.
func Sandbox(name string) Limits {
	return Limits{Name: name, MaxConns: SandboxMaxConns, HeaderTimeout: 5 * time.Second, RequestTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
}

// SandboxMaxConns is the cap on the connections one sandbox may hold open
// to its management socket.
const SandboxMaxConns = 16

// NewServer returns an http.Server for h under lim. Serve it a listener
// from Listen with the same limits (without it, half-closing clients are
// cancelled as net/http does, and connections are not capped).
func NewServer(h http.Handler, lim Limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.HeaderTimeout,
		ReadTimeout:       lim.RequestTimeout,
		IdleTimeout:       lim.IdleTimeout,
		ConnState:         trackState,
	}
}

// Listen wraps ln: its connections are capped at lim.MaxConns and are
// conns (see conn).
func Listen(ln net.Listener, lim Limits) net.Listener {
	return &listener{Listener: ln, lim: lim}
}

// refusalLogEvery is how often a listener at its cap logs the
// connections it refused.
const refusalLogEvery = 10 * time.Second

type listener struct {
	net.Listener
	lim Limits

	mu       sync.Mutex
	open     int       // connections accepted and not yet closed
	refused  int       // since the last log line
	lastLog  time.Time // of the last refusal logged
	capWarns int       // log lines written about refusals (for tests)
}

// Accept returns the next connection under the cap. One beyond it is
// closed as soon as it is accepted, and Accept waits for the next.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.take() {
			return newConn(c, l.put), nil
		}
		c.Close()
	}
}

// take counts one more open connection, unless the cap is reached (then
// it counts a refusal and logs, at most every refusalLogEvery).
func (l *listener) take() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lim.MaxConns <= 0 || l.open < l.lim.MaxConns {
		l.open++
		return true
	}
	l.refused++
	if now := time.Now(); now.Sub(l.lastLog) >= refusalLogEvery {
		slog.Warn("connections refused: too many open", "listener", l.lim.Name, "refused", l.refused, "cap", l.lim.MaxConns)
		l.lastLog, l.refused = now, 0
		l.capWarns++
	}
	return false
}

func (l *listener) put() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
}

// trackState tells a conn whether a request is in progress on it, from
// the http.Server's ConnState hook.
func trackState(nc net.Conn, st http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn() // a TLS listener over Listen's
	}
	if c, ok := nc.(*conn); ok {
		c.setActive(st == http.StateActive)
	}
}
