package testregistry

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options configure a registry.
type Options struct {
	// Username and Password, when Username is set, are required of every
	// request as HTTP basic authentication (RFC 7617). A request without
	// them, or with others, gets 401 Unauthorized with the challenge
	// `WWW-Authenticate: Basic realm="testregistry"` and a distribution-spec
	// error body (code UNAUTHORIZED); that includes the version check
	// GET /v2/ that clients send first to learn which scheme to use.
	//
	// go-containerregistry's client, told of no credentials, sends none
	// and gets 401 on the manifest. Given remote.WithAuth(&authn.Basic{
	// Username: …, Password: …}) (or a keychain that resolves to them),
	// it sees the Basic challenge on GET /v2/ and sends them with every
	// request after; it sends nothing when either is empty, so Password
	// must not be.
	Username, Password string
	// Bearer, with Username, makes the registry ask for a bearer token
	// instead (the token flow of Docker Hub, GHCR and most registries):
	// 401 with `WWW-Authenticate: Bearer realm="URL/token",
	// service="testregistry",scope=…`; GET /token with the basic
	// credentials answers {"token": T, "access_token": T}, and only
	// `Authorization: Bearer T` is let in. Wrong credentials at /token
	// get 401.
	Bearer bool
}

// Realm is the realm of the registry's basic authentication challenge.
const Realm = "testregistry"

// Request is one request the registry answered.
type Request struct {
	Method string
	Path   string // the URL path, e.g. /v2/app/blobs/sha256:…
	Status int
}

// Registry is a registry served on a loopback port for one test.
type Registry struct {
	opts  Options
	token string // the bearer token /token hands out (Options.Bearer)
	srv   *httptest.Server
	blobs *blobStore

	mu   sync.Mutex
	reqs []Request
}

// pushHeader marks the requests of Push and PushIndex, which Requests
// leaves out: it lists what the code under test asked.
const pushHeader = "X-Testregistry-Push"

// Start serves a new, empty registry on 127.0.0.1 over plain HTTP until
// the end of the test. go-containerregistry's client (and so cairn) speaks
// plain HTTP to 127.0.0.1 without being told: name.Registry.Scheme is
// "http" for loopback addresses.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	if opts.Username != "" && opts.Password == "" {
		t.Fatal("testregistry: a Username needs a Password")
	}
	r := &Registry{opts: opts, blobs: &blobStore{blobs: map[string][]byte{}, faults: map[string]fault{}}}
	if opts.Bearer {
		if opts.Username == "" {
			t.Fatal("testregistry: Bearer needs a Username")
		}
		var b [16]byte
		rand.Read(b[:])
		r.token = hex.EncodeToString(b[:])
	}
	quiet := log.New(io.Discard, "", 0)
	h := registry.New(registry.Logger(quiet), registry.WithBlobHandler(r.blobs))
	r.srv = httptest.NewUnstartedServer(r.wrap(h))
	r.srv.Config.ErrorLog = quiet // the https half of the client's first ping is not HTTP
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	return r
}

// Addr is the registry's host and port, "127.0.0.1:PORT".
func (r *Registry) Addr() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// Ref is the reference of repo at tag on this registry,
// "127.0.0.1:PORT/repo:tag", or "127.0.0.1:PORT/repo@sha256:…" when tag
// is a digest.
func (r *Registry) Ref(repo, tag string) string {
	if strings.HasPrefix(tag, "sha256:") {
		return r.Addr() + "/" + repo + "@" + tag
	}
	return r.Addr() + "/" + repo + ":" + tag
}

// Requests returns the requests answered so far, in order, but those of
// Push and PushIndex.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// BlobGets counts the GETs of blobs (layers and configs) answered with
// content (200 or 206) so far, but those of Push and PushIndex. A client
// that pulls an image it already holds should not add to it.
func (r *Registry) BlobGets() int {
	n := 0
	for _, q := range r.Requests() {
		if q.Method == http.MethodGet && strings.Contains(q.Path, "/blobs/sha256:") &&
			(q.Status == http.StatusOK || q.Status == http.StatusPartialContent) {
			n++
		}
	}
	return n
}

// Push puts img under ref (a reference on this registry, see Ref), with
// the registry's credentials, and returns the manifest's digest
// ("sha256:…").
func (r *Registry) Push(t testing.TB, ref string, img v1.Image) string {
	t.Helper()
	n, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(n, img, r.remoteOptions(t.Context())...); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return digest(t, img)
}

// PushIndex puts a multi-platform index of imgs under ref and returns the
// index's digest. Each image's descriptor in the index takes its platform
// from the image's config (see Config.Platform). The index is an OCI image
// index if the first image has an OCI manifest, a Docker manifest list
// otherwise.
func (r *Registry) PushIndex(t testing.TB, ref string, imgs ...v1.Image) string {
	t.Helper()
	n, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	var idx v1.ImageIndex = empty.Index
	for i, img := range imgs {
		mt, err := img.MediaType()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && mt != types.OCIManifestSchema1 {
			idx = mutate.IndexMediaType(idx, types.DockerManifestList)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		p := cf.Platform()
		if p == nil {
			t.Fatalf("image %d has no platform in its config", i)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img, Descriptor: v1.Descriptor{MediaType: mt, Platform: p},
		})
	}
	if err := remote.WriteIndex(n, idx, r.remoteOptions(t.Context())...); err != nil {
		t.Fatalf("push index %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// remoteOptions are the options of the registry's own requests (pushes
// and the package's tests): its credentials and a transport that marks
// them so Requests leaves them out.
func (r *Registry) remoteOptions(ctx context.Context) []remote.Option {
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(marked{http.DefaultTransport}),
	}
	if r.opts.Username != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: r.opts.Username, Password: r.opts.Password}))
	}
	return opts
}

