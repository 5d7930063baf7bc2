package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/cairn-sandbox/cairn/api"
)

func sandboxPath(name string) string { return "/v1/sandboxes/" + url.PathEscape(name) }

// CreateCheckpoint starts a checkpoint of sandbox name; the operation's
// result is the api.Checkpoint (see WaitCheckpoint).
func (c *Client) CreateCheckpoint(ctx context.Context, name string, req api.CreateCheckpointRequest) (api.Operation, error) {
	var op api.Operation
	// The endpoint streams NDJSON by default (for curl from inside a
	// sandbox); ask for the operation instead.
	h := http.Header{}
	h.Set("Accept", "application/json")
	resp, err := c.send(ctx, "POST", sandboxPath(name)+"/checkpoint", req, h)
	if err != nil {
		return op, err
	}
	defer resp.Body.Close()
	return op, json.NewDecoder(resp.Body).Decode(&op)
}

// WaitCheckpoint follows an operation whose result is a checkpoint.
func (c *Client) WaitCheckpoint(ctx context.Context, op api.Operation, fn func(api.Event)) (api.Checkpoint, error) {
	var ck api.Checkpoint
	raw, err := c.Follow(ctx, op, fn)
	if err != nil {
		return ck, err
	}
	return ck, json.Unmarshal(raw, &ck)
}

// Checkpoints lists a sandbox's checkpoints, oldest first; includeAuto adds
// the automatic ones.
func (c *Client) Checkpoints(ctx context.Context, name string, includeAuto bool) ([]api.Checkpoint, error) {
	path := sandboxPath(name) + "/checkpoints"
	if includeAuto {
		path += "?include_auto=true"
	}
	var out []api.Checkpoint
	return out, c.do(ctx, "GET", path, nil, &out)
}

// Checkpoint returns one checkpoint of a sandbox by its id (v3, auto-…).
func (c *Client) Checkpoint(ctx context.Context, name, id string) (api.Checkpoint, error) {
	var out api.Checkpoint
	return out, c.do(ctx, "GET", sandboxPath(name)+"/checkpoints/"+url.PathEscape(id), nil, &out)
}

// DeleteCheckpoint deletes a checkpoint and frees its space.
func (c *Client) DeleteCheckpoint(ctx context.Context, name, id string) error {
	return c.do(ctx, "DELETE", sandboxPath(name)+"/checkpoints/"+url.PathEscape(id), nil, nil)
}

// KeepCheckpoint makes a checkpoint made from inside the sandbox one the
// operator keeps: it no longer counts toward the sandbox's --inside-keep
// and is never deleted for it. It returns the checkpoint.
func (c *Client) KeepCheckpoint(ctx context.Context, name, id string) (api.Checkpoint, error) {
	var out api.Checkpoint
	return out, c.do(ctx, "POST", sandboxPath(name)+"/checkpoints/"+url.PathEscape(id)+"/keep", nil, &out)
}

// OffsiteCheckpoints lists what the account's off-site repository holds.
func (c *Client) OffsiteCheckpoints(ctx context.Context) ([]api.RemoteCheckpoint, error) {
	var out []api.RemoteCheckpoint
	return out, c.do(ctx, "GET", "/v1/offsite/checkpoints", nil, &out)
}

// ImportOffsite makes checkpoints here for what the off-site repository
// holds and this host does not know.
func (c *Client) ImportOffsite(ctx context.Context, req api.ImportRequest) (api.ImportResult, error) {
	var out api.ImportResult
	return out, c.do(ctx, "POST", "/v1/offsite/import", req, &out)
}

// EvictCheckpoint drops the local copy of a checkpoint that both off-site
// locations hold; it restores from off-site from then on. It returns the
// checkpoint.
func (c *Client) EvictCheckpoint(ctx context.Context, name, id string) (api.Checkpoint, error) {
	var out api.Checkpoint
	return out, c.do(ctx, "POST", sandboxPath(name)+"/checkpoints/"+url.PathEscape(id)+"/evict", nil, &out)
}

