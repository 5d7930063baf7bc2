package image

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/cache"
	"github.com/cairn-sandbox/cairn/internal/image/oci"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// Images made by cairn image build (package build): the catalog gives a
// build its base and records its result, like a pulled image's.

// BaseImage is an image a build starts from.
type BaseImage struct {
	Path   string // its read-only subvolume; "" for scratch, an empty tree
	Config metadata.ImageConfig
	// ID identifies its content: "digest:" and the digest of a pulled,
	// imported or built image; "builtin:NAME:" and the id of a built-in
	// image's subvolume (a new one when it is built again).
	ID string
}

// Base returns the image a Dockerfile's FROM ref names: a cairn image of
// that name (a built-in one is built first if need be); else a registry
// reference: the image pulled from it before (named after it, see
// DefaultName, with ref as its source), or pulled now with fetch.
func (c *Catalog) Base(ctx context.Context, ref string, fetch oci.FetchOptions, report Reporter) (BaseImage, error) {
	if report == nil {
		report = func(api.Progress, string) {}
	}
	if ref == "scratch" {
		return BaseImage{ID: "scratch"}, nil // an empty tree
	}
	if namePattern.MatchString(ref) && c.Known(ref) {
		return c.baseNamed(ctx, ref, report)
	}
	var nopts []name.Option
	if fetch.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return BaseImage{}, errdefs.New(api.CodeNoImage, "FROM %s: no cairn image of that name, nor an image reference (%v)", ref, err)
	}
	local := DefaultName(r)
	if img, ok := c.pulled(ctx, local); ok && img.Source == ref {
		report.step(fmt.Sprintf("Using image %s, pulled from %s", local, ref))
		return c.baseNamed(ctx, local, report)
	}
	if _, err := c.Pull(ctx, PullRequest{Ref: ref, Name: local, Fetch: fetch}, report); err != nil {
		return BaseImage{}, err
	}
	return c.baseNamed(ctx, local, report)
}

func (c *Catalog) baseNamed(ctx context.Context, name string, report Reporter) (BaseImage, error) {
	path, err := c.EnsureWithProgress(ctx, name, report)
	if err != nil {
		return BaseImage{}, err
	}
	if img, ok := c.pulled(ctx, name); ok {
		return BaseImage{Path: path, Config: img.Config, ID: "digest:" + img.Digest}, nil
	}
	id, err := c.pool.SubvolumeID(path)
	if err != nil {
		return BaseImage{}, err
	}
	return BaseImage{Path: path, ID: fmt.Sprintf("builtin:%s:%d", name, id)}, nil
}

// InstallBuilt makes the image rec.Name of the tree in the subvolume
// src returns (snapshotted read-only; the subvolume stays the caller's),
// recorded as rec says. The image's earlier build under that name is
// replaced unless sandboxes or checkpoints use it (I08); the same digest
// again changes nothing and does not call src. A built-in image's name,
// or a pulled or imported image's, is I07; a bad one V02.
func (c *Catalog) InstallBuilt(ctx context.Context, rec metadata.Image, src func() (string, error), report Reporter) (api.Image, error) {
	if report == nil {
		report = func(api.Progress, string) {}
	}
	if c.store == nil {
		return api.Image{}, errors.New("image catalog without a metadata store: building is off")
	}
	if err := c.checkNewName(rec.Name); err != nil {
		return api.Image{}, err
	}
	unlock := c.lockName(rec.Name)
	defer unlock()
	var replace *metadata.Image
	if have, err := c.store.Image(ctx, rec.Name); err == nil {
		if have.Digest == rec.Digest {
			report.step(fmt.Sprintf("Image %s is unchanged", rec.Name))
			return c.apiImage(have), nil
		}
		if have.Source != "build" && !strings.HasPrefix(have.Source, "build:") {
			// Only a build replaces a build: a pulled or imported image of
			// that name stays whoever asks.
			return api.Image{}, errdefs.New(api.CodeImageExists, "image %s exists and was not built (%s): build with another -t, or delete it first", rec.Name, describe(have.Source))
		}
		sandboxes, checkpoints, err := c.store.ImageUsers(ctx, rec.Name)
		if err != nil {
			return api.Image{}, err
		}
		if sandboxes > 0 || checkpoints > 0 {
			return api.Image{}, errdefs.New(api.CodeImageInUse, "image %s is used by %d sandboxes and %d checkpoints: build with another -t, or delete them first", rec.Name, sandboxes, checkpoints)
		}
		replace = &have
	} else if !errors.Is(err, metadata.ErrNotFound) {
		return api.Image{}, err
	}
	// The new tree first, then the old image goes: a failure before the
	// swap leaves the old one whole.
	dir, err := src()
	if err != nil {
		return api.Image{}, err
	}
	if err := prepareRoot(dir); err != nil {
		return api.Image{}, err
	}
	size, err := treeBytes(dir)
	if err != nil {
		return api.Image{}, err
	}
	rec.SizeBytes = size
	rec.DiskPath = filepath.ToSlash(filepath.Join("images", rec.Name))
	rec.CreatedAt = c.now().UTC()
	dst := c.pool.ImagePath(rec.Name)
	if replace != nil {
		report.step(fmt.Sprintf("Replacing image %s (%s)", rec.Name, shortDigest(replace.Digest)))
		if err := c.store.DeleteImage(ctx, rec.Name); err != nil {
			return api.Image{}, err
		}
		if err := c.pool.Delete(ctx, dst); err != nil {
			return api.Image{}, err
		}
	}
	if err := c.pool.Snapshot(ctx, dir, dst, true); err != nil {
		return api.Image{}, poolError(err, rec.Name)
	}
	return c.record(ctx, rec, dst)
}

// CheckBuildName fails as InstallBuilt would on a build's name before
// the build runs: V02 for a bad name, I07 for a built-in image's or a
// pulled or imported one's.
func (c *Catalog) CheckBuildName(ctx context.Context, name string) error {
	if err := c.checkNewName(name); err != nil {
		return err
	}
	if have, ok := c.pulled(ctx, name); ok && have.Source != "build" && !strings.HasPrefix(have.Source, "build:") {
		return errdefs.New(api.CodeImageExists, "image %s exists and was not built (%s): build with another -t, or delete it first", name, describe(have.Source))
	}
	return nil
}

// checkNewName checks the name of an image to pull, import or build.
func (c *Catalog) checkNewName(name string) error {
	if !namePattern.MatchString(name) {
		return errdefs.New(api.CodeInvalidArgument, "invalid image name %q: lower-case letters, digits, '.', '_' and '-', at most 63, starting with a letter or digit", name)
	}
	if _, builtin := c.builders[name]; builtin {
		return errdefs.New(api.CodeImageExists, "%s is a built-in image's name: choose another", name)
	}
	return nil
}

// WorkPath is the directory of the pool's work area, where a build's
// context is received (it is emptied when cairnd starts).
func (c *Catalog) WorkPath() string { return c.pool.TempPath("") }

// Cache is the pool's cache the catalog keeps layer chains in; builds
// keep their steps there too, so that one prune empties both.
func (c *Catalog) Cache() *cache.Cache { return c.cache }
