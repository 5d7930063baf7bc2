package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/auth"
	"github.com/cairn-sandbox/cairn/internal/container"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image"
	"github.com/cairn-sandbox/cairn/internal/image/build"
	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
	"github.com/cairn-sandbox/cairn/internal/image/cache"
	"github.com/cairn-sandbox/cairn/internal/image/oci"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/network"
	"github.com/cairn-sandbox/cairn/internal/operation"
	"github.com/cairn-sandbox/cairn/internal/sandbox/runsc"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// stepRunner runs a build's RUN steps (build.Runner): each in a gVisor
// container of its own over the step's tree, with a network of its own
// under the default rules (or none), removed when the command ends, held
// to the step's memory and CPUs (runsc ends it when it uses all its
// memory: build.ErrOutOfMemory).
type stepRunner struct {
	runtime *runsc.Runsc
	nets    *network.Manager // nil: networking is off
	dir     string           // where the containers' bundles go
}

var _ build.Runner = stepRunner{}

// buildContainerPrefix names the build steps' containers; being no
// sandbox's, recovery removes any a crash left.
const buildContainerPrefix = "build-"

func (s stepRunner) Run(ctx context.Context, spec build.RunSpec) (int, error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	id := buildContainerPrefix + hex.EncodeToString(rnd[:])
	c := container.Spec{
		ID: id, Hostname: "cairn-build", Root: spec.Root, Args: spec.Args, Env: spec.Env,
		BundleDir: filepath.Join(s.dir, id),
		Process:   &container.Process{UID: spec.UID, GID: spec.GID, Groups: spec.Groups, Cwd: spec.Cwd},
	}
	defer os.RemoveAll(c.BundleDir)
	// /tmp stays gVisor's (a memory file system when the image's /tmp is
	// empty, counted in the step's memory), as before steps had limits:
	// cairn's own tmpfs there would hide an image's /tmp.
	c.Options = container.Options{CPUs: spec.CPUs, MemoryBytes: spec.MemoryBytes, RuntimeTmp: true, Network: container.NetworkNone}
	if spec.Network == metadata.NetworkEgress {
		if s.nets == nil {
			return 0, errdefs.New(api.CodeNetworkUnavailable, "the build's RUN steps need a network, and this cairnd has networking off: build with --network none")
		}
		att, err := s.nets.Attach(ctx, id, network.ModeEgress, network.Rules{})
		if err != nil {
			return 0, errdefs.Wrap(api.CodeNetworkUnavailable, err, "network of the build step")
		}
		defer s.nets.Detach(id)
		c.Options.Network, c.NetNS = container.NetworkSandbox, att.NetNS
		c.Mounts = append(c.Mounts, container.Mount{Source: att.ResolvConf, Destination: "/etc/resolv.conf", ReadOnly: true})
	}
	exit, err := s.runtime.RunAttached(ctx, c, spec.Output)
	if errors.Is(err, runsc.ErrOutOfMemory) {
		err = outOfMemory{err}
	}
	return exit, err
}

// outOfMemory is runsc's ErrOutOfMemory as the builder knows it
// (build.ErrOutOfMemory), its message runsc's.
type outOfMemory struct{ error }

func (e outOfMemory) Is(target error) bool { return target == build.ErrOutOfMemory }
func (e outOfMemory) Unwrap() error        { return e.error }

// newBuilder returns how the API gets an image builder: the catalog's
// images, the pool's cache, RUN steps in containers of runtime with
// networks from nets (nil: RUN steps have none).
func newBuilder(pool *volume.Pool, images *image.Catalog, runtime *runsc.Runsc, nets *network.Manager, dataDir string) func(oci.FetchOptions) *build.Builder {
	c := images.Cache()
	runner := stepRunner{runtime: runtime, nets: nets, dir: filepath.Join(dataDir, "build")}
	// What a killed cairnd left: the bundles of its steps' containers
	// (the containers are orphans recovery removes, their networks go
	// with them).
	os.RemoveAll(runner.dir)
	// Entries that are no valid key: step entries of an older cairn,
	// whose keys named no account, which no build looks up again.
	if n, err := c.Prune(context.Background(), func(cache.Entry) bool { return false }); n > 0 || err != nil {
		slog.Info("build cache: removed entries of no valid key", "removed", n, "err", err)
	}
	return func(fetch oci.FetchOptions) *build.Builder {
		return build.New(pool, c, buildImages{catalog: images, fetch: fetch}, runner)
	}
}

