package initd

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/cairn-sandbox/cairn/internal/agentauth"
)

// Reconnect backoff: a connection that breaks after lasting stableAfter is
// dialled again at once (a memory checkpoint or a restore broke it, and
// cairnd waits for this dial); otherwise the first redial comes minBackoff
// after a failure or a short-lived connection, each further one twice as
// late, at most maxBackoff.
const (
	minBackoff  = 20 * time.Millisecond
	maxBackoff  = 500 * time.Millisecond
	stableAfter = time.Second
)

// dialLoop keeps one connection to cairnd until ctx ends, dialing again
// whenever the connection fails or breaks.
func (s *server) dialLoop(ctx context.Context) {
	delay := minBackoff
	failing := false // log the first failure of a series only
	for {
		start := time.Now()
		err := s.connectAndServe(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil { // was connected: start over
			failing = false
			if time.Since(start) >= stableAfter {
				delay = minBackoff
				continue
			}
		} else if !failing {
			s.log.Warn("cannot reach cairnd; retrying", "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxBackoff)
	}
}

// handshakeTimeout bounds cairn-init's side of the handshake: cairnd may
// first ping the connection it has (1 s at most) before it answers.
const handshakeTimeout = 5 * time.Second

// connectAndServe dials cairnd, proves it is the sandbox's agent and serves
// streams until the connection breaks or ctx ends. It returns an error only
// if it could not connect or cairnd refused it.
func (s *server) connectAndServe(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", s.cfg.SocketPath)
	if err != nil {
		return err
	}
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	s.keyMu.Lock()
	key := s.key
	s.keyMu.Unlock()
	if err := agentauth.Answer(conn, key); err != nil {
		conn.Close()
		return err
	}
	_ = conn.SetDeadline(time.Time{})
	sess, err := yamux.Server(conn, yamuxConfig())
	if err != nil {
		conn.Close()
		return err
	}
	s.log.Info("connected to cairnd")
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			sess.Close()
			if ctx.Err() == nil {
				s.log.Info("connection to cairnd lost", "err", err)
			}
			return nil
		}
		s.wg.Go(func() { s.handle(st) })
	}
}

// yamuxConfig is cairn-init's side of the multiplexed connection.
// Keepalives every half second notice quickly a connection that a memory
// checkpoint broke without either side closing it.
func yamuxConfig() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.KeepAliveInterval = 500 * time.Millisecond
	cfg.LogOutput = io.Discard
	// As cairnd's side: a file written into the sandbox is not held to
	// yamux's default window of 256 KiB a round trip.
	cfg.MaxStreamWindowSize = 4 << 20
	return cfg
}
