package client

import (
	"context"
	"io"
)

// OpenAPI returns the OpenAPI 3.1 document of cairnd's API.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) { return c.raw(ctx, "/v1/openapi.json") }

// Metrics returns cairnd's metrics in the Prometheus text format
// (GET /metrics, served on the unix socket; docs/metrics.md).
func (c *Client) Metrics(ctx context.Context) ([]byte, error) { return c.raw(ctx, "/metrics") }

// raw GETs path and returns its body.
func (c *Client) raw(ctx context.Context, path string) ([]byte, error) {
	resp, err := c.send(ctx, "GET", path, nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