// buildImages is the catalog as a build sees it (build.Images).
type buildImages struct {
	catalog *image.Catalog
	fetch   oci.FetchOptions
}

var _ build.Images = buildImages{}

func (b buildImages) Base(ctx context.Context, ref string, report build.Reporter) (build.Base, error) {
	base, err := b.catalog.Base(ctx, ref, b.fetch, image.Reporter(report))
	return build.Base(base), err
}

func (b buildImages) Install(ctx context.Context, rec metadata.Image, src func() (string, error), report build.Reporter) (api.Image, error) {
	return b.catalog.InstallBuilt(ctx, rec, src, image.Reporter(report))
}

// Build receives a build context (body, a tar) into the pool's work area
// and starts building req.Name from it; the operation's result is the
// api.Image.
func (s imageService) Build(ctx context.Context, body io.Reader, req api.BuildImageRequest) (*operation.Op, error) {
	if s.builder == nil {
		return nil, errors.New("image builds are off in this cairnd")
	}
	if req.Name == "" {
		return nil, errdefs.New(api.CodeInvalidArgument, "build needs the image's name (-t NAME)")
	}
	if req.Network != "" && req.Network != metadata.NetworkEgress && req.Network != metadata.NetworkNone {
		return nil, errdefs.New(api.CodeInvalidArgument, "unknown network mode %q for the build's RUN steps: egress or none", req.Network)
	}
	if err := s.Catalog.CheckBuildName(ctx, req.Name); err != nil {
		return nil, err
	}
	untrusted := untrustedPull(ctx)
	if untrusted && req.Insecure {
		return nil, errdefs.New(api.CodeForbidden, "only an admin may pull from a plain-HTTP registry (--insecure)")
	}
	limits, err := build.ParseLimits(req.Memory, req.CPUs, req.StepTimeout, s.buildMax)
	if err != nil {
		return nil, err
	}
	account, err := s.buildAccount(ctx)
	if err != nil {
		return nil, err
	}
	dir, dockerfile, err := s.receiveContext(ctx, body)
	if err != nil {
		return nil, err
	}
	return s.ops.Start("image.build", "image/"+req.Name, func(ctx context.Context, op *operation.Op) (any, error) {
		defer os.RemoveAll(dir)
		b := s.builder(oci.FetchOptions{Insecure: req.Insecure, Untrusted: untrusted})
		return b.Build(ctx, build.Request{Account: account, Context: dir, Dockerfile: dockerfile, Name: req.Name, Source: req.Source,
			BuildArgs: req.BuildArgs, Network: req.Network, NoCache: req.NoCache, Limits: limits}, op.Record)
	}), nil
}

// buildAccount returns the id of the account the request of ctx is for
// (the socket's is the default account), whose step cache its build
// uses.
func (s imageService) buildAccount(ctx context.Context) (int64, error) {
	name := metadata.DefaultAccount
	if c, ok := auth.FromContext(ctx); ok && c.Account != "" {
		name = c.Account
	}
	acct, err := s.accounts.AccountByName(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("the build's account %q: %w", name, err)
	}
	return acct.ID, nil
}

// untrustedPull reports whether the request of ctx is an API token's
// below admin: its pulls may not use the host's registry credentials nor
// reach its private networks (oci.FetchOptions.Untrusted).
func untrustedPull(ctx context.Context) bool {
	c, ok := auth.FromContext(ctx)
	return ok && c.TokenID != "" && c.Role != auth.RoleAdmin
}

// receiveContext extracts the build context's tar (body) into a new
// directory in the pool's work area, in the restricted mode of a build
// context (buildctx.Extract: files, directories and links only, owned by
// root, nothing leaves the directory), and takes the Dockerfile out of
// it.
func (s imageService) receiveContext(ctx context.Context, body io.Reader) (dir string, dockerfile []byte, err error) {
	work := s.Catalog.WorkPath()
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp(work, "context-")
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	root, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	defer root.Close()
	if _, err := buildctx.Extract(ctx, root, body, buildctx.ExtractOptions{}); err != nil {
		return "", nil, err
	}
	dockerfile, err = buildctx.ReadDockerfile(root)
	if err != nil {
		return "", nil, errdefs.Wrap(api.CodeDockerfile, err, "the build context's Dockerfile (at %s)", api.BuildContextDockerfile)
	}
	return dir, dockerfile, nil
}

// hostMemory is this host's RAM in bytes, the most a build step may be
// given (as a sandbox); 0 when it cannot be read.
func hostMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
