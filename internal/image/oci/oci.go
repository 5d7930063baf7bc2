// Package oci reads OCI and Docker images, from a registry or from an
// archive, and unpacks one into a directory: each layer checked against
// its digests and applied in order (package unpack), the parts of its
// config cairn applies extracted.
//
// What comes from a registry or an archive is untrusted: the manifest and
// config are checked against their digests (go-containerregistry does it
// for what it fetches), every compressed layer against its digest and
// every uncompressed one against the config's diff id, here, as it is
// read; package unpack keeps the files inside the root.
package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/unpack"
	"github.com/cairn-sandbox/cairn/internal/metadata"
)

// FetchOptions say how to reach a registry.
type FetchOptions struct {
	// Insecure allows plain HTTP (a registry on loopback or a private
	// network without TLS).
	Insecure bool
	// Username and Password are the registry's credentials; without
	// them, the docker config file's (~/.docker/config.json, or
	// $DOCKER_CONFIG) are used, then none.
	Username, Password string
	// Transport is the HTTP transport (default: a clone of
	// http.DefaultTransport that ignores the environment's proxy).
	Transport http.RoundTripper
	// Untrusted is a pull asked by someone who is not the host's
	// administrator (an API token below admin): the docker config
	// file's credentials are not used, and a registry at a loopback,
	// private or link-local address, or plain HTTP, is refused (A02):
	// cairnd's own network is not theirs to probe.
	Untrusted bool
}

// Platform is the platform an index is resolved to: this host's.
func Platform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// Fetch resolves ref in its registry to the image for this host's
// platform (a multi-arch index is resolved to it). Its layers are fetched
// when Unpack reads them. Errors carry I03 (no such image), I04
// (credentials refused), I05 (registry unreachable or failing) or V02
// (ref is not a reference).
func Fetch(ctx context.Context, ref string, opts FetchOptions) (v1.Image, name.Reference, error) {
	var nopts []name.Option
	if opts.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return nil, nil, errdefs.New(api.CodeInvalidArgument, "invalid image reference %q: %v", ref, err)
	}
	tr := opts.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		tr = t
	}
	if opts.Untrusted {
		if err := publicRegistry(ctx, r.Context().RegistryStr(), opts.Insecure); err != nil {
			return nil, nil, err
		}
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithPlatform(Platform()), remote.WithTransport(tr)}
	switch {
	case opts.Username != "" || opts.Password != "":
		ropts = append(ropts, remote.WithAuth(&authn.Basic{Username: opts.Username, Password: opts.Password}))
	case opts.Untrusted:
		ropts = append(ropts, remote.WithAuth(authn.Anonymous))
	default:
		ropts = append(ropts, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	img, err := remote.Image(r, ropts...)
	if err != nil {
		return nil, nil, registryError(ref, err)
	}
	return img, r, nil
}

// publicRegistry fails with A02 unless registry (host[:port]) resolves
// to public addresses only and is reached over HTTPS.
func publicRegistry(ctx context.Context, registry string, insecure bool) error {
	if insecure {
		return errdefs.New(api.CodeForbidden, "only an admin may pull from a plain-HTTP registry (--insecure)")
	}
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return errdefs.New(api.CodeRegistryFailed, "registry %s: %v", registry, err)
	}
	for _, a := range addrs {
		a = a.Unmap()
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
			return errdefs.New(api.CodeForbidden, "registry %s is at a private address (%s): only an admin may pull from it", registry, a)
		}
	}
	return nil
}

// registryError gives err, from reaching the registry for ref, its code.
func registryError(ref string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden || hasCode(te, transport.UnauthorizedErrorCode, transport.DeniedErrorCode):
			return errdefs.New(api.CodeRegistryDenied, "registry refused access to %s (%d): give its credentials with --username and --password-stdin, or log in with docker's config file", ref, te.StatusCode)
		case te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode):
			return errdefs.New(api.CodeNoSuchImage, "the registry has no image %s", ref)
		}
		return errdefs.New(api.CodeRegistryFailed, "registry answered for %s: %v", ref, err)
	}
	if strings.Contains(err.Error(), "no child with platform") {
		return errdefs.New(api.CodeNoSuchImage, "image %s has no variant for %s/%s", ref, Platform().OS, Platform().Architecture)
	}
	return errdefs.New(api.CodeRegistryFailed, "cannot fetch %s: %v", ref, err)
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// Progress is where Unpack is: layer Layer (from 1) of Layers, Bytes of its
// compressed Size read. Cached says the layer was not fetched: the tree
// Unpack started from holds it already.
type Progress struct {
	Layer, Layers int
	Digest        string
	Bytes, Size   int64
	Cached        bool
}

