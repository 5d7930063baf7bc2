package client

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/cairn-sandbox/cairn/api"
)

// Background processes of a sandbox (docs/api.md#processes), each named
// by its pid inside.

func processPath(name string, pid int, tail string) string {
	p := "/v1/sandboxes/" + url.PathEscape(name) + "/processes/" + strconv.Itoa(pid)
	if tail != "" {
		p += "/" + tail
	}
	return p
}

// ExecBackground starts a background process and returns its pid, its id
// in the processes calls. Its output is kept (the last
// api.MaxProcessOutput bytes), its stdin open for WriteStdin.
func (c *Client) ExecBackground(ctx context.Context, name string, req api.ExecRequest) (int, error) {
	req.Background, req.Detach, req.TTY = true, false, false
	var out api.ExecStarted
	err := c.do(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(name)+"/exec", req, &out)
	return out.PID, err
}

// Processes lists the sandbox's background processes, then its attached
// execs that run.
func (c *Client) Processes(ctx context.Context, name string) ([]api.Process, error) {
	var out []api.Process
	err := c.do(ctx, "GET", "/v1/sandboxes/"+url.PathEscape(name)+"/processes", nil, &out)
	return out, err
}

// Process describes one process.
func (c *Client) Process(ctx context.Context, name string, pid int) (api.Process, error) {
	var out api.Process
	err := c.do(ctx, "GET", processPath(name, pid, ""), nil, &out)
	return out, err
}

// SignalProcess sends a signal (a name such as TERM or KILL, or a number;
// "" is TERM) to the process group of pid.
func (c *Client) SignalProcess(ctx context.Context, name string, pid int, signal string) error {
	var out api.AgentResult
	return c.do(ctx, "POST", processPath(name, pid, "signal"), api.SignalRequest{Signal: signal}, &out)
}

// WriteStdin writes data to the stdin of background process pid, in
// requests of at most api.MaxStdinWrite bytes, and closes it after if
// closeAfter.
func (c *Client) WriteStdin(ctx context.Context, name string, pid int, data []byte, closeAfter bool) error {
	for {
		n := min(len(data), api.MaxStdinWrite)
		last := n == len(data)
		path := processPath(name, pid, "stdin")
		if last && closeAfter {
			path += "?close=true"
		}
		var out api.AgentResult
		if err := c.streamIn(ctx, "POST", path, "application/octet-stream", bytes.NewReader(data[:n]), &out); err != nil {
			return err
		}
		if last {
			return nil
		}
		data = data[n:]
	}
}

// WaitProcess waits until background process pid exits and returns it
// with its exit status.
func (c *Client) WaitProcess(ctx context.Context, name string, pid int) (api.Process, error) {
	var out api.Process
	err := c.do(ctx, "POST", processPath(name, pid, "wait"), nil, &out)
	return out, err
}

// Attached is how an attach to a background process ended.
type Attached struct {
	Exit api.ExitStatus // its exit status, once it came
	// Start is the offset the output started at (later than asked if
	// those bytes were dropped); Offset is the offset reached, from which
	// an attach that broke can go on.
	Start, Offset int64
}

// AttachProcess attaches eio to background process pid from output
// offset offset: it writes its output to eio until the process exits and
// returns its exit status. eio.Stdin, if set, is written to its stdin (its
// EOF closes it). If the connection breaks first, the error says so and
// Attached.Offset is where to attach again.
func (c *Client) AttachProcess(ctx context.Context, name string, pid int, offset int64, eio ExecIO) (Attached, error) {
	resp, conn, err := c.upgrade(ctx, processPath(name, pid, "attach"), api.AttachRequest{Offset: offset})
	if err != nil {
		return Attached{Offset: offset}, err
	}
	defer conn.Close()
	start := offset
	if v := resp.Header.Get("Cairn-Output-Offset"); v != "" {
		if start, err = strconv.ParseInt(v, 10, 64); err != nil || start < offset {
			return Attached{Offset: offset}, fmt.Errorf("attach: bad Cairn-Output-Offset %q", v)
		}
	}
	st, off, err := runFrames(ctx, conn, eio.Stdin != nil, eio, offset)
	return Attached{Exit: st, Start: start, Offset: off}, err
}
