package build

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/bounds"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
	"github.com/cairn-sandbox/cairn/internal/image/cache"
	"github.com/cairn-sandbox/cairn/internal/image/dockerfile"
	"github.com/cairn-sandbox/cairn/internal/metadata"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// run is one build under way.
type run struct {
	b      *Builder
	req    Request
	report Reporter
	steps  []dockerfile.Step

	// work is the writable subvolume the steps change ("" until the
	// first step that runs); it holds the build's current tree unless
	// stale says where that is instead.
	work  string
	stale *tree
	// context is the build context's directory, open.
	context *os.File
}

// tree is a read-only tree the build is at: the base image or a cached
// step.
type tree struct {
	path     string // the base image's subvolume
	cacheKey string // or the cache entry's key
}

func (r *run) cleanUp() {
	if r.context != nil {
		r.context.Close()
	}
	if r.work != "" {
		r.b.removeAll(context.Background(), r.work)
	}
}

func (r *run) line(format string, args ...any) {
	r.report(api.Progress{Phase: api.PhaseImage}, fmt.Sprintf(format, args...))
}

// do runs the steps from base and installs the result.
func (r *run) do(ctx context.Context, base Base) (api.Image, error) {
	k := key(keyVersion, "from", base.ID)
	r.stale = &tree{path: base.Path}
	config := base.Config
	n := len(r.steps)
	hits, ran := 0, 0
	if slices.ContainsFunc(r.steps, func(st dockerfile.Step) bool { return st.Kind == dockerfile.RunStep }) {
		r.line("RUN steps: %s", r.req.Limits)
	}
	for i, st := range r.steps {
		title := fmt.Sprintf("Step %d/%d: %s", i+1, n, st.Text)
		before := config
		config = st.Config
		var extra string
		var sources []buildctx.Source // a COPY's, resolved once for its key and its copy
		switch {
		case st.Kind == dockerfile.FromStep:
			r.line("%s", title)
			continue
		case st.Kind == dockerfile.ConfigStep && st.MakeDir == "":
			k = key(k, "config", st.Text)
			r.line("%s", title)
			continue
		case st.Kind == dockerfile.CopyStep:
			var err error
			sources, err = buildctx.Sources(r.context, st.Sources)
			if err != nil {
				return api.Image{}, stepError(st, err)
			}
			digest, err := buildctx.Digest(ctx, sources)
			if err != nil {
				return api.Image{}, stepError(st, err)
			}
			extra = digest
		case st.Kind == dockerfile.RunStep:
			extra = "network=" + r.req.Network + "\x00" + strings.Join(st.Env, "\x00")
		}
		k = key(k, "step", st.Text, configKey(before), extra)
		stepKey := cache.StepKey(r.req.Account, k)
		if !r.req.NoCache && r.b.cache.Has(stepKey) {
			r.line("%s (cached)", title)
			r.stale = &tree{cacheKey: stepKey}
			hits++
			continue
		}
		r.line("%s", title)
		if err := r.ensureWork(ctx); err != nil {
			return api.Image{}, err
		}
		if err := r.runStep(ctx, st, before, sources); err != nil {
			return api.Image{}, err
		}
		ran++
		if !r.req.NoCache {
			if err := r.b.cache.Put(ctx, stepKey, r.work); err != nil {
				return api.Image{}, poolError(err)
			}
		}
	}
	digest := "sha256:" + key(k, "image", configKey(config))
	source := "build"
	if r.req.Source != "" {
		source = "build:" + r.req.Source
	}
	rec := metadata.Image{Name: r.req.Name, Digest: digest, Source: source, Config: config}
	img, err := r.b.images.Install(ctx, rec, func() (string, error) {
		if err := r.ensureWork(ctx); err != nil {
			return "", err
		}
		return r.work, nil
	}, r.report)
	if err != nil {
		return api.Image{}, err
	}
	r.line("Built image %s (%s): %d steps run, %d from the cache", img.Name, digest[:19], ran, hits)
	return img, nil
}

