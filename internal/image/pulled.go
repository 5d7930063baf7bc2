package image

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/oci"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Pulled images. Besides the built-in images, the catalog holds images
// pulled from registries: each a read-only subvolume images/NAME in the
// pool, like the built-in ones, and a row in the metadata store (its
// digest, where it came from, its config). Two names of one digest share
// nothing but are snapshots of one another (instant).

// namePattern is what an image's name must match (as sandbox names, with
// dots and underscores: python-3.12).
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// notInName is what DefaultName replaces with '-'.
var notInName = regexp.MustCompile(`[^a-z0-9._-]+`)

// PullRequest is what Pull pulls.
type PullRequest struct {
	Ref   string // a registry reference: host/repo:tag, repo@sha256:…, python:3.12 (Docker Hub)
	Name  string // the image's name in cairn; default from Ref (DefaultName)
	Fetch oci.FetchOptions
}

// DefaultName is the name an image pulled from ref gets by default: the
// last part of its repository and its tag ("python-3.12"), or the first
// 12 hex digits of its digest.
func DefaultName(ref name.Reference) string {
	repo := path.Base(ref.Context().RepositoryStr())
	id := ref.Identifier()
	if _, hex, ok := strings.Cut(id, "sha256:"); ok && len(hex) >= 12 {
		id = hex[:12]
	}
	n := strings.ToLower(repo + "-" + id)
	n = notInName.ReplaceAllString(n, "-")
	n = strings.TrimLeft(n, "._-")
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// Pull fetches req.Ref from its registry and makes it the image
// req.Name: the layers are checked and applied into a new read-only
// subvolume, and the image recorded. Pulling a digest the catalog holds
// already (under this name or another) fetches no layer. Errors carry
// V02 (a bad name or reference), I03-I07, L07 (the pool is full); on
// error nothing is left.
func (c *Catalog) Pull(ctx context.Context, req PullRequest, report Reporter) (api.Image, error) {
	if report == nil {
		report = func(api.Progress, string) {}
	}
	if c.store == nil {
		return api.Image{}, errors.New("image catalog without a metadata store: pulling is off")
	}
	report.step(fmt.Sprintf("Resolving %s", req.Ref))
	img, ref, err := oci.Fetch(ctx, req.Ref, req.Fetch)
	if err != nil {
		return api.Image{}, err
	}
	if req.Name == "" {
		req.Name = DefaultName(ref)
	}
	return c.install(ctx, img, req.Name, req.Ref, report)
}

// install makes img, from source, the image called name (see Pull).
func (c *Catalog) install(ctx context.Context, img v1.Image, name, source string, report Reporter) (api.Image, error) {
	if err := c.checkNewName(name); err != nil {
		return api.Image{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return api.Image{}, errdefs.Wrap(api.CodeImageDamaged, err, "image %s", source)
	}

	unlock := c.lockName(name)
	defer unlock()
	if have, err := c.store.Image(ctx, name); err == nil {
		if have.Digest == digest.String() {
			report.step(fmt.Sprintf("Image %s is %s already", name, have.Digest))
			return c.apiImage(have), nil
		}
		return api.Image{}, errdefs.New(api.CodeImageExists, "image %s exists with another digest (%s): delete it first, or choose another --name", name, have.Digest)
	} else if !errors.Is(err, metadata.ErrNotFound) {
		return api.Image{}, err
	}

	rec := metadata.Image{Name: name, Digest: digest.String(), Source: source,
		DiskPath: filepath.ToSlash(filepath.Join("images", name)), CreatedAt: c.now().UTC()}
	dst := c.pool.ImagePath(name)
	if same, err := c.store.ImagesByDigest(ctx, rec.Digest); err == nil && len(same) > 0 {
		// The same image under another name: its disk, instantly.
		src := same[0]
		report.step(fmt.Sprintf("Image %s is %s's digest: sharing its files", name, src.Name))
		rec.Config, rec.SizeBytes = src.Config, src.SizeBytes
		if err := c.pool.Snapshot(ctx, c.pool.ImagePath(src.Name), dst, true); err != nil {
			return api.Image{}, poolError(err, name)
		}
		return c.record(ctx, rec, dst)
	}

	cf, err := oci.Config(img)
	if err != nil {
		return api.Image{}, err
	}
	chains := oci.ChainIDs(cf.RootFS.DiffIDs)
	sizes, err := layerSizes(img)
	if err != nil {
		return api.Image{}, errdefs.Wrap(api.CodeImageDamaged, err, "image %s: manifest", source)
	}
	tmp := c.pool.TempPath("pull-" + name)
	if err := c.pool.Delete(ctx, tmp); err != nil {
		return api.Image{}, err
	}
	from, err := c.startTree(ctx, chains, tmp)
	if err != nil {
		return api.Image{}, poolError(err, name)
	}
	defer c.pool.Delete(context.WithoutCancel(ctx), tmp)
	root, err := os.Open(tmp)
	if err != nil {
		return api.Image{}, err
	}
	res, err := oci.Unpack(ctx, img, root, oci.UnpackOptions{
		From:    from,
		Applied: c.keepLayers(ctx, tmp, keptChains(sizes)),
		Report: func(p oci.Progress) {
			if p.Cached {
				report.step(fmt.Sprintf("Layer %d/%d %s: cached", p.Layer, p.Layers, shortDigest(p.Digest)))
				return
			}
			report(api.Progress{Phase: api.PhaseImage, Done: p.Bytes, Total: p.Size, Unit: api.UnitBytes},
				fmt.Sprintf("Layer %d/%d %s: %s of %s", p.Layer, p.Layers, shortDigest(p.Digest), mib(p.Bytes), mib(p.Size)))
		},
	})
	root.Close()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || isNoSpace(err) {
			return api.Image{}, poolError(err, name)
		}
		return api.Image{}, err
	}
	if err := prepareRoot(tmp); err != nil {
		return api.Image{}, err
	}
	size, err := treeBytes(tmp)
	if err != nil {
		return api.Image{}, err
	}
	rec.Config, rec.SizeBytes = res.Config, size
	if err := c.pool.Snapshot(ctx, tmp, dst, true); err != nil {
		return api.Image{}, poolError(err, name)
	}
	cached := ""
	if from > 0 {
		cached = fmt.Sprintf(" (%d from the layer cache)", from)
	}
	report.step(fmt.Sprintf("Image %s ready: %d layers%s, %s, %s", name, res.Layers, cached, mib(size), res.Digest))
	return c.record(ctx, rec, dst)
}

// ImportRequest is what Import imports.
type ImportRequest struct {
	Path   string // the archive: a docker save or OCI layout tar
	Name   string // the image's name in cairn (required)
	Source string // what to record as its source: "import:<file name>"
}

// Import makes the image in the archive req.Path the image req.Name, as
// Pull does with a registry's. Errors: V02 (no or bad name), I03 (no
// image for this platform), I06 (not an image archive, or a damaged
// one), I07, L07.
func (c *Catalog) Import(ctx context.Context, req ImportRequest, report Reporter) (api.Image, error) {
	if report == nil {
		report = func(api.Progress, string) {}
	}
	if c.store == nil {
		return api.Image{}, errors.New("image catalog without a metadata store: importing is off")
	}
	if req.Name == "" {
		return api.Image{}, errdefs.New(api.CodeInvalidArgument, "import needs the image's name (--name)")
	}
	scratch, err := os.MkdirTemp(filepath.Dir(req.Path), "layout-")
	if err != nil {
		return api.Image{}, err
	}
	defer os.RemoveAll(scratch)
	report.step(fmt.Sprintf("Reading %s", req.Source))
	img, err := oci.OpenArchive(req.Path, scratch)
	if err != nil {
		return api.Image{}, err
	}
	return c.install(ctx, img, req.Name, req.Source, report)
}

// record stores rec, whose disk is dst; if it cannot, the disk goes.
func (c *Catalog) record(ctx context.Context, rec metadata.Image, dst string) (api.Image, error) {
	if err := c.store.CreateImage(ctx, rec); err != nil {
		c.pool.Delete(context.WithoutCancel(ctx), dst)
		if errors.Is(err, metadata.ErrConflict) {
			return api.Image{}, errdefs.New(api.CodeImageExists, "image %s exists", rec.Name)
		}
		return api.Image{}, err
	}
	return c.apiImage(rec), nil
}

// Delete deletes image name: a pulled one that no sandbox or checkpoint
// uses (I08 otherwise) goes for good; a built-in one's files go and are
// built again when next used. I01 if there is no such image.
func (c *Catalog) Delete(ctx context.Context, name string) error {
	unlock := c.lockName(name)
	defer unlock()
	if c.store != nil {
		sandboxes, checkpoints, err := c.store.ImageUsers(ctx, name)
		if err != nil {
			return err
		}
		if sandboxes > 0 || checkpoints > 0 {
			return errdefs.New(api.CodeImageInUse, "image %s is used by %d sandboxes and %d checkpoints: delete them first", name, sandboxes, checkpoints)
		}
		if _, err := c.store.Image(ctx, name); err == nil {
			if err := c.store.DeleteImage(ctx, name); err != nil {
				return err
			}
			return c.pool.Delete(ctx, c.pool.ImagePath(name))
		} else if !errors.Is(err, metadata.ErrNotFound) {
			return err
		}
	}
	if _, ok := c.builders[name]; ok {
		return c.pool.Delete(ctx, c.pool.ImagePath(name))
	}
	return errdefs.New(api.CodeNoImage, "no image named %q (see `cairn image list`)", name)
}

// Info returns image name. I01.
func (c *Catalog) Info(ctx context.Context, name string) (api.Image, error) {
	all, err := c.List()
	if err != nil {
		return api.Image{}, err
	}
	for _, img := range all {
		if img.Name == name {
			return img, nil
		}
	}
	return api.Image{}, errdefs.New(api.CodeNoImage, "no image named %q (see `cairn image list`)", name)
}

// Config returns the config of image name (the zero value for a built-in
// or unknown image): the defaults of its sandboxes' processes.
func (c *Catalog) Config(ctx context.Context, name string) metadata.ImageConfig {
	img, _ := c.pulled(ctx, name)
	return img.Config
}

// pulled returns the stored image name, if there is one.
func (c *Catalog) pulled(ctx context.Context, name string) (metadata.Image, bool) {
	if c.store == nil {
		return metadata.Image{}, false
	}
	img, err := c.store.Image(ctx, name)
	return img, err == nil
}

func (c *Catalog) apiImage(img metadata.Image) api.Image {
	cfg := img.Config
	return api.Image{Name: img.Name, Description: describe(img.Source), Ready: true, CreatedAt: img.CreatedAt,
		Digest: img.Digest, Source: img.Source, SizeBytes: img.SizeBytes,
		Config: &api.ImageConfig{Env: cfg.Env, Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, WorkingDir: cfg.WorkingDir, User: cfg.User, ExposedPorts: cfg.ExposedPorts}}
}

// describe says where an image with source came from.
func describe(source string) string {
	switch {
	case source == "build":
		return "built"
	case strings.HasPrefix(source, "build:"):
		return "built from " + strings.TrimPrefix(source, "build:")
	case strings.HasPrefix(source, "import:"):
		return "imported from " + strings.TrimPrefix(source, "import:")
	}
	return "pulled from " + source
}

// lockName serializes pulls and deletes of one image name.
func (c *Catalog) lockName(name string) func() {
	c.mu.Lock()
	for c.naming[name] != nil {
		ch := c.naming[name]
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	ch := make(chan struct{})
	c.naming[name] = ch
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.naming, name)
		c.mu.Unlock()
		close(ch)
	}
}

func poolError(err error, name string) error {
	if isNoSpace(err) {
		return errdefs.Wrap(api.CodePoolFull, err, "image %s: the pool is full", name)
	}
	return fmt.Errorf("image %s: %w", name, err)
}

func isNoSpace(err error) bool { return volume.IsFull(err) }

func shortDigest(d string) string {
	if _, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return hex[:12]
	}
	return d
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// ReceiveArchive writes an uploaded archive (a tar, or a gzip of one) to
// a new file in the pool's work area, and returns its path; the caller
// removes it. A full pool is L07.
func (c *Catalog) ReceiveArchive(body io.Reader) (string, error) {
	work := c.pool.TempPath("")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(work, "import-*.tar")
	if err != nil {
		return "", err
	}
	br := bufio.NewReaderSize(body, 64<<10)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return "", errdefs.Wrap(api.CodeImageDamaged, err, "the archive")
		}
		defer zr.Close()
		src = zr
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		if isNoSpace(err) {
			return "", errdefs.Wrap(api.CodePoolFull, err, "receive the archive: the pool is full")
		}
		return "", fmt.Errorf("receive the archive: %w", err)
	}
	return f.Name(), nil
}
