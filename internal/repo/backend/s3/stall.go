package s3

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
)

// DefaultStallTimeout is Config.StallTimeout's default.
const DefaultStallTimeout = 30 * time.Second

// transport is minio-go's default transport, with connections that fail
// once no byte has moved either way for stall: a server that stops
// answering (a black-holed network, a hung server) fails the call instead
// of holding it, and with it the whole upload, until the kernel gives up
// on the connection (tens of minutes, or never if the server still reads).
// A slow transfer is not a stall: the deadline moves with every byte.
func transport(secure bool, stall time.Duration) (*http.Transport, error) {
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: stall, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newStallConn(c, stall), nil
	}
	// An idle connection is closed before its read deadline could fire
	// under a request that takes it from the pool.
	tr.IdleConnTimeout = min(tr.IdleConnTimeout, stall/2)
	tr.ResponseHeaderTimeout = 0 // the stall timeout covers a server that does not answer
	return tr, nil
}

// stallConn is a connection whose reads and writes fail with a timeout
// once nothing moved either way for stall.
type stallConn struct {
	net.Conn
	stall time.Duration
	last  atomic.Int64 // unix nanoseconds of the last byte moved
}

func newStallConn(c net.Conn, stall time.Duration) *stallConn {
	s := &stallConn{Conn: c, stall: stall}
	s.touch()
	return s
}

func (c *stallConn) touch() { c.last.Store(time.Now().UnixNano()) }

// quiet reports whether nothing moved for stall.
func (c *stallConn) quiet() bool {
	return time.Since(time.Unix(0, c.last.Load())) >= c.stall
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// Read waits for data while bytes move in either direction (a request
// body still going up counts) and fails once nothing did for stall.
func (c *stallConn) Read(p []byte) (int, error) {
	for {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.stall)); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.touch()
		}
		if n == 0 && isTimeout(err) && !c.quiet() {
			continue
		}
		return n, err
	}
}

// Write writes p while the peer takes bytes, and fails once it took none
// for stall.
func (c *stallConn) Write(p []byte) (int, error) {
	total := 0
	for {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
			return total, err
		}
		n, err := c.Conn.Write(p[total:])
		total += n
		if n > 0 {
			c.touch()
		}
		if isTimeout(err) && !c.quiet() {
			continue
		}
		return total, err
	}
}
