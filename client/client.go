// Package client is the Go SDK of cairnd's API. The cairn CLI and the web
// console reach the daemon only through it.
//
//	c := client.New("/run/cairn/cairn.sock")
//	op, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "web"})
//	sb, err := c.WaitSandbox(ctx, op, func(ev api.Event) { fmt.Println(ev.Data) })
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
)

// DefaultSocket is where cairnd listens unless told otherwise.
const DefaultSocket = "/run/cairn/cairn.sock"

// Client talks to one cairnd: over its unix socket (New), or over HTTPS
// with an API token (NewRemote).
type Client struct {
	where string // what to name in "cannot reach" errors: the socket or the URL
	base  string // "http://cairnd" or "https://HOST:PORT"
	token string // sent as a bearer token; "" on the socket
	http  *http.Client
	// dial opens a connection to cairnd for a request written by hand
	// (ConnectPort's upgrade).
	dial func(ctx context.Context) (net.Conn, error)
}

// New returns a client for the cairnd listening on socket.
func New(socket string) *Client {
	if socket == "" {
		socket = DefaultSocket
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}
	return &Client{where: socket, base: "http://cairnd", http: &http.Client{Transport: tr}, dial: dial}
}

// Error is an error answered by cairnd, with its stable code.
type Error struct {
	Status  int    // HTTP status
	Code    string // e.g. "S01"; see docs/errors.md
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("error %s: %s", e.Code, e.Message) }

// CodeOf returns the API code of err, or "" if cairnd did not answer it.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// do sends a request with an optional JSON body and decodes a JSON answer
// into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns the response if its status is below 400;
// otherwise it returns the API error. body is sent as JSON, or as it is if
// it is an io.Reader.
func (c *Client) send(ctx context.Context, method, path string, body any, header http.Header) (*http.Response, error) {
	var rd io.Reader
	isJSON := false
	switch b := body.(type) {
	case nil:
	case io.Reader: // raw, its Content-Type in header
		rd = b
	default:
		j, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd, isJSON = bytes.NewReader(j), true
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	for k, v := range header {
		req.Header[k] = v
	}
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" || errors.Is(err, ErrFingerprint) {
			return nil, c.unreachable(err)
		}
		return nil, err
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb api.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code == "" {
		return &Error{Status: resp.StatusCode, Code: api.CodeInternal, Message: strings.TrimSpace(string(b))}
	}
	return &Error{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
}

// ServerInfo returns what cairnd says about itself.
func (c *Client) ServerInfo(ctx context.Context) (api.ServerInfo, error) {
	var out api.ServerInfo
	return out, c.do(ctx, "GET", "/v1", nil, &out)
}

// Images lists the images, built or not.
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	var out []api.Image
	return out, c.do(ctx, "GET", "/v1/images", nil, &out)
}

// Sandboxes lists the account's sandboxes; parent keeps only forks of it.
func (c *Client) Sandboxes(ctx context.Context, parent string) ([]api.Sandbox, error) {
	path := "/v1/sandboxes"
	if parent != "" {
		path += "?parent=" + url.QueryEscape(parent)
	}
	var out []api.Sandbox
	return out, c.do(ctx, "GET", path, nil, &out)
}

// SandboxesLabelled lists the sandboxes (forks of parent only, unless
// "") that have every label of labels ("key=value", or "key" for any
// value).
func (c *Client) SandboxesLabelled(ctx context.Context, parent string, labels []string) ([]api.Sandbox, error) {
	q := url.Values{}
	if parent != "" {
		q.Set("parent", parent)
	}
	for _, l := range labels {
		q.Add("label", l)
	}
	path := "/v1/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []api.Sandbox
	return out, c.do(ctx, "GET", path, nil, &out)
}

// Sandbox returns one sandbox.
func (c *Client) Sandbox(ctx context.Context, name string) (api.Sandbox, error) {
	var out api.Sandbox
	return out, c.do(ctx, "GET", "/v1/sandboxes/"+url.PathEscape(name), nil, &out)
}

// CreateSandbox starts creating a sandbox; follow the operation to wait.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", "/v1/sandboxes", req, &op)
}

