package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cairn-sandbox/cairn/api"
)

// The Files API: a running sandbox's files, as the sandbox sees them
// (docs/files.md). Every path is absolute inside the sandbox.

func filesPath(name, sub string, q url.Values) string {
	p := "/v1/sandboxes/" + url.PathEscape(name) + "/files"
	if sub != "" {
		p += "/" + sub
	}
	return p + "?" + q.Encode()
}

// WriteOptions are the options of WriteFile and ExtractTar.
type WriteOptions struct {
	Mode      *uint32 // permission bits; nil: 0644 for a new file, an existing one's own
	Owner     string  // user, uid, user:group or uid:gid inside; "": root (an existing file's own)
	NoParents bool    // fail (F01) rather than make missing parent directories
}

func (o WriteOptions) query(path string) url.Values {
	q := url.Values{"path": {path}}
	if o.Mode != nil {
		q.Set("mode", strconv.FormatUint(uint64(*o.Mode), 8))
	}
	if o.Owner != "" {
		q.Set("owner", o.Owner)
	}
	if o.NoParents {
		q.Set("parents", "false")
	}
	return q
}

// ReadFile returns the content of the file at path in the sandbox; the
// caller closes it. A read that fails inside after it started ends with
// an error, never a clean io.EOF.
func (c *Client) ReadFile(ctx context.Context, name, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, "GET", filesPath(name, "", url.Values{"path": {path}}), nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// WriteFile writes what body reads to path in the sandbox, streaming it;
// the file is replaced only once all of it is there.
func (c *Client) WriteFile(ctx context.Context, name, path string, body io.Reader, o WriteOptions) (api.FileEntry, error) {
	var e api.FileEntry
	err := c.streamIn(ctx, "PUT", filesPath(name, "", o.query(path)), "application/octet-stream", body, &e)
	return e, err
}

// streamIn sends body raw and decodes the JSON answer into out.
func (c *Client) streamIn(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	if body == nil {
		body = bytes.NewReader(nil)
	}
	resp, err := c.send(ctx, method, path, io.NopCloser(body), http.Header{"Content-Type": {contentType}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// StatFile returns the entry of path in the sandbox (a link is itself).
func (c *Client) StatFile(ctx context.Context, name, path string) (api.FileEntry, error) {
	var e api.FileEntry
	err := c.do(ctx, "GET", filesPath(name, "stat", url.Values{"path": {path}}), nil, &e)
	return e, err
}

// ListFiles returns the entries under the directory path, depth levels
// deep (0 is 1).
func (c *Client) ListFiles(ctx context.Context, name, path string, depth int) ([]api.FileEntry, error) {
	q := url.Values{"path": {path}}
	if depth > 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var out []api.FileEntry
	err := c.do(ctx, "GET", filesPath(name, "list", q), nil, &out)
	return out, err
}

// MakeDir makes a directory in the sandbox and reports whether it made it
// (with req.Parents an existing one is no error).
func (c *Client) MakeDir(ctx context.Context, name string, req api.MakeDirRequest) (api.FileEntry, bool, error) {
	resp, err := c.send(ctx, "POST", "/v1/sandboxes/"+url.PathEscape(name)+"/files/mkdir", req, nil)
	if err != nil {
		return api.FileEntry{}, false, err
	}
	defer resp.Body.Close()
	var e api.FileEntry
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		return e, false, fmt.Errorf("decode answer of mkdir: %w", err)
	}
	return e, resp.StatusCode == http.StatusCreated, nil
}

// RemoveFile removes path in the sandbox; recursive: a directory with all
// it holds.
func (c *Client) RemoveFile(ctx context.Context, name, path string, recursive bool) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return c.do(ctx, "DELETE", filesPath(name, "", q), nil, nil)
}

// RenameFile renames from to to in the sandbox and returns the entry at to.
func (c *Client) RenameFile(ctx context.Context, name, from, to string) (api.FileEntry, error) {
	var e api.FileEntry
	p := "/v1/sandboxes/" + url.PathEscape(name) + "/files/rename"
	err := c.do(ctx, "POST", p, api.RenameRequest{From: from, To: to}, &e)
	return e, err
}

// Tar returns path in the sandbox as a tar stream, its entries named from
// path's base name on; the caller closes it.
func (c *Client) Tar(ctx context.Context, name, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, "GET", filesPath(name, "tar", url.Values{"path": {path}}), nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ExtractTar extracts the tar stream body reads into the directory dir of
// the sandbox (made with its parents unless o.NoParents; o.Owner owns what
// is made for it), keeping the entries' modes, owners and times.
func (c *Client) ExtractTar(ctx context.Context, name, dir string, body io.Reader, o WriteOptions) (api.TarResult, error) {
	var res api.TarResult
	q := o.query(dir)
	q.Del("mode")
	err := c.streamIn(ctx, "PUT", filesPath(name, "tar", q), "application/x-tar", body, &res)
	return res, err
}

// WatchDir calls fn with each change under the directory path of the
// sandbox (recursive: its subdirectories too) until ctx ends (nil), fn
// fails (its error) or the watch fails inside (an *Error).
func (c *Client) WatchDir(ctx context.Context, name, path string, recursive bool, fn func(api.FileEvent) error) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	resp, err := c.send(ctx, "GET", filesPath(name, "watch", q), nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), api.MaxMessage)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue // keepalive
		}
		var line struct {
			api.FileEvent
			Error *api.ErrorInfo `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("decode watch event: %w", err)
		}
		if line.Error != nil {
			return &Error{Status: http.StatusOK, Code: line.Error.Code, Message: line.Error.Message}
		}
		if err := fn(line.FileEvent); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("watch of %s in %s: the stream ended", path, name)
}