// ensureWork makes work hold the build's current tree.
func (r *run) ensureWork(ctx context.Context) error {
	if r.stale == nil {
		return nil
	}
	if r.work != "" {
		if err := r.b.pool.Delete(ctx, r.work); err != nil {
			return err
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	r.work = r.b.pool.TempPath("build-" + hex.EncodeToString(rnd[:]))
	from := *r.stale
	if from.cacheKey == "" && from.path == "" { // FROM scratch
		if err := r.b.pool.Create(ctx, r.work); err != nil {
			return poolError(err)
		}
	} else if from.cacheKey == "" {
		if err := r.b.pool.Snapshot(ctx, from.path, r.work, false); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return errdefs.New(api.CodeNoImage, "the base image was deleted during the build: build again")
			}
			return poolError(err)
		}
	} else {
		ok, err := r.b.cache.Use(ctx, from.cacheKey, func(p string) error { return r.b.pool.Snapshot(ctx, p, r.work, false) })
		if err != nil {
			return poolError(err)
		}
		if !ok {
			return errdefs.New(api.CodeImageBuildFailed, "the build cache was pruned while this build used it: build again")
		}
	}
	r.stale = nil
	return nil
}

// runStep does st to work, under the config before it; a COPY copies
// sources (resolved for its key).
func (r *run) runStep(ctx context.Context, st dockerfile.Step, cfg metadata.ImageConfig, sources []buildctx.Source) error {
	root, err := os.Open(r.work)
	if err != nil {
		return err
	}
	defer root.Close()
	switch st.Kind {
	case dockerfile.ConfigStep: // WORKDIR, made as its USER's
		u, err := buildctx.LookupUser(root, st.Config.User)
		if err != nil {
			return stepError(st, err)
		}
		return stepError(st, mkdirInRoot(root, st.MakeDir, u.UID, u.GID))
	case dockerfile.CopyStep:
		opts := buildctx.CopyOptions{ExtractArchives: st.Add, WorkDir: workdirOf(cfg)}
		if st.Chown != "" {
			u, err := buildctx.LookupUser(root, st.Chown)
			if err != nil {
				return stepError(st, err)
			}
			opts.UID, opts.GID = u.UID, u.GID
		}
		if st.Chmod != nil {
			m := os.FileMode(*st.Chmod)
			opts.Chmod = &m
		}
		return stepError(st, buildctx.Copy(ctx, root, sources, st.Dest, opts))
	case dockerfile.RunStep:
		return r.runCommand(ctx, root, st, cfg)
	}
	return fmt.Errorf("step of kind %v: nothing to do", st.Kind)
}

// runCommand runs a RUN step's command in a sandbox over work.
func (r *run) runCommand(ctx context.Context, root *os.File, st dockerfile.Step, cfg metadata.ImageConfig) error {
	u, err := buildctx.LookupUser(root, cfg.User)
	if err != nil {
		return stepError(st, err)
	}
	cwd := workdirOf(cfg)
	if err := mkdirInRoot(root, cwd, 0, 0); err != nil {
		return stepError(st, fmt.Errorf("working directory %s: %w", cwd, err))
	}
	out := &lineWriter{emit: func(l string) { r.report(api.Progress{Phase: api.PhaseImage}, " | "+l) }}
	lim := r.req.Limits
	sctx, cancel := context.WithTimeoutCause(ctx, lim.StepTimeout, errStepTimeout)
	exit, err := r.b.runner.Run(sctx, RunSpec{Root: r.work, Args: st.Args, Env: runEnv(st.Env, u.Home),
		Cwd: cwd, UID: u.UID, GID: u.GID, Groups: u.Groups, Network: r.req.Network, Output: out,
		MemoryBytes: lim.MemoryBytes, CPUs: lim.CPUs})
	timedOut := err != nil && errors.Is(context.Cause(sctx), errStepTimeout)
	cancel()
	out.Flush()
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return ctx.Err()
	case timedOut:
		return errdefs.New(api.CodeStepTimeout, "Dockerfile:%d: %s: ended after its time limit of %s (--step-timeout)", st.Line, st.Text, lim.StepTimeout)
	case errors.Is(err, ErrOutOfMemory):
		return errdefs.Wrap(api.CodeStepOutOfMemory, err, "Dockerfile:%d: %s: ended for using more than its memory limit of %s (--memory)",
			st.Line, st.Text, bounds.FormatSize(lim.MemoryBytes))
	default:
		return runError(st, err)
	}
	if exit != 0 {
		return errdefs.New(api.CodeBuildStepFailed, "Dockerfile:%d: %s: the command exited with status %d", st.Line, st.Text, exit)
	}
	return nil
}

// errStepTimeout is the cause of a RUN step's context once its time
// limit is reached.
var errStepTimeout = errors.New("the step's time limit was reached")