// RestoreCheckpoint restores a checkpoint in place (or, with req.As, into a
// new sandbox). The operation's result is the sandbox.
func (c *Client) RestoreCheckpoint(ctx context.Context, name, id string, req api.RestoreRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", sandboxPath(name)+"/checkpoints/"+url.PathEscape(id)+"/restore", req, &op)
}

// RestoreSnapshot restores a checkpoint named account-wide (global id,
// snapshot name or SANDBOX/ID) as a new sandbox.
func (c *Client) RestoreSnapshot(ctx context.Context, ref string, req api.SnapshotRestoreRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", "/v1/snapshots/"+url.PathEscape(ref)+"/restore", req, &op)
}

// Fork makes copies of a sandbox; the operation's result is []api.Sandbox.
func (c *Client) Fork(ctx context.Context, name string, req api.ForkRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", sandboxPath(name)+"/fork", req, &op)
}

// WaitSandboxes follows an operation whose result is a list of sandboxes.
func (c *Client) WaitSandboxes(ctx context.Context, op api.Operation, fn func(api.Event)) ([]api.Sandbox, error) {
	var out []api.Sandbox
	raw, err := c.Follow(ctx, op, fn)
	if err != nil {
		return nil, err
	}
	return out, json.Unmarshal(raw, &out)
}

// Diff lists the files that differ between checkpoint from and checkpoint
// to of a sandbox, or its current disk when to is "".
func (c *Client) Diff(ctx context.Context, name, from, to string) ([]api.DiffEntry, error) {
	q := url.Values{"from": {from}}
	if to != "" {
		q.Set("to", to)
	}
	var out []api.DiffEntry
	return out, c.do(ctx, "GET", sandboxPath(name)+"/diff?"+q.Encode(), nil, &out)
}

// DiffFile returns the text diff of the file at path between checkpoint
// from and checkpoint to ("" for the current disk) of sandbox name.
func (c *Client) DiffFile(ctx context.Context, name, from, to, path string) (api.FileDiff, error) {
	q := url.Values{"from": {from}, "path": {path}}
	if to != "" {
		q.Set("to", to)
	}
	var out api.FileDiff
	return out, c.do(ctx, "GET", sandboxPath(name)+"/diff/file?"+q.Encode(), nil, &out)
}

// CreateSnapshot takes a named checkpoint of sandbox name (req.Name, or
// the default NAME-YYYYMMDD-HHMMSS); the result is the api.Checkpoint.
func (c *Client) CreateSnapshot(ctx context.Context, name string, req api.CreateCheckpointRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", sandboxPath(name)+"/snapshot", req, &op)
}

// Snapshots lists every named and automatic checkpoint of the account.
func (c *Client) Snapshots(ctx context.Context) ([]api.Checkpoint, error) {
	var out []api.Checkpoint
	return out, c.do(ctx, "GET", "/v1/snapshots", nil, &out)
}

// DeleteSnapshot deletes a checkpoint named account-wide.
func (c *Client) DeleteSnapshot(ctx context.Context, ref string) (api.Checkpoint, error) {
	var out api.Checkpoint
	return out, c.do(ctx, "DELETE", "/v1/snapshots/"+url.PathEscape(ref), nil, &out)
}

// ConfigureSandbox changes a sandbox's settings.
func (c *Client) ConfigureSandbox(ctx context.Context, name string, req api.ConfigureSandboxRequest) (api.Sandbox, error) {
	var out api.Sandbox
	return out, c.do(ctx, "PATCH", sandboxPath(name), req, &out)
}

// Account returns the account's disk use and limit.
func (c *Client) Account(ctx context.Context) (api.AccountInfo, error) {
	var out api.AccountInfo
	return out, c.do(ctx, "GET", "/v1/account", nil, &out)
}

// Verify checks the account's checkpoints, locally or (req.Offsite) in its
// off-site locations; the operation's result is an api.VerifyReport (see
// WaitVerify).
func (c *Client) Verify(ctx context.Context, req api.VerifyRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", "/v1/verify", req, &op)
}

// WaitVerify follows a verify operation to its report.
func (c *Client) WaitVerify(ctx context.Context, op api.Operation, fn func(api.Event)) (api.VerifyReport, error) {
	var out api.VerifyReport
	raw, err := c.Follow(ctx, op, fn)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(raw, &out)
}
