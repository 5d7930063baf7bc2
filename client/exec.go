package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/cairn-sandbox/cairn/api"
)

// ExecIO connects an attached command to the caller.
type ExecIO struct {
	Stdin  io.Reader // read only if the request has Stdin; EOF closes the process's stdin
	Stdout io.Writer // the process's stdout (and stderr, with a TTY)
	Stderr io.Writer
	Resize <-chan api.Resize // terminal size changes, for TTY sessions; may be nil
	// Dropped, if set, is told of output that was dropped before it could
	// be read (an attach to a background process): the bytes from, to.
	Dropped func(from, to int64)
}

// ExecDetached starts a command that keeps running in the background and
// returns its pid inside the sandbox.
func (c *Client) ExecDetached(ctx context.Context, name string, req api.ExecRequest) (int, error) {
	req.Detach = true
	var out api.ExecStarted
	err := c.do(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(name)+"/exec", req, &out)
	return out.PID, err
}

// Exec runs a command attached to io until it exits and returns its exit
// status. If the sandbox is starting or restoring, cairnd holds the request
// until it is ready.
func (c *Client) Exec(ctx context.Context, name string, req api.ExecRequest, eio ExecIO) (api.ExitStatus, error) {
	req.Detach, req.Background = false, false
	_, conn, err := c.upgrade(ctx, "/v1/sandboxes/"+url.PathEscape(name)+"/exec", req)
	if err != nil {
		return api.ExitStatus{}, err
	}
	defer conn.Close()
	st, _, err := runFrames(ctx, conn, req.Stdin, eio, 0)
	return st, err
}

// upgrade sends a request that asks to switch to cairn-exec and returns
// the connection once cairnd did.
func (c *Client) upgrade(ctx context.Context, path string, body any) (*http.Response, io.ReadWriteCloser, error) {
	h := http.Header{}
	h.Set("Connection", "Upgrade")
	h.Set("Upgrade", "cairn-exec")
	resp, err := c.send(ctx, "POST", path, body, h)
	if err != nil {
		return nil, nil, err
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("%s: cairnd answered %s instead of switching protocols", path, resp.Status)
	}
	return resp, conn, nil
}

// runFrames connects eio to the exec frames of conn until the Exit frame,
// and returns the exit status and the output offset reached (from off
// on: payload bytes of Stdout and Stderr frames, and Dropped frames).
func runFrames(ctx context.Context, conn io.ReadWriteCloser, withStdin bool, eio ExecIO, off int64) (api.ExitStatus, int64, error) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	var wmu sync.Mutex
	write := func(t api.FrameType, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return api.WriteFrame(conn, t, p)
	}
	done := make(chan struct{})
	defer close(done)
	if withStdin && eio.Stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := eio.Stdin.Read(buf)
				if n > 0 && write(api.FrameStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					write(api.FrameStdinClose, nil)
					return
				}
			}
		}()
	}
	if eio.Resize != nil {
		go func() {
			for {
				select {
				case sz := <-eio.Resize:
					b, _ := json.Marshal(sz)
					if write(api.FrameResize, b) != nil {
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	stdout, stderr := orDiscard(eio.Stdout), orDiscard(eio.Stderr)
	for {
		t, p, err := api.ReadFrame(conn)
		if err != nil {
			if ctx.Err() != nil {
				return api.ExitStatus{}, off, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return api.ExitStatus{}, off, fmt.Errorf("exec session ended without an exit status: %w", err)
		}
		switch t {
		case api.FrameStdout:
			stdout.Write(p)
			off += int64(len(p))
		case api.FrameStderr:
			stderr.Write(p)
			off += int64(len(p))
		case api.FrameDropped:
			var d api.Dropped
			if json.Unmarshal(p, &d) == nil && d.Offset > off {
				if eio.Dropped != nil {
					eio.Dropped(off, d.Offset)
				}
				off = d.Offset
			}
		case api.FrameExit:
			var st api.ExitStatus
			if err := json.Unmarshal(p, &st); err != nil {
				return st, off, fmt.Errorf("exec: bad exit status: %w", err)
			}
			return st, off, nil
		case api.FrameError:
			// cairnd ended the session (the token was revoked or expired).
			var info api.ErrorInfo
			if err := json.Unmarshal(p, &info); err != nil || info.Code == "" {
				return api.ExitStatus{}, off, fmt.Errorf("exec: cairnd ended the session with a bad error frame: %q", p)
			}
			return api.ExitStatus{}, off, &Error{Code: info.Code, Message: info.Message}
		}
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
