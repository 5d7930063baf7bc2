package testregistry_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cairn-sandbox/cairn/internal/image/unpack"
	"github.com/cairn-sandbox/cairn/internal/testenv"
	"github.com/cairn-sandbox/cairn/internal/testenv/testregistry"
)

// pull is remote.Image of ref with the options, failing the test on an
// error.
func pull(t *testing.T, ref string, opts ...remote.Option) v1.Image {
	t.Helper()
	n, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(n, append(opts, remote.WithContext(t.Context()))...)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

// entries lists the names in a layer's uncompressed tar.
func entries(t *testing.T, l v1.Layer) []string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

func readAll(rc io.ReadCloser, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func checkConfig(t *testing.T, img v1.Image, want testregistry.Config) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, p)
	}
	got := fmt.Sprintf("%s/%s env=%q cmd=%q entrypoint=%q wd=%q user=%q ports=%q",
		cf.OS, cf.Architecture, c.Env, c.Cmd, c.Entrypoint, c.WorkingDir, c.User, ports)
	exp := fmt.Sprintf("%s env=%q cmd=%q entrypoint=%q wd=%q user=%q ports=%q",
		want.Platform, want.Env, want.Cmd, want.Entrypoint, want.WorkingDir, want.User, want.ExposedPorts)
	if got != exp {
		t.Errorf("config:\n got %s\nwant %s", got, exp)
	}
}

