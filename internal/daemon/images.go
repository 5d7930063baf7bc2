package daemon

import (
	"context"
	"io"
	"os"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image"
	"github.com/cairn-sandbox/cairn/internal/image/build"
	"github.com/cairn-sandbox/cairn/internal/image/oci"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/operation"
)

// imageService is the API's side of the image catalog (server.Images):
// pulls run as operations.
type imageService struct {
	*image.Catalog
	ops *operation.Registry
	// builder returns the image builder, whose FROMs fetch with the
	// options given; nil: builds are off.
	builder func(oci.FetchOptions) *build.Builder
	// buildMax is the most a build's RUN steps may be given
	// (build.HostLimits).
	buildMax build.Limits
	// accounts finds the account a build runs for (its step cache is
	// that account's).
	accounts interface {
		AccountByName(ctx context.Context, name string) (metadata.Account, error)
	}
}

// Pull starts pulling req.Ref; the operation's result is the api.Image.
func (s imageService) Pull(ctx context.Context, req api.PullImageRequest) (*operation.Op, error) {
	fetch := oci.FetchOptions{Insecure: req.Insecure, Username: req.Username, Password: req.Password, Untrusted: untrustedPull(ctx)}
	if fetch.Untrusted && fetch.Insecure {
		return nil, errdefs.New(api.CodeForbidden, "only an admin may pull from a plain-HTTP registry (--insecure)")
	}
	return s.ops.Start("image.pull", "image/"+req.Ref, func(ctx context.Context, op *operation.Op) (any, error) {
		return s.Catalog.Pull(ctx, image.PullRequest{Ref: req.Ref, Name: req.Name, Fetch: fetch}, op.Record)
	}), nil
}

// Import receives an archive (body, a tar or a gzip of one) and starts
// importing it as the image name; source is the file's name, for the
// record.
func (s imageService) Import(_ context.Context, body io.Reader, name, source string) (*operation.Op, error) {
	path, err := s.Catalog.ReceiveArchive(body)
	if err != nil {
		return nil, err
	}
	return s.ops.Start("image.import", "image/"+name, func(ctx context.Context, op *operation.Op) (any, error) {
		defer os.Remove(path)
		return s.Catalog.Import(ctx, image.ImportRequest{Path: path, Name: name, Source: "import:" + source}, op.Record)
	}), nil
}
