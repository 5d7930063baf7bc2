package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cairn-sandbox/cairn/api"
)

func portsPath(name string) string { return "/v1/sandboxes/" + url.PathEscape(name) + "/ports" }

// Ports lists the sandbox's published ports, by number.
func (c *Client) Ports(ctx context.Context, name string) ([]api.Port, error) {
	var out []api.Port
	err := c.do(ctx, "GET", portsPath(name), nil, &out)
	return out, err
}

// PublishPort publishes a port of the sandbox through cairnd's port proxy,
// or sets whether it is public if it is published already.
func (c *Client) PublishPort(ctx context.Context, name string, req api.PublishPortRequest) (api.Port, error) {
	var out api.Port
	err := c.do(ctx, "POST", portsPath(name), req, &out)
	return out, err
}

// UnpublishPort unpublishes a port of the sandbox.
func (c *Client) UnpublishPort(ctx context.Context, name string, port int) error {
	return c.do(ctx, "DELETE", portsPath(name)+"/"+strconv.Itoa(port), nil, nil)
}

// PortToken returns the account's port token, which opens its private
// ports; with rotate, a new one replaces it at once.
func (c *Client) PortToken(ctx context.Context, rotate bool) (api.PortToken, error) {
	var out api.PortToken
	var err error
	if rotate {
		err = c.do(ctx, "POST", "/v1/account/port-token/rotate", nil, &out)
	} else {
		err = c.do(ctx, "GET", "/v1/account/port-token", nil, &out)
	}
	return out, err
}

// ConnectPort opens a TCP connection to a port inside the running sandbox,
// through cairnd (the port need not be published). The connection's
// CloseWrite half-closes it toward the port; the caller closes it.
func (c *Client) ConnectPort(ctx context.Context, name string, port int) (*PortConn, error) {
	nc, err := c.dial(ctx)
	if err != nil {
		return nil, c.unreachable(err)
	}
	conn, ok := nc.(halfCloser)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("connect: the connection to cairnd cannot half-close")
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+portsPath(name)+"/"+strconv.Itoa(port)+"/connect", nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.authorize(req)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", api.ConnectUpgrade)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	if resp.StatusCode >= 400 {
		defer conn.Close()
		return nil, decodeError(resp)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, fmt.Errorf("connect: cairnd answered %s instead of switching protocols", resp.Status)
	}
	if !stop() {
		conn.Close()
		return nil, ctx.Err()
	}
	return &PortConn{halfCloser: conn, r: br}, nil
}

// PortConn is a TCP connection to a port inside a sandbox, carried by
// cairnd's socket.
type PortConn struct {
	halfCloser
	r *bufio.Reader // holds what came after cairnd's answer
}

// halfCloser is a connection to cairnd that can close its writing half:
// a unix socket's, or TLS's over TCP.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// Read implements net.Conn.
func (c *PortConn) Read(p []byte) (int, error) { return c.r.Read(p) }
