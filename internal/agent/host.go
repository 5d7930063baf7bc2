package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// ErrClosed is returned by the ops of a Host after Close.
var ErrClosed = errors.New("agent host closed")

// Host listens on one sandbox's agent socket and holds the current
// connection from its cairn-init. Its methods are safe for concurrent use.
// An op made while no connection is up waits for one until its ctx ends,
// then fails with an error of code api.CodeAgentUnreachable that wraps
// ctx.Err(); so do ops whose connection fails.
type Host struct {
	ln           net.Listener
	done         chan struct{} // closed when the accept loop ends
	reattachWait time.Duration
	pingTimeout  time.Duration
	log          *slog.Logger

	mu      sync.Mutex
	sess    *yamux.Session // the authenticated connection; nil before the first
	changed chan struct{}  // closed (and replaced) when sess changes or the Host closes
	closed  bool
	pending map[net.Conn]struct{} // connections in their handshake, closed by Close

	handshakes sync.WaitGroup // admit goroutines
	slots      chan struct{}  // one per connection in its handshake
	admitMu    sync.Mutex     // one proven connection decided at a time
	keyFile    string
	keysMu     sync.Mutex
	ring       keyring // what keyFile holds; no Key: every connection is refused
	refusals   refusalLog
}

// DefaultReattachWait is how long an attached exec whose connection to
// cairn-init broke waits for cairn-init to connect again and re-attach it.
// It matches the grace cairn-init gives such a session
// (initd.DefaultExecGrace).
const DefaultReattachWait = 60 * time.Second

// ListenConfig holds the options of a Host.
type ListenConfig struct {
	// KeyFile records the key the sandbox's cairn-init proves itself
	// with (NewKeyFile, InheritKeyFile); the Host re-keys cairn-init
	// through it. Without one, or if it cannot be read, every
	// connection is refused.
	KeyFile string
	// ReattachWait bounds how long an exec stream whose connection broke
	// waits to re-attach its session; default DefaultReattachWait.
	ReattachWait time.Duration
	// PingTimeout bounds the ping that decides whether the current
	// connection still answers when another one proves itself; default
	// DefaultPingTimeout.
	PingTimeout time.Duration
	Log         *slog.Logger // default slog.Default()
}

// DefaultPingTimeout is ListenConfig.PingTimeout's default. A memory
// checkpoint breaks a connection without either side noticing; the ping
// of a broken one fails at once or times out.
const DefaultPingTimeout = time.Second

// Listen is ListenConfig{KeyFile: keyFile}.Listen(path).
func Listen(path, keyFile string) (*Host, error) {
	return ListenConfig{KeyFile: keyFile}.Listen(path)
}

// Listen removes a stale socket file at path, listens on it and accepts
// cairn-init's connections in the background: only one that proves it
// holds the key of lc.KeyFile becomes the Host's connection (see
// admit).
func (lc ListenConfig) Listen(path string) (*Host, error) {
	log := cmp.Or(lc.Log, slog.Default())
	ring, err := readKeyring(lc.KeyFile)
	if err != nil {
		// A sandbox from before agents proved themselves, or a lost
		// file: no agent can connect, and whoever waits for one decides.
		log.Warn("agent: no key for this sandbox; every connection will be refused", "socket", path, "err", err)
		ring = keyring{}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale agent socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on agent socket: %w", err)
	}
	// cairn-init runs as root; no other user inside may even dial it
	// (gVisor checks a host socket's mode on connect).
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod agent socket: %w", err)
	}
	h := &Host{
		ln:           ln,
		done:         make(chan struct{}),
		reattachWait: cmp.Or(lc.ReattachWait, DefaultReattachWait),
		pingTimeout:  cmp.Or(lc.PingTimeout, DefaultPingTimeout),
		log:          log,
		changed:      make(chan struct{}),
		pending:      map[net.Conn]struct{}{},
		slots:        make(chan struct{}, maxHandshakes),
		keyFile:      lc.KeyFile,
		ring:         ring,
	}
	h.refusals.log = log
	go h.accept()
	return h, nil
}

// accept hands each new connection to admit, at most maxHandshakes at
// once: past that a connection is closed at once.
func (h *Host) accept() {
	defer close(h.done)
	for {
		conn, err := h.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // a failed accept (EMFILE, …) does not end the listener
		}
		select {
		case h.slots <- struct{}{}:
		default:
			conn.Close()
			h.refusals.note("too many connections in their handshake")
			continue
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			conn.Close()
			<-h.slots
			return
		}
		h.pending[conn] = struct{}{}
		h.mu.Unlock()
		h.handshakes.Go(func() {
			defer func() { <-h.slots }()
			h.admit(conn)
		})
	}
}

// install makes sess the Host's connection, closing the previous one. It
// returns false (and closes sess) if the Host is closed.
func (h *Host) install(sess *yamux.Session) bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		sess.Close()
		return false
	}
	old := h.sess
	h.sess = sess
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return true
}

// yamuxConfig is cairnd's side of the multiplexed connection, with
// keepalives so that a dead cairn-init is noticed. A stream may hold up to
// streamWindow bytes cairnd has not read yet.
func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.MaxStreamWindowSize = streamWindow
	return cfg
}

// streamWindow is the most a yamux stream buffers on its receiving side:
// yamux's default of 256 KiB holds a file read from a sandbox to a quarter
// of what the host's unix socket carries (bench files), as each window
// waits a round trip through gVisor for its update.
const streamWindow = 4 << 20

// Close stops listening, which removes the socket file, and closes the
// current connection. Ops waiting for a connection return ErrClosed.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	sess := h.sess
	close(h.changed)
	for conn := range h.pending {
		conn.Close()
	}
	h.mu.Unlock()
	err := h.ln.Close()
	<-h.done
	h.handshakes.Wait()
	if sess != nil {
		sess.Close()
	}
	return err
}

// Connected reports whether a connection from cairn-init is up: one that
// proved it holds the sandbox's key.
func (h *Host) Connected() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.closed && h.sess != nil && !h.sess.IsClosed()
}

// WaitConnected blocks until cairn-init is connected and has answered a
// ping, or ctx ends.
func (h *Host) WaitConnected(ctx context.Context) error {
	for {
		sess, changed, err := h.session(ctx)
		if err != nil {
			return err
		}
		if _, err := h.ping(ctx, sess); err == nil {
			return nil
		}
		select { // that connection is no good: wait for the next
		case <-sess.CloseChan():
		case <-changed:
		case <-ctx.Done():
			return notConnected(ctx)
		}
	}
}

// session returns the current connection, waiting for one until ctx ends,
// and a channel closed when it is replaced.
func (h *Host) session(ctx context.Context) (*yamux.Session, <-chan struct{}, error) {
	for {
		h.mu.Lock()
		sess, changed, closed := h.sess, h.changed, h.closed
		h.mu.Unlock()
		switch {
		case closed:
			return nil, nil, ErrClosed
		case sess != nil && !sess.IsClosed():
			return sess, changed, nil
		}
		select { // a dead connection stays current until the next one comes
		case <-changed:
		case <-ctx.Done():
			return nil, nil, notConnected(ctx)
		}
	}
}

func notConnected(ctx context.Context) error {
	return errdefs.Wrap(api.CodeAgentUnreachable, ctx.Err(), "agent not connected")
}
