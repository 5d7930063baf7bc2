package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/cairn-sandbox/cairn/api"
)

// PullImage starts pulling an image from a registry; follow the
// operation with WaitImage.
func (c *Client) PullImage(ctx context.Context, req api.PullImageRequest) (api.Operation, error) {
	var op api.Operation
	return op, c.do(ctx, "POST", "/v1/images/pull", req, &op)
}

// WaitImage follows an operation whose result is an image.
func (c *Client) WaitImage(ctx context.Context, op api.Operation, fn func(api.Event)) (api.Image, error) {
	var img api.Image
	raw, err := c.Follow(ctx, op, fn)
	if err != nil {
		return img, err
	}
	return img, json.Unmarshal(raw, &img)
}

// Image returns the image called name.
func (c *Client) Image(ctx context.Context, name string) (api.Image, error) {
	var img api.Image
	return img, c.do(ctx, "GET", "/v1/images/"+url.PathEscape(name), nil, &img)
}

// PruneImages deletes every entry of cairnd's layer cache (the trees of
// layer chains kept by pulls); images and sandboxes lose nothing.
func (c *Client) PruneImages(ctx context.Context) (api.PruneImagesResult, error) {
	var res api.PruneImagesResult
	return res, c.do(ctx, "POST", "/v1/images/prune", nil, &res)
}

// DeleteImage deletes the image called name.
func (c *Client) DeleteImage(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/images/"+url.PathEscape(name), nil, nil)
}

// ImportImage sends an image archive (a docker save or OCI layout tar, or
// a gzip of either) to be imported as the image name; source is its file
// name, recorded as where the image came from. Follow the operation with
// WaitImage.
func (c *Client) ImportImage(ctx context.Context, archive io.Reader, name, source string) (api.Operation, error) {
	var op api.Operation
	q := url.Values{"name": {name}, "source": {source}}
	resp, err := c.send(ctx, "POST", "/v1/images/import?"+q.Encode(), archive, http.Header{"Content-Type": {"application/x-tar"}})
	if err != nil {
		return op, err
	}
	defer resp.Body.Close()
	return op, json.NewDecoder(resp.Body).Decode(&op)
}

// BuildImage sends a build context (a tar whose Dockerfile is at
// api.BuildContextDockerfile, see internal/image/buildctx) and starts
// building the image req.Name from it; wait for it with WaitImage.
func (c *Client) BuildImage(ctx context.Context, buildContext io.Reader, req api.BuildImageRequest) (api.Operation, error) {
	var op api.Operation
	q := url.Values{"name": {req.Name}}
	if req.Source != "" {
		q.Set("source", req.Source)
	}
	if req.Network != "" {
		q.Set("network", req.Network)
	}
	if req.NoCache {
		q.Set("no_cache", "true")
	}
	if req.Insecure {
		q.Set("insecure", "true")
	}
	if req.Memory != "" {
		q.Set("memory", req.Memory)
	}
	if req.CPUs != 0 {
		q.Set("cpus", strconv.FormatFloat(req.CPUs, 'f', -1, 64))
	}
	if req.StepTimeout != "" {
		q.Set("step_timeout", req.StepTimeout)
	}
	keys := make([]string, 0, len(req.BuildArgs))
	for k := range req.BuildArgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.Add("build_arg", k+"="+req.BuildArgs[k])
	}
	resp, err := c.send(ctx, "POST", "/v1/images/build?"+q.Encode(), buildContext, http.Header{"Content-Type": {"application/x-tar"}})
	if err != nil {
		return op, err
	}
	defer resp.Body.Close()
	return op, json.NewDecoder(resp.Body).Decode(&op)
}
