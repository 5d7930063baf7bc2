package httpedge

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// conn is a connection that serves clients that half-close.
//
// While a handler runs, net/http reads the connection in the background
// to notice a client that went away, and cancels the request's context
// when that read ends, EOF included. But EOF only says that the client
// will send nothing more: a client that shuts down its write side once
// its request is sent (shutdown(SHUT_WR), Go's CloseWrite, `curl
// --no-buffer` through some proxies, `nc -N`) still waits for the answer,
// and its request would fail with "context canceled".
//
// So while a request is in progress (net/http's StateActive, from when
// its headers are read until its response is done), conn holds an EOF
// back: the read that met it waits until net/http ends it (the deadline
// net/http sets to abort its background read once the response is done,
// or the request's read deadline), the connection is closed, or a write
// fails; only then does it return, and every later read returns EOF at
// once, so the connection closes after the response. Between requests an
// EOF is returned at once.
//
// The trade-off: a client that closes its connection entirely looks the
// same as one that half-closes, until cairnd writes to it. A streaming
// response (NDJSON progress) notices at its next write, which fails (and
// then net/http cancels the context as before); a handler that writes
// nothing for a long time goes on until it does, and its work is not
// cancelled early. cairnd's long requests either stream progress or start
// an operation that runs on regardless, so nothing is held for long by a
// client that is gone. A client that half-closes in the middle of a body
// gets its request failed at the request's read deadline instead of at
// once.
type conn struct {
	net.Conn
	release func() // once, at Close

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when a field below changes
	active   bool          // a request is in progress
	eof      bool          // the client's side has ended
	deadline time.Time     // the read deadline last set
	closed   bool
	writeErr error // the first failed write
	once     sync.Once
}

func newConn(c net.Conn, release func()) *conn {
	return &conn{Conn: c, release: release, changed: make(chan struct{})}
}

// changedLocked wakes a read waiting after EOF. c.mu is held.
func (c *conn) changedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *conn) setActive(active bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = active
	c.changedLocked()
}

func (c *conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	eof := c.eof
	c.mu.Unlock()
	if !eof {
		n, err := c.Conn.Read(p)
		if n > 0 || !errors.Is(err, io.EOF) {
			return n, err
		}
		c.mu.Lock()
		c.eof = true
		c.mu.Unlock()
	}
	return 0, c.afterEOF()
}

// afterEOF waits while a request is in progress and returns what ends the
// wait: EOF once no request is, a deadline error, the write error, or
// net.ErrClosed.
func (c *conn) afterEOF() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.closed:
			return net.ErrClosed
		case c.writeErr != nil:
			return c.writeErr
		case !c.active:
			return io.EOF
		case !c.deadline.IsZero() && !time.Now().Before(c.deadline):
			return os.ErrDeadlineExceeded
		}
		changed, deadline := c.changed, c.deadline
		c.mu.Unlock()
		var expired <-chan time.Time
		var timer *time.Timer
		if !deadline.IsZero() {
			timer = time.NewTimer(time.Until(deadline))
			expired = timer.C
		}
		select {
		case <-changed:
		case <-expired:
		}
		if timer != nil {
			timer.Stop()
		}
		c.mu.Lock()
	}
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.mu.Lock()
		if c.writeErr == nil {
			c.writeErr = err
			c.changedLocked()
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *conn) SetDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) noteDeadline(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	c.changedLocked()
}

func (c *conn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.changedLocked()
	}
	c.mu.Unlock()
	c.once.Do(c.release)
	return c.Conn.Close()
}
