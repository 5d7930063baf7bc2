// Package build runs the steps of a Dockerfile (planned by package
// dockerfile) into a new cairn image, each step's result cached.
//
// A build works in one writable subvolume in the pool's work area that
// always holds the tree of the last step done: FROM makes it a snapshot of
// the base image, RUN runs its command in a gVisor sandbox over it (the
// Runner), COPY and ADD copy from the build context into it (package
// buildctx, which keeps every write inside the tree), WORKDIR makes its
// directory. After each step that changed files, the tree is kept as a
// read-only snapshot in the pool's cache under the step's key: a hash of
// the key before it, the instruction as planned (its variables expanded),
// the config it runs under and, for COPY and ADD, the digest of the files
// it copies. A step whose key is in the cache is not run: the build goes
// on from the cached tree, so a second build of an unchanged Dockerfile
// only checks keys, and a change rebuilds from the changed step on. The
// cache is the account's: a step's entry is named by its key and the
// account the build runs for (cache.StepKey), and a build looks up and
// fills only its own account's entries, so that no account ever builds
// on a tree another account's commands made.
// docs/images.md#build says what a user sees.
package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/cache"
	"github.com/cairn-sandbox/cairn/internal/image/dockerfile"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Reporter receives each line of a build (a step, a line of a command's
// output) with its machine-readable side.
type Reporter func(p api.Progress, line string)

// Runner runs the command of a RUN step in a sandbox whose root is
// spec.Root, until it ends. exit is the command's exit status; err is for
// a sandbox that could not run it.
type Runner interface {
	Run(ctx context.Context, spec RunSpec) (exit int, err error)
}

// RunSpec is one RUN step's command. The runner holds its sandbox to
// MemoryBytes and CPUs, and ends it once it uses more memory, with an
// error wrapping ErrOutOfMemory; its time limit is Run's context's.
type RunSpec struct {
	Root        string   // the step's writable subvolume
	Args        []string // argv
	Env         []string // "K=v"
	Cwd         string   // absolute, inside Root
	UID, GID    uint32
	Groups      []uint32
	Network     string    // metadata.NetworkEgress or metadata.NetworkNone
	Output      io.Writer // the command's stdout and stderr
	MemoryBytes int64     // > 0
	CPUs        float64   // > 0
}

// Base is the image a FROM names.
type Base struct {
	Path   string               // its read-only subvolume
	Config metadata.ImageConfig // its config
	// ID is what identifies its content for the cache: the digest of a
	// pulled or built image, the subvolume of a built-in one.
	ID string
}

// Images is what a build needs of the image catalog.
type Images interface {
	// Base resolves a FROM's image: a cairn image's name, else a
	// registry reference, pulled if need be.
	Base(ctx context.Context, ref string, report Reporter) (Base, error)
	// Install makes the image rec.Name of the tree in the subvolume
	// src returns (a read-only snapshot of it; the subvolume stays the
	// caller's). If the image is there with rec.Digest already, src is
	// not called.
	Install(ctx context.Context, rec metadata.Image, src func() (string, error), report Reporter) (api.Image, error)
}

// Request is one build.
type Request struct {
	// Account is the id of the account the build runs for: its steps
	// use and fill that account's cache alone.
	Account    int64
	Context    string            // the build context: a directory cairnd extracted
	Dockerfile []byte            // the Dockerfile's text
	Name       string            // the image to make (-t)
	Source     string            // what to record as its source (the context's name)
	BuildArgs  map[string]string // --build-arg
	Network    string            // RUN steps' network: metadata.NetworkEgress (default) or NetworkNone
	NoCache    bool              // run every step; neither read nor write the cache
	// Limits bound each RUN step (ParseLimits); a field not set is its
	// default (every CPU of the host, for CPUs).
	Limits Limits
}

// Builder runs builds in one pool.
type Builder struct {
	pool   *volume.Pool
	cache  *cache.Cache
	images Images
	runner Runner
}

// New returns a builder that keeps its work and cache in pool.
func New(pool *volume.Pool, c *cache.Cache, images Images, runner Runner) *Builder {
	return &Builder{pool: pool, cache: c, images: images, runner: runner}
}

// keyVersion changes every cache key when what a step's key covers
// changes.
const keyVersion = "cairn-build-1"

// Build runs req and returns the image it made. Errors: I09 (the
// Dockerfile is invalid or uses what is not supported), I10 (a step
// failed), I11 (a RUN step ran past its time), I12 (a RUN step ran out of
// memory), the base's (I01, I03-I05), the install's (V02, I07, I08), L07.
// On error nothing of the build is left but the steps it cached.
func (b *Builder) Build(ctx context.Context, req Request, report Reporter) (api.Image, error) {
	if report == nil {
		report = func(api.Progress, string) {}
	}
	if req.Account <= 0 {
		return api.Image{}, fmt.Errorf("build for no account (id %d)", req.Account)
	}
	req.Limits = req.Limits.withDefaults()
	if req.Network == "" {
		req.Network = metadata.NetworkEgress
	}
	if req.Network != metadata.NetworkEgress && req.Network != metadata.NetworkNone {
		return api.Image{}, errdefs.New(api.CodeInvalidArgument, "unknown network mode %q for the build's RUN steps: egress or none", req.Network)
	}
	df, err := dockerfile.Parse(strings.NewReader(string(req.Dockerfile)))
	if err != nil {
		return api.Image{}, dockerfileError(err)
	}
	var base Base
	var baseSeen bool
	steps, warnings, err := dockerfile.Plan(df, req.BuildArgs, func(ref string) (metadata.ImageConfig, error) {
		report(api.Progress{Phase: api.PhaseImage}, fmt.Sprintf("Base image %s", ref))
		bs, err := b.images.Base(ctx, ref, report)
		if err != nil {
			return metadata.ImageConfig{}, err
		}
		base, baseSeen = bs, true
		return bs.Config, nil
	})
	if err != nil {
		return api.Image{}, dockerfileError(err)
	}
	for _, w := range warnings {
		report(api.Progress{Phase: api.PhaseImage}, "warning: "+w)
	}
	if !baseSeen {
		return api.Image{}, errdefs.New(api.CodeDockerfile, "the Dockerfile has no FROM")
	}

	r := &run{b: b, req: req, report: report, steps: steps}
	defer r.cleanUp()
	if r.context, err = os.Open(req.Context); err != nil {
		return api.Image{}, err
	}
	return r.do(ctx, base)
}

// dockerfileError gives a parse or plan error its code, I09, unless it
// has one (the base image's).
func dockerfileError(err error) error {
	if errdefs.HasCode(err) {
		return err
	}
	return errdefs.Wrap(api.CodeDockerfile, err, "")
}

// key is a step's cache key: a hash of the parts, each length-prefixed so
// that no two lists of parts hash alike.
func key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// configKey is the part of a step's key that its config is.
func configKey(c metadata.ImageConfig) string {
	b, _ := json.Marshal(c)
	return string(b)
}

// removeAll removes the subvolume or directory at path, if there.
func (b *Builder) removeAll(ctx context.Context, path string) {
	if path != "" {
		b.pool.Delete(context.WithoutCancel(ctx), path)
	}
}