type marked struct{ inner http.RoundTripper }

func (m marked) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(pushHeader, "1")
	return m.inner.RoundTrip(req)
}

// wrap puts authentication and the request log in front of h.
func (r *Registry) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		switch {
		case r.opts.Bearer && req.URL.Path == "/token":
			r.serveToken(sw, req)
		case r.authorized(req):
			h.ServeHTTP(sw, req)
		default:
			r.unauthorized(sw, req)
		}
		if req.Header.Get(pushHeader) != "" {
			return
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, Request{Method: req.Method, Path: req.URL.Path, Status: sw.status})
		r.mu.Unlock()
	})
}

func (r *Registry) authorized(req *http.Request) bool {
	if r.opts.Username == "" {
		return true
	}
	if r.opts.Bearer {
		tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
		return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(r.token)) == 1
	}
	return r.basicOK(req)
}

func (r *Registry) basicOK(req *http.Request) bool {
	user, pass, ok := req.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(user), []byte(r.opts.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(pass), []byte(r.opts.Password)) == 1
}

// serveToken is the token endpoint of Options.Bearer.
func (r *Registry) serveToken(w http.ResponseWriter, req *http.Request) {
	if !r.basicOK(req) {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
		http.Error(w, `{"details":"bad credentials"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"token": r.token, "access_token": r.token, "expires_in": 300})
}

func (r *Registry) unauthorized(w http.ResponseWriter, req *http.Request) {
	challenge := `Basic realm="` + Realm + `"`
	if r.opts.Bearer {
		challenge = fmt.Sprintf(`Bearer realm="%s/token",service="%s"`, r.srv.URL, Realm)
		if repo, _, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/v2/"), "/manifests/"); ok {
			challenge += fmt.Sprintf(`,scope="repository:%s:pull"`, repo)
		}
	}
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	type regError struct{ Code, Message string }
	_ = json.NewEncoder(w).Encode(map[string][]regError{
		"errors": {{Code: "UNAUTHORIZED", Message: "authentication required"}},
	})
}

type statusWriter struct {
	http.ResponseWriter
	status  int
	written bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.written {
		w.status, w.written = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.written = true
	return w.ResponseWriter.Write(b)
}

// CorruptBlob makes the registry serve the blob with this digest
// ("sha256:…") with one byte changed from now on, at the same length: a
// client that checks what it reads against the digest sees a mismatch,
// and one that does not may also fail to decompress it. It applies in
// every repository, before or after the blob is pushed.
func (r *Registry) CorruptBlob(digest string) { r.blobs.setFault(digest, fault{kind: corrupt}) }

// ReplaceBlob makes the registry serve, as the blob with this digest
// ("sha256:…", a blob already pushed) from now on, the content of the
// layer with, compressed with gzip and padded to the blob's length (with
// gzip header fields and empty gzip members): a valid layer of the right
// size under a digest it does not have, which only a digest check
// refuses. The test fails if with's content does not fit in that length.
func (r *Registry) ReplaceBlob(t testing.TB, digest string, with v1.Layer) {
	t.Helper()
	r.blobs.mu.Lock()
	orig, ok := r.blobs.blobs[digest]
	r.blobs.mu.Unlock()
	if !ok {
		t.Fatalf("ReplaceBlob: no blob %s was pushed", digest)
	}
	rc, err := with.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	body, err := gzipPadded(raw, len(orig))
	if err != nil {
		t.Fatalf("ReplaceBlob %s: %v", digest, err)
	}
	r.blobs.setFault(digest, fault{kind: replace, body: body})
}

// DropBlob makes the registry answer 404 BLOB_UNKNOWN for the blob with
// this digest from now on, as if a manifest named a blob never pushed.
func (r *Registry) DropBlob(digest string) { r.blobs.setFault(digest, fault{kind: drop}) }

// RestoreBlob undoes CorruptBlob, ReplaceBlob or DropBlob for the digest.
func (r *Registry) RestoreBlob(digest string) {
	r.blobs.mu.Lock()
	defer r.blobs.mu.Unlock()
	delete(r.blobs.faults, digest)
}

type faultKind int

const (
	corrupt faultKind = iota + 1
	replace
	drop
)

type fault struct {
	kind faultKind
	body []byte
}

// blobStore is the registry's blob storage: blobs in memory, by digest
// across repositories, served through the faults set on them.
type blobStore struct {
	mu     sync.Mutex
	blobs  map[string][]byte
	faults map[string]fault
}

var (
	_ registry.BlobHandler     = (*blobStore)(nil)
	_ registry.BlobStatHandler = (*blobStore)(nil)
	_ registry.BlobPutHandler  = (*blobStore)(nil)
)

func (s *blobStore) setFault(digest string, f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[digest] = f
}

// served is what a GET of the blob returns, or false for "not found".
func (s *blobStore) served(h v1.Hash) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[h.String()]
	f, faulty := s.faults[h.String()]
	switch {
	case !faulty:
		return b, ok
	case f.kind == drop:
		return nil, false
	case f.kind == replace:
		return f.body, true
	case !ok:
		return nil, false
	case len(b) == 0:
		return []byte{0}, true
	default:
		c := bytes.Clone(b)
		c[len(c)/2] ^= 0xff
		return c, true
	}
}

func (s *blobStore) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	b, ok := s.served(h)
	if !ok {
		return nil, registry.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (s *blobStore) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	b, ok := s.served(h)
	if !ok {
		return 0, registry.ErrNotFound
	}
	return int64(len(b)), nil
}

// Put stores a blob; rc checks the content against h as it is read and
// fails at its end on a mismatch, which Put passes on.
func (s *blobStore) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs[h.String()] = b
	return nil
}
