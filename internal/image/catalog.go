package image

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/cache"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Progress receives one human-readable line per step of a build.
type Progress func(line string)

// Reporter receives each step of a build as a line for people and its
// machine-readable side: phase api.PhaseImage (api.PhaseWait while another
// request builds the image), with counts when the step has them.
type Reporter func(p api.Progress, line string)

// step reports a line of phase image without counts.
func (r Reporter) step(line string) { r(api.Progress{Phase: api.PhaseImage}, line) }

// builder fills dir with an image's tree: an empty writable subvolume, or
// a writable snapshot of the image base when it names one.
type builder struct {
	description string
	base        string // a built-in image this one adds to; "": none
	build       func(ctx context.Context, dir string, report Reporter) error
}

// Catalog knows the images cairn can build and builds each at most once at a
// time.
type Catalog struct {
	pool     *volume.Pool
	builders map[string]builder
	store    metadata.Store // the pulled images; nil: none
	cache    *cache.Cache   // the pool's cache: trees of layer chains
	now      func() time.Time

	mu       sync.Mutex
	building map[string]*build
	naming   map[string]chan struct{} // pulls and deletes in progress, by name
}

type build struct {
	done chan struct{}
	err  error
}

// New returns the catalog of built-in images stored in pool, and of the
// images pulled into it recorded in store (nil: pulling is off). cacheDir
// keeps downloaded packages between builds.
func New(pool *volume.Pool, cacheDir string, store metadata.Store) *Catalog {
	return &Catalog{
		pool: pool, store: store, now: time.Now, naming: map[string]chan struct{}{}, cache: cache.New(pool),
		builders: map[string]builder{
			"busybox": {description: "BusyBox from Debian's busybox-static: a shell and core tools, starts in milliseconds",
				build: buildBusybox},
			"debian": {description: "Debian 12 bookworm, minbase (debootstrap), with apt, curl, procps and sqlite3",
				build: debianBuilder(cacheDir)},
			"python": {description: "debian with Debian's Python 3.11, pip, venv and git", base: "debian",
				build: aptBuilder(cacheDir, "python", "python3", "python3-pip", "python3-venv", "git")},
			"node": {description: "debian with Debian's Node.js 18, npm and git", base: "debian",
				build: aptBuilder(cacheDir, "node", "nodejs", "npm", "git")},
		},
		building: map[string]*build{},
	}
}

// builtin returns the builder of name when name is a built-in image that
// no pulled image shadows: one pulled under that name before cairn had it
// built in stays what the name means.
func (c *Catalog) builtin(ctx context.Context, name string) (builder, bool) {
	b, ok := c.builders[name]
	if !ok {
		return builder{}, false
	}
	if _, pulled := c.pulled(ctx, name); pulled {
		return builder{}, false
	}
	return b, true
}

// Builtin reports whether name is a built-in image (no pulled one
// shadowing it): every host makes it where it is first used.
func (c *Catalog) Builtin(name string) bool {
	_, ok := c.builtin(context.Background(), name)
	return ok
}

// Known reports whether name is an image the catalog can provide.
func (c *Catalog) Known(name string) bool {
	if _, ok := c.builders[name]; ok {
		return true
	}
	_, ok := c.pulled(context.Background(), name)
	return ok
}

