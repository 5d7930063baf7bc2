package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/cairn-sandbox/cairn/api"
)

// Whoami says who the client's requests speak for: its token's account
// and role, or the unix socket's (the default account, as admin).
func (c *Client) Whoami(ctx context.Context) (api.Whoami, error) {
	var out api.Whoami
	return out, c.do(ctx, "GET", "/v1/whoami", nil, &out)
}

// Accounts lists every account (admin).
func (c *Client) Accounts(ctx context.Context) ([]api.AccountRecord, error) {
	var out []api.AccountRecord
	return out, c.do(ctx, "GET", "/v1/accounts", nil, &out)
}

// CreateAccount makes an account (admin).
func (c *Client) CreateAccount(ctx context.Context, req api.CreateAccountRequest) (api.AccountRecord, error) {
	var out api.AccountRecord
	return out, c.do(ctx, "POST", "/v1/accounts", req, &out)
}

// SetAccount changes an account (admin).
func (c *Client) SetAccount(ctx context.Context, name string, req api.SetAccountRequest) (api.AccountRecord, error) {
	var out api.AccountRecord
	return out, c.do(ctx, "PATCH", "/v1/accounts/"+url.PathEscape(name), req, &out)
}

// DeleteAccount deletes an account that holds nothing (admin).
func (c *Client) DeleteAccount(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/accounts/"+url.PathEscape(name), nil, nil)
}

// PurgeAccount starts deleting the account with everything it holds
// (admin): its tokens, sandboxes, checkpoints, snapshots and off-site
// copies. The operation completes with an api.AccountDeleted.
func (c *Client) PurgeAccount(ctx context.Context, name string) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "DELETE", "/v1/accounts/"+url.PathEscape(name)+"?force=true", nil, &op)
}

// Tokens lists account's tokens, every account's with "" (admin).
func (c *Client) Tokens(ctx context.Context, account string) ([]api.Token, error) {
	var out []api.Token
	path := "/v1/tokens"
	if account != "" {
		path += "?" + url.Values{"account": {account}}.Encode()
	}
	return out, c.do(ctx, "GET", path, nil, &out)
}

// CreateToken makes a token (admin); the answer holds its secret, once.
func (c *Client) CreateToken(ctx context.Context, req api.CreateTokenRequest) (api.NewToken, error) {
	var out api.NewToken
	return out, c.do(ctx, "POST", "/v1/tokens", req, &out)
}

// RevokeToken revokes a token (admin).
func (c *Client) RevokeToken(ctx context.Context, id string) (api.Token, error) {
	var out api.Token
	return out, c.do(ctx, "DELETE", "/v1/tokens/"+url.PathEscape(id), nil, &out)
}

// Audit returns the audit log: the changes made through the API that the
// client may see (its account's; every one for an admin), oldest first.
// since is a duration back ("1h") or an RFC 3339 time; target a sandbox.
func (c *Client) Audit(ctx context.Context, since, target string, limit int) ([]api.AuditEntry, error) {
	q := url.Values{}
	if since != "" {
		q.Set("since", since)
	}
	if target != "" {
		q.Set("target", target)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []api.AuditEntry
	path := "/v1/audit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return out, c.do(ctx, "GET", path, nil, &out)
}

// Hosts lists the hosts that share cairnd's metadata database, with
// their state and load (admin).
func (c *Client) Hosts(ctx context.Context) ([]api.Host, error) {
	var out []api.Host
	return out, c.do(ctx, "GET", "/v1/hosts", nil, &out)
}

// EvacuateHost starts the evacuation of the host called name, which is
// down: each of its sandboxes restored on a host that is up from its
// newest off-site checkpoint (admin). Its result is an
// api.EvacuationReport (WaitEvacuation).
func (c *Client) EvacuateHost(ctx context.Context, name string, req api.EvacuateRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", "/v1/hosts/"+url.PathEscape(name)+"/evacuate", req, &op)
}

// WaitEvacuation follows an evacuation to its report.
func (c *Client) WaitEvacuation(ctx context.Context, op api.Operation, fn func(api.Event)) (api.EvacuationReport, error) {
	var rep api.EvacuationReport
	raw, err := c.Follow(ctx, op, fn)
	if err != nil {
		return rep, err
	}
	return rep, json.Unmarshal(raw, &rep)
}