// StartSandbox starts a stopped sandbox.
func (c *Client) StartSandbox(ctx context.Context, name string) (api.Operation, error) {
	return c.lifecycle(ctx, "POST", name, "/start")
}

// StopSandbox stops a running sandbox; req.Snapshot saves its session so
// the next start resumes its processes.
func (c *Client) StopSandbox(ctx context.Context, name string, req api.StopRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(name)+"/stop", req, &op)
}

// RestartSandbox stops (if running) and starts a sandbox.
func (c *Client) RestartSandbox(ctx context.Context, name string) (api.Operation, error) {
	return c.lifecycle(ctx, "POST", name, "/restart")
}

// DeleteSandbox stops and removes a sandbox.
func (c *Client) DeleteSandbox(ctx context.Context, name string) (api.Operation, error) {
	return c.lifecycle(ctx, "DELETE", name, "")
}

func (c *Client) lifecycle(ctx context.Context, method, name, suffix string) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, method, "/v1/sandboxes/"+url.PathEscape(name)+suffix, nil, &op)
}

// Operation returns an operation's current state.
func (c *Client) Operation(ctx context.Context, id string) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "GET", "/v1/operations/"+url.PathEscape(id), nil, &op)
}

// Follow streams an operation's events to fn (nil: ignore them) until it
// ends: their text in Data and, when they have one, their phase and counts
// in Progress (see docs/api.md). It returns the data of the complete event,
// raw, or the operation's error as an *Error.
func (c *Client) Follow(ctx context.Context, op api.Operation, fn func(api.Event)) (json.RawMessage, error) {
	resp, err := c.send(ctx, "GET", "/v1/operations/"+url.PathEscape(op.ID)+"/events", nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev struct {
			api.Event
			Data  json.RawMessage `json:"data"`
			Error *api.ErrorInfo  `json:"error"` // cairnd ended the stream (not the operation): its last line
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("operation %s: bad event: %w", op.ID, err)
		}
		if ev.Error != nil {
			return nil, &Error{Code: ev.Error.Code, Message: ev.Error.Message}
		}
		switch ev.Type {
		case api.EventComplete:
			return ev.Data, nil
		case api.EventError:
			var info api.ErrorInfo
			json.Unmarshal(ev.Data, &info)
			return nil, &Error{Code: info.Code, Message: info.Message}
		}
		if fn != nil {
			var data any
			json.Unmarshal(ev.Data, &data)
			fn(api.Event{Type: ev.Type, Data: data, Time: ev.Time, Progress: ev.Progress})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("operation %s: %w", op.ID, err)
	}
	return nil, fmt.Errorf("operation %s: event stream ended before the operation did", op.ID)
}

// WaitSandbox follows an operation whose result is a sandbox.
func (c *Client) WaitSandbox(ctx context.Context, op api.Operation, fn func(api.Event)) (api.Sandbox, error) {
	var sb api.Sandbox
	raw, err := c.Follow(ctx, op, fn)
	if err != nil {
		return sb, err
	}
	return sb, json.Unmarshal(raw, &sb)
}

// Services lists the services of a running sandbox.
func (c *Client) Services(ctx context.Context, name string) ([]api.ServiceStatus, error) {
	var out []api.ServiceStatus
	return out, c.do(ctx, "GET", "/v1/sandboxes/"+url.PathEscape(name)+"/services", nil, &out)
}

// ServiceLogs returns the last tail bytes (0: 64 KiB) of a service's log.
func (c *Client) ServiceLogs(ctx context.Context, name, service string, tail int) ([]byte, error) {
	path := fmt.Sprintf("/v1/sandboxes/%s/services/%s/logs?tail_bytes=%d", url.PathEscape(name), url.PathEscape(service), tail)
	resp, err := c.send(ctx, "GET", path, nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// Operations lists the operations cairnd knows: running and recently
// finished ones (the account's own, through a token).
func (c *Client) Operations(ctx context.Context) ([]api.Operation, error) {
	var out []api.Operation
	return out, c.do(ctx, "GET", "/v1/operations", nil, &out)
}