func TestPushAndPullStandard(t *testing.T) {
	for _, oci := range []bool{false, true} {
		t.Run(fmt.Sprintf("oci=%v", oci), func(t *testing.T) {
			var opts []testregistry.StandardOption
			mt := types.DockerManifestSchema2
			if oci {
				opts, mt = append(opts, testregistry.WithOCI()), types.OCIManifestSchema1
			}
			r := testregistry.Start(t, testregistry.Options{})
			img := testregistry.Standard(t, opts...)
			ref := r.Ref("app", "1")
			if !strings.HasPrefix(ref, "127.0.0.1:") || !strings.HasSuffix(ref, "/app:1") || r.Addr()+"/app:1" != ref {
				t.Fatalf("Ref = %q, Addr = %q", ref, r.Addr())
			}
			d := r.Push(t, ref, img)
			if len(r.Requests()) != 0 {
				t.Fatalf("the push is in the request log: %v", r.Requests())
			}

			got := pull(t, r.Ref("app", d))
			if gd, _ := got.Digest(); gd.String() != d {
				t.Fatalf("pulled %s by digest, got %s", d, gd)
			}
			if m, _ := got.MediaType(); m != mt {
				t.Errorf("media type %s, want %s", m, mt)
			}
			checkConfig(t, got, testregistry.StandardExpect(t, opts...).Config)
			layers, err := got.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 3 {
				t.Fatalf("%d layers, want 3", len(layers))
			}
			for i, l := range layers {
				if _, err := readAll(l.Compressed()); err != nil {
					t.Errorf("layer %d: %v", i, err)
				}
			}
			if n := r.BlobGets(); n != 4 {
				t.Errorf("BlobGets = %d after reading the config and 3 layers, want 4; requests %v", n, r.Requests())
			}
			want := []string{"opt/old/", "opt/old/.wh.a", "data/", "data/.wh.gone-dir",
				"var/cache/", "var/cache/.wh..wh..opq", "var/cache/new", "usr/bin/",
				"usr/bin/tool-link", "usr/bin/t", "usr/bin/suid", "home/", "home/app/", "home/app/file"}
			if got := entries(t, layers[1]); !slices.Equal(got, want) {
				t.Errorf("layer 2 entries %q, want %q", got, want)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	a, b := testregistry.Standard(t), testregistry.Standard(t)
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two Standard images: %s and %s", da, db)
	}
}

// TestStandardUnpacks applies the Standard image's layers with cairn's
// unpacker and checks the tree against StandardExpect, which tests both.
func TestStandardUnpacks(t *testing.T) {
	testenv.Require(t)
	for _, busybox := range []bool{false, true} {
		t.Run(fmt.Sprintf("busybox=%v", busybox), func(t *testing.T) {
			var opts []testregistry.StandardOption
			if busybox {
				opts = append(opts, testregistry.WithBusybox())
			}
			root := unpackImage(t, testregistry.Standard(t, opts...))
			testregistry.StandardExpect(t, opts...).Check(t, root)
		})
	}
}

func unpackImage(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		_, err = unpack.Apply(t.Context(), f, rc, unpack.Options{})
		rc.Close()
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
	}
	return root
}

// recorder keeps what Errorf reports instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheckFindsDifferences(t *testing.T) {
	testenv.Require(t)
	root := unpackImage(t, testregistry.Standard(t))
	for _, change := range []func() error{
		func() error { return os.Chmod(filepath.Join(root, "etc/base.conf"), 0o644) },
		func() error { return os.WriteFile(filepath.Join(root, "extra"), nil, 0o644) },
		func() error { return os.Remove(filepath.Join(root, "data/keep")) },
		func() error { return os.WriteFile(filepath.Join(root, "opt/old/a"), nil, 0o644) },
		func() error { return os.WriteFile(filepath.Join(root, "var/cache/new"), []byte("old\n"), 0o644) },
		func() error { return os.Lchown(filepath.Join(root, "home/app/file"), 0, 0) },
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{TB: t}
	testregistry.StandardExpect(t).Check(rec, root)
	all := strings.Join(rec.errs, "\n")
	for _, want := range []string{
		"/etc/base.conf: mode 0644", "/extra: not expected", "/data/keep: lstat",
		"/opt/old/a: should not exist", "/var/cache/new: content", "/home/app/file: owner 0:0",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("Check did not report %q; it reported:\n%s", want, all)
		}
	}
}

func TestAuth(t *testing.T) {
	r := testregistry.Start(t, testregistry.Options{Username: "alice", Password: "s3cret"})
	ref := r.Ref("private/app", "1")
	r.Push(t, ref, testregistry.Standard(t))

	resp, err := http.Get("http://" + r.Addr() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="testregistry"` {
		t.Errorf("GET /v2/ without credentials: %s, WWW-Authenticate %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}

	n, _ := name.ParseReference(ref)
	for _, auth := range []authn.Authenticator{authn.Anonymous, &authn.Basic{Username: "alice", Password: "wrong"}} {
		_, err := remote.Image(n, remote.WithAuth(auth), remote.WithContext(t.Context()))
		var terr *transport.Error
		if !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
			t.Errorf("pull with %v: %v, want 401", auth, err)
		}
	}
	img := pull(t, ref, remote.WithAuth(&authn.Basic{Username: "alice", Password: "s3cret"}))
	if _, err := img.ConfigFile(); err != nil {
		t.Errorf("config with credentials: %v", err)
	}
}

func TestIndexChoosesPlatform(t *testing.T) {
	r := testregistry.Start(t, testregistry.Options{})
	var imgs []v1.Image
	for _, arch := range []string{"arm64", "amd64", "riscv64"} {
		l := testregistry.Layer(t, testregistry.File("arch", arch+"\n", 0o644))
		imgs = append(imgs, testregistry.Image(t, testregistry.Config{Platform: "linux/" + arch}, l))
	}
	ref := r.Ref("multi", "latest")
	d := r.PushIndex(t, ref, imgs...)

	n, _ := name.ParseReference(ref)
	idx, err := remote.Index(n, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := idx.Digest(); id.String() != d {
		t.Errorf("index digest %s, PushIndex said %s", id, d)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.DockerManifestList || len(im.Manifests) != 3 || im.Manifests[0].Platform.Architecture != "arm64" {
		t.Fatalf("index manifest %+v", im)
	}

	img := pull(t, ref, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(tr)
	if string(body) != runtime.GOARCH+"\n" {
		t.Errorf("the host's platform gave the image of %q", body)
	}
}

func TestBlobFaults(t *testing.T) {
	r := testregistry.Start(t, testregistry.Options{})
	img := testregistry.Standard(t)
	ref := r.Ref("app", "1")
	r.Push(t, ref, img)
	ds := testregistry.LayerDigests(t, img)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, n)
	}
	read := func(i int) error {
		got, err := pull(t, ref).Layers()
		if err != nil {
			t.Fatal(err)
		}
		_, err = readAll(got[i].Compressed())
		return err
	}

	r.CorruptBlob(ds[1])
	if err := read(1); err == nil || !strings.Contains(err.Error(), "sha256 checksum") {
		t.Errorf("corrupt blob: %v, want a checksum mismatch", err)
	}
	if err := read(0); err != nil {
		t.Errorf("another blob: %v", err)
	}

	r.ReplaceBlob(t, ds[1], layers[2])
	if err := read(1); err == nil || !strings.Contains(err.Error(), "sha256 checksum") {
		t.Errorf("replaced blob: %v, want a checksum mismatch", err)
	}
	// What is served is a valid layer: layer 3's entries.
	resp, err := http.Get("http://" + r.Addr() + "/v2/app/blobs/" + ds[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tr := tar.NewReader(zr); ; {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the replaced blob: %v", err)
		}
		names = append(names, hdr.Name)
	}
	if want := []string{"etc/", "etc/base.conf"}; !slices.Equal(names, want) || resp.ContentLength != sizes[1] {
		t.Errorf("the replaced blob holds %q in %d bytes, want %q in %d", names, resp.ContentLength, want, sizes[1])
	}

	r.DropBlob(ds[1])
	var terr *transport.Error
	if err := read(1); !errors.As(err, &terr) || terr.StatusCode != http.StatusNotFound {
		t.Errorf("dropped blob: %v, want 404", err)
	}

	r.RestoreBlob(ds[1])
	if err := read(1); err != nil {
		t.Errorf("restored blob: %v", err)
	}
}

func TestWrongDiffID(t *testing.T) {
	r := testregistry.Start(t, testregistry.Options{})
	ref := r.Ref("app", "bad")
	r.Push(t, ref, testregistry.WrongDiffID(t, testregistry.Standard(t), 0))
	img := pull(t, ref)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		if _, err := readAll(l.Compressed()); err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		b, err := readAll(l.Uncompressed())
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		match := cf.RootFS.DiffIDs[i].Hex == hex.EncodeToString(sum[:])
		if match != (i != 0) {
			t.Errorf("layer %d: diff ID matches = %v", i, match)
		}
	}
}

func TestArchives(t *testing.T) {
	img := testregistry.Standard(t)
	want, _ := img.Digest()
	dir := t.TempDir()

	save := filepath.Join(dir, "save.tar")
	testregistry.WriteDockerSave(t, save, "app:1", img)
	tag, _ := name.NewTag("app:1")
	got, err := tarball.ImageFromPath(save, &tag)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("docker save archive: digest %s, want %s", d, want)
	}

	oci := filepath.Join(dir, "oci")
	testregistry.WriteOCILayout(t, oci, "1", img)
	checkLayout(t, oci, want)

	ociTar := filepath.Join(dir, "oci.tar")
	testregistry.WriteOCILayoutTar(t, ociTar, "1", img)
	out := filepath.Join(dir, "untarred")
	untar(t, ociTar, out)
	checkLayout(t, out, want)
}

func checkLayout(t *testing.T, dir string, want v1.Hash) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != want ||
		im.Manifests[0].Annotations[testregistry.RefNameAnnotation] != "1" {
		t.Fatalf("%s: index %+v, want one manifest %s named 1", dir, im, want)
	}
	img, err := p.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		if _, err := readAll(l.Compressed()); err != nil {
			t.Errorf("%s: layer %d: %v", dir, i, err)
		}
	}
}

func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(hdr.Name, "/") || strings.Contains(hdr.Name, "..") {
			t.Fatalf("member %q", hdr.Name)
		}
		p := filepath.Join(dir, hdr.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		default:
			err = fmt.Errorf("member %q of type %q", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