// List returns every image, built or not, by name.
func (c *Catalog) List() ([]api.Image, error) {
	var out []api.Image
	for name, b := range c.builders {
		if _, ok := c.builtin(context.Background(), name); !ok {
			continue
		}
		img := api.Image{Name: name, Description: b.description}
		ok, err := volume.IsSubvolume(c.pool.ImagePath(name))
		if err != nil {
			return nil, err
		}
		if ok {
			img.Ready = true
			if fi, err := os.Stat(c.pool.ImagePath(name)); err == nil {
				img.CreatedAt = fi.ModTime().UTC()
			}
		}
		out = append(out, img)
	}
	if c.store != nil {
		pulled, err := c.store.Images(context.Background())
		if err != nil {
			return nil, err
		}
		for _, p := range pulled {
			out = append(out, c.apiImage(p))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Ensure returns the path of the image subvolume name, building it first if
// needed. Concurrent callers for one image share a single build. progress
// gets the text of what EnsureWithProgress reports.
func (c *Catalog) Ensure(ctx context.Context, name string, progress Progress) (string, error) {
	return c.EnsureWithProgress(ctx, name, func(_ api.Progress, line string) { progress(line) })
}

// EnsureWithProgress is Ensure reporting each step with its phase and
// counts; report may be nil.
func (c *Catalog) EnsureWithProgress(ctx context.Context, name string, report Reporter) (string, error) {
	if report == nil {
		report = func(api.Progress, string) {}
	}
	b, ok := c.builtin(ctx, name)
	if !ok {
		if img, found := c.pulled(ctx, name); found {
			path := c.pool.ImagePath(img.Name)
			if ready, err := volume.IsSubvolume(path); err != nil || !ready {
				return "", errdefs.New(api.CodeNoImage, "image %s is recorded but its files are gone: delete it and pull it again", name)
			}
			return path, nil
		}
		return "", errdefs.New(api.CodeNoImage, "no image named %q (see `cairn image list`)", name)
	}
	path := c.pool.ImagePath(name)
	for {
		if ready, err := volume.IsSubvolume(path); err != nil {
			return "", err
		} else if ready {
			return path, nil
		}
		c.mu.Lock()
		cur, running := c.building[name]
		if !running {
			cur = &build{done: make(chan struct{})}
			c.building[name] = cur
			c.mu.Unlock()
			cur.err = c.build(ctx, name, b, report)
			c.mu.Lock()
			delete(c.building, name)
			c.mu.Unlock()
			close(cur.done)
			if cur.err != nil {
				return "", cur.err
			}
			return path, nil
		}
		c.mu.Unlock()
		report(api.Progress{Phase: api.PhaseWait}, fmt.Sprintf("Waiting for image %s being built by another request", name))
		select {
		case <-cur.done:
			if cur.err != nil {
				return "", cur.err
			}
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

func (c *Catalog) build(ctx context.Context, name string, b builder, report Reporter) error {
	tmp := c.pool.TempPath("image-" + name)
	if err := c.pool.Delete(ctx, tmp); err != nil {
		return err
	}
	report.step(fmt.Sprintf("Building image %s", name))
	if b.base == "" {
		if err := c.pool.Create(ctx, tmp); err != nil {
			return errdefs.Wrap(api.CodeImageBuildFailed, err, "build image %s", name)
		}
	} else {
		// The base is built first if need be (shared with any other
		// request for it), then its files are the start of this one's.
		base, err := c.EnsureWithProgress(ctx, b.base, report)
		if err != nil {
			return errdefs.Wrap(api.CodeImageBuildFailed, err, "build image %s from image %s", name, b.base)
		}
		if err := c.pool.Snapshot(ctx, base, tmp, false); err != nil {
			return errdefs.Wrap(api.CodeImageBuildFailed, err, "build image %s from image %s", name, b.base)
		}
		report.step(fmt.Sprintf("Image %s starts from image %s", name, b.base))
	}
	// Whatever happens, the work subvolume goes; only the read-only snapshot stays.
	defer c.pool.Delete(context.WithoutCancel(ctx), tmp)
	if err := b.build(ctx, tmp, report); err != nil {
		return errdefs.Wrap(api.CodeImageBuildFailed, err, "build image %s", name)
	}
	if err := prepareRoot(tmp); err != nil {
		return errdefs.Wrap(api.CodeImageBuildFailed, err, "build image %s", name)
	}
	if err := c.pool.Snapshot(ctx, tmp, c.pool.ImagePath(name), true); err != nil {
		return errdefs.Wrap(api.CodeImageBuildFailed, err, "build image %s", name)
	}
	report.step(fmt.Sprintf("Image %s ready", name))
	return nil
}
