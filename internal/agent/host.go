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
	log          *slog.Logger

	mu      sync.Mutex
	sess    *yamux.Session // the newest connection; nil before the first
	changed chan struct{}  // closed (and replaced) when sess changes or the Host closes
	closed  bool
}

// DefaultReattachWait is how long an attached exec whose connection to
// cairn-init broke waits for cairn-init to connect again and re-attach it.
// It matches the grace cairn-init gives such a session
// (initd.DefaultExecGrace).
const DefaultReattachWait = 60 * time.Second

// ListenConfig holds the options of a Host.
type ListenConfig struct {
	// ReattachWait bounds how long an exec stream whose connection broke
	// waits to re-attach its session; default DefaultReattachWait.
	ReattachWait time.Duration
	Log          *slog.Logger // default slog.Default()
}

// Listen removes a stale socket file at path, listens on it and accepts
// cairn-init's connections in the background.
func Listen(path string) (*Host, error) {
	return ListenConfig{}.Listen(path)
}

// Listen is the package's Listen with the options of lc.
func (lc ListenConfig) Listen(path string) (*Host, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale agent socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on agent socket: %w", err)
	}
	// The sandbox's processes run as any user; the directory is private.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod agent socket: %w", err)
	}
	h := &Host{
		ln:           ln,
		done:         make(chan struct{}),
		reattachWait: cmp.Or(lc.ReattachWait, DefaultReattachWait),
		log:          cmp.Or(lc.Log, slog.Default()),
		changed:      make(chan struct{}),
	}
	go h.accept()
	return h, nil
}

// accept makes each new connection the current one, closing the previous.
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
		sess, err := yamux.Client(conn, yamuxConfig())
		if err != nil { // only for an invalid config
			conn.Close()
			continue
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			sess.Close()
			return
		}
		old := h.sess
		h.sess = sess
		close(h.changed)
		h.changed = make(chan struct{})
		h.mu.Unlock()
		if old != nil {
			old.Close()
		}
	}
}

// yamuxConfig is cairnd's side of the multiplexed connection, with
// keepalives so that a dead cairn-init is noticed.
func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	return cfg
}

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
	h.mu.Unlock()
	err := h.ln.Close()
	<-h.done
	if sess != nil {
		sess.Close()
	}
	return err
}

// Connected reports whether a connection from cairn-init is up.
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