// runError is the error of a RUN step whose sandbox could not run it:
// the sandbox's code if it has one (N01: no network), else I02, with the
// step's place.
func runError(st dockerfile.Step, err error) error {
	code := api.CodeImageBuildFailed
	if errdefs.HasCode(err) {
		code = errdefs.CodeOf(err)
	}
	return errdefs.Wrap(code, err, "Dockerfile:%d: %s", st.Line, st.Text)
}

// defaultPath is the PATH a command gets when the image sets none, as
// Docker gives.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// runEnv is env with PATH and HOME set if it has neither.
func runEnv(env []string, home string) []string {
	out := append([]string(nil), env...)
	has := func(k string) bool {
		for _, kv := range out {
			if strings.HasPrefix(kv, k+"=") {
				return true
			}
		}
		return false
	}
	if !has("PATH") {
		out = append(out, defaultPath)
	}
	if !has("HOME") {
		if home == "" {
			home = "/root"
		}
		out = append(out, "HOME="+home)
	}
	return out
}

func workdirOf(cfg metadata.ImageConfig) string {
	if cfg.WorkingDir == "" {
		return "/"
	}
	return path.Clean("/" + cfg.WorkingDir)
}

// stepError gives err, from doing st, its place in the Dockerfile and a
// code: I10 unless it has one.
func stepError(st dockerfile.Step, err error) error {
	if err == nil {
		return nil
	}
	if errdefs.HasCode(err) {
		return err
	}
	if isNoSpace(err) {
		return errdefs.Wrap(api.CodePoolFull, err, "Dockerfile:%d: %s: the pool is full", st.Line, st.Text)
	}
	return errdefs.Wrap(api.CodeBuildStepFailed, err, "Dockerfile:%d: %s", st.Line, st.Text)
}

func poolError(err error) error {
	if isNoSpace(err) {
		return errdefs.Wrap(api.CodePoolFull, err, "build: the pool is full")
	}
	return err
}

func isNoSpace(err error) bool { return volume.IsFull(err) }

// mkdirInRoot makes dir (absolute) and its parents inside root, as a
// container would see them: symbolic links already in the tree are
// followed but never out of it (RESOLVE_IN_ROOT); each new directory is
// made by name in its resolved parent, 0755, owned by uid:gid.
func mkdirInRoot(root *os.File, dir string, uid, gid uint32) error {
	parts := strings.Split(strings.Trim(path.Clean("/"+dir), "/"), "/")
	prefix := ""
	for _, p := range parts {
		if p == "" {
			continue
		}
		next := prefix + "/" + p
		fd, err := openInRoot(root, next)
		if err == nil {
			unix.Close(fd)
			prefix = next
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: %w", next, err)
		}
		parent, err := openInRoot(root, prefix+"/")
		if err != nil {
			return fmt.Errorf("%s: %w", prefix+"/", err)
		}
		err = unix.Mkdirat(parent, p, 0o755)
		if err == nil && (uid != 0 || gid != 0) {
			err = unix.Fchownat(parent, p, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW)
		}
		unix.Close(parent)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("make %s: %w", next, err)
		}
		if fd, err := openInRoot(root, next); err != nil {
			return fmt.Errorf("%s: %w", next, err)
		} else {
			unix.Close(fd)
		}
		prefix = next
	}
	return nil
}

// openInRoot opens the directory name inside root, resolved as if root
// were "/".
func openInRoot(root *os.File, name string) (int, error) {
	return unix.Openat2(int(root.Fd()), strings.TrimPrefix(name, "/")+map[bool]string{true: "."}[name == "/" || name == ""], &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// lineWriter passes what is written to emit a line at a time; a line
// past maxLine is cut into pieces.
type lineWriter struct {
	emit func(string)
	buf  bytes.Buffer
}

const maxLine = 4096

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		b := w.buf.Bytes()
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(b) >= maxLine {
				w.emit(string(b[:maxLine]))
				w.buf.Next(maxLine)
				continue
			}
			return len(p), nil
		}
		line := strings.TrimRight(string(b[:i]), "\r")
		w.buf.Next(i + 1)
		w.emit(line)
	}
}

// Flush emits what is left without a newline.
func (w *lineWriter) Flush() {
	if w.buf.Len() > 0 {
		w.emit(w.buf.String())
		w.buf.Reset()
	}
}
