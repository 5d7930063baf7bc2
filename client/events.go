package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/cairn-sandbox/cairn/api"
)

// SandboxEvents calls fn with the events of sandbox name kept after
// sequence number since, oldest first; with follow it goes on with each
// new one until ctx ends, fn fails (its error is returned) or the sandbox
// is deleted (its last event is api.ActivityDeleted); a follow that ends
// otherwise (cairnd stopped) is an error.
func (c *Client) SandboxEvents(ctx context.Context, name string, since int64, follow bool, fn func(api.SandboxActivity) error) error {
	path := fmt.Sprintf("/v1/sandboxes/%s/events?since=%d&follow=%t", url.PathEscape(name), since, follow)
	resp, err := c.send(ctx, "GET", path, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	deleted := false
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue // a follow's keepalive
		}
		var ev struct {
			api.SandboxActivity
			Error *api.ErrorInfo `json:"error"` // cairnd ended the stream: its last line
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("events of %s: bad event: %w", name, err)
		}
		if ev.Error != nil {
			return &Error{Code: ev.Error.Code, Message: ev.Error.Message}
		}
		if err := fn(ev.SandboxActivity); err != nil {
			return err
		}
		deleted = deleted || ev.Type == api.ActivityDeleted
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("events of %s: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if follow && !deleted {
		return fmt.Errorf("events of %s: the stream ended before the sandbox did (cairnd stopped?)", name)
	}
	return nil
}
