package testregistry

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// RefNameAnnotation is the annotation of an image's descriptor in an OCI
// layout's index.json that names it.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteDockerSave writes img to the file at path as `docker save` does: a
// tar of manifest.json (with ref, e.g. "app:1", among RepoTags), the config
// and the layers.
func WriteDockerSave(t testing.TB, path, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatalf("docker save archive %s: %v", path, err)
	}
}

// WriteOCILayout writes img into dir (made if missing) as an OCI image
// layout: oci-layout, index.json and blobs/sha256/. The image's descriptor
// in index.json carries RefNameAnnotation = ref unless ref is empty;
// tools write a tag ("1.0", skopeo) or a whole reference (buildkit) there.
func WriteOCILayout(t testing.TB, dir, ref string, img v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{RefNameAnnotation: ref}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		t.Fatalf("OCI layout %s: %v", dir, err)
	}
}

// WriteOCILayoutTar writes img as an OCI image layout (see WriteOCILayout)
// in a tar file at path, its members relative ("index.json",
// "blobs/sha256/…"), as `buildx --output type=oci` and skopeo's
// oci-archive make (Docker 25's `docker save` writes this and a
// manifest.json besides).
func WriteOCILayoutTar(t testing.TB, path, ref string, img v1.Image) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	WriteOCILayout(t, dir, ref, img)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatalf("OCI layout tar %s: %v", path, err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