// Result is what Unpack found.
type Result struct {
	Digest string // the image's manifest digest
	Config metadata.ImageConfig
	Layers int
	Bytes  int64 // file content written by the layers applied (not those of From)
}

// UnpackOptions say where Unpack starts and what it tells.
type UnpackOptions struct {
	// From is how many of the image's bottom layers root holds already
	// (a snapshot of the tree of their chain ID, see ChainIDs): those
	// are neither fetched nor applied.
	From int
	// Applied, if not nil, is called after layer i (from 1) was applied
	// and its uncompressed content matched its diff id, with the chain
	// ID of layers 1 to i, which root now holds (and nothing else is
	// changing). An error stops Unpack.
	Applied func(i int, chain v1.Hash) error
	// Report, if not nil, is called as layers are read.
	Report func(Progress)
}

// Unpack applies img's layers in order into root (an empty directory, or
// the tree of its first opts.From layers), each checked against its
// digest and its diff id, and returns the image's digest and config. A
// bad image (a digest that does not match, a layer that is not a tar or
// that tries to leave the root) is I06. On error root holds what was
// done: the caller removes it.
func Unpack(ctx context.Context, img v1.Image, root *os.File, opts UnpackOptions) (Result, error) {
	var res Result
	digest, err := img.Digest()
	if err != nil {
		return res, badImage(err, "manifest")
	}
	res.Digest = digest.String()
	cf, err := Config(img)
	if err != nil {
		return res, err
	}
	res.Config = configOf(cf)
	layers, err := img.Layers()
	if err != nil {
		return res, fetchError(err, "layers")
	}
	if len(layers) != len(cf.RootFS.DiffIDs) {
		return res, errdefs.New(api.CodeImageDamaged, "image %s: %d layers but %d diff ids in its config", res.Digest, len(layers), len(cf.RootFS.DiffIDs))
	}
	if opts.From < 0 || opts.From > len(layers) {
		return res, fmt.Errorf("unpack from layer %d of an image of %d", opts.From, len(layers))
	}
	res.Layers = len(layers)
	chains := ChainIDs(cf.RootFS.DiffIDs)
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if i < opts.From {
			if opts.Report != nil {
				d, _ := l.Digest()
				size, _ := l.Size()
				opts.Report(Progress{Layer: i + 1, Layers: len(layers), Digest: d.String(), Bytes: size, Size: size, Cached: true})
			}
			continue
		}
		n, err := applyLayer(ctx, l, cf.RootFS.DiffIDs[i], root, i+1, len(layers), opts.Report)
		if err != nil {
			return res, err
		}
		res.Bytes += n
		if opts.Applied != nil {
			if err := opts.Applied(i+1, chains[i]); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// applyLayer applies layer number i of n, checking its uncompressed bytes
// against want.
func applyLayer(ctx context.Context, l v1.Layer, want v1.Hash, root *os.File, i, n int, report func(Progress)) (int64, error) {
	d, err := l.Digest()
	if err != nil {
		return 0, badImage(err, fmt.Sprintf("layer %d", i))
	}
	size, _ := l.Size()
	p := Progress{Layer: i, Layers: n, Digest: d.String(), Size: size}
	if report != nil {
		report(p)
	}
	compressed, err := l.Compressed()
	if err != nil {
		return 0, fetchError(err, "layer "+d.String())
	}
	defer compressed.Close()
	if want.Algorithm != "sha256" {
		return 0, errdefs.New(api.CodeImageDamaged, "layer %s: diff id %s is not sha256", d, want)
	}
	counted := &countingReader{r: compressed, every: 1 << 20, report: func(read int64) {
		if report != nil {
			p.Bytes = read
			report(p)
		}
	}}
	// Three stages, each on its own goroutine: the fetch with the check
	// of the compressed digest (go-containerregistry's reader), the
	// decompression with the hashing of what it gives for the diff id,
	// and the application of the files.
	fetched := newChunkPipe(counted, pipeChunk, pipeDepth)
	defer fetched.Close()
	uncompressed, err := decompress(fetched)
	if err != nil {
		return 0, errdefs.Wrap(api.CodeImageDamaged, err, "layer %s is not a tar, gzip or zstd stream", d)
	}
	defer uncompressed.Close()
	h := sha256.New()
	unpacked := newChunkPipe(io.TeeReader(uncompressed, h), pipeChunk, pipeDepth)
	stats, err := unpack.Apply(ctx, root, unpacked, unpack.Options{})
	if err == nil {
		// The compressed stream to its end, where its digest is checked
		// (the decompressor has read it all: nothing is left but EOF).
		_, err = io.Copy(io.Discard, fetched)
	}
	fetched.Close() // first: the decompression may wait for it
	unpacked.Close()
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, layerError(err, d.String())
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
		return 0, errdefs.New(api.CodeImageDamaged, "layer %s: its content's digest is sha256:%s, its config says %s", d, got, want)
	}
	if report != nil {
		p.Bytes = counted.n
		report(p)
	}
	return stats.Bytes, nil
}

// layerError says what applying a layer failed for: a damaged or unsafe
// layer is I06; a digest mismatch found by the fetcher is I06 too; a full
// pool is L07 (the caller's wrap), any other the error as it is.
func layerError(err error, digest string) error {
	switch {
	case errors.Is(err, unpack.ErrInvalid), errors.Is(err, unpack.ErrUnsafe), errors.Is(err, unpack.ErrLimit), isDigestMismatch(err), isCorruptStream(err):
		return errdefs.Wrap(api.CodeImageDamaged, err, "layer %s", digest)
	}
	return fmt.Errorf("layer %s: %w", digest, err)
}

// isCorruptStream reports whether err is a compressed stream's own
// complaint (a broken or cut short gzip or zstd stream), not the
// network's.
func isCorruptStream(err error) bool {
	var flateErr flate.CorruptInputError
	return errors.As(err, &flateErr) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) ||
		errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "zstd")
}

func isDigestMismatch(err error) bool {
	s := err.Error()
	return strings.Contains(s, "digest") && (strings.Contains(s, "mismatch") || strings.Contains(s, "does not match")) ||
		strings.Contains(s, "error verifying")
}

// fetchError gives an error of reading what for its code.
func fetchError(err error, what string) error {
	if isDigestMismatch(err) {
		return errdefs.Wrap(api.CodeImageDamaged, err, "image %s", what)
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return errdefs.New(api.CodeRegistryFailed, "registry answered for the image's %s: %v", what, err)
	}
	return errdefs.Wrap(api.CodeImageDamaged, err, "image %s", what)
}

func badImage(err error, what string) error {
	return errdefs.Wrap(api.CodeImageDamaged, err, "image %s", what)
}

// configOf is the part of an image config cairn applies.
func configOf(cf *v1.ConfigFile) metadata.ImageConfig {
	c := cf.Config
	out := metadata.ImageConfig{Env: c.Env, Entrypoint: c.Entrypoint, Cmd: c.Cmd, WorkingDir: c.WorkingDir, User: c.User}
	for p := range c.ExposedPorts {
		port, proto, _ := strings.Cut(p, "/")
		if proto != "" && proto != "tcp" {
			continue
		}
		if n, err := strconv.Atoi(port); err == nil && n > 0 && n < 65536 {
			out.ExposedPorts = append(out.ExposedPorts, n)
		}
	}
	sort.Ints(out.ExposedPorts)
	return out
}

// The chunks of the pipes between a layer's stages: 1 MiB, up to 4 ahead.
const (
	pipeChunk = 1 << 20
	pipeDepth = 4
)

// countingReader counts what is read through it and reports every every
// bytes.
type countingReader struct {
	r      io.Reader
	n      int64
	next   int64
	every  int64
	report func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n >= c.next {
		c.next = c.n + c.every
		c.report(c.n)
	}
	return n, err
}
