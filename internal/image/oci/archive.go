package oci

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Archives. `cairn image import` takes an image as a file: the tar that
// `docker save` writes (manifest.json, the config, a tar per layer) or an
// OCI image layout (oci-layout, index.json, blobs/ALG/HEX) as a tar. The
// archive is untrusted: an OCI layout is extracted by its names, which
// must be exactly those of the layout, into a scratch directory of
// cairnd's own; a docker save is read where it is.

// layoutName is what a name in an OCI layout tar may be.
var layoutName = regexp.MustCompile(`^(oci-layout|index\.json|blobs/(sha256|sha512)/[0-9a-f]{64,128})$`)

// OpenArchive returns the image in the archive at path, extracting an
// OCI layout into scratch (an empty directory the caller removes). An
// archive that is neither format, or holds no image for this host's
// platform, is I06.
func OpenArchive(path, scratch string) (v1.Image, error) {
	kind, err := archiveKind(path)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "docker":
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return nil, errdefs.Wrap(api.CodeImageDamaged, err, "docker save archive (it must hold one image)")
		}
		return img, nil
	case "oci":
		if err := extractLayout(path, scratch); err != nil {
			return nil, err
		}
		idx, err := layout.ImageIndexFromPath(scratch)
		if err != nil {
			return nil, errdefs.Wrap(api.CodeImageDamaged, err, "OCI layout")
		}
		return imageFromIndex(idx)
	}
	return nil, errdefs.New(api.CodeImageDamaged, "not an image archive: want the tar of `docker save` (with manifest.json) or of an OCI image layout (with oci-layout and index.json)")
}

// archiveKind looks at the names in the tar at path.
func archiveKind(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var manifest, ociLayout, index bool
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", errdefs.Wrap(api.CodeImageDamaged, err, "not an image archive (not a tar)")
		}
		switch filepath.Clean(h.Name) {
		case "manifest.json":
			manifest = true
		case "oci-layout":
			ociLayout = true
		case "index.json":
			index = true
		}
	}
	switch {
	case ociLayout && index:
		return "oci", nil
	case manifest:
		return "docker", nil
	}
	return "", nil
}

// extractLayout writes the OCI layout files of the tar at path into dir,
// refusing any other name and any entry that is not a regular file or a
// directory of the layout.
func extractLayout(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errdefs.Wrap(api.CodeImageDamaged, err, "OCI layout tar")
		}
		name := filepath.ToSlash(filepath.Clean(h.Name))
		if h.Typeflag == tar.TypeDir && (name == "." || name == "blobs" || name == "blobs/sha256" || name == "blobs/sha512") {
			continue
		}
		if h.Typeflag != tar.TypeReg || !layoutName.MatchString(name) {
			return errdefs.New(api.CodeImageDamaged, "OCI layout tar: %q is not a file of an OCI layout", h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return errdefs.Wrap(api.CodeImageDamaged, err, "OCI layout tar: %s", name)
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("OCI layout tar: %s: %w", name, err)
		}
	}
}

// imageFromIndex picks the image of an OCI layout: the only one, or the
// one for this host's platform (looking into nested indexes).
func imageFromIndex(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, errdefs.Wrap(api.CodeImageDamaged, err, "OCI layout index")
	}
	want := Platform()
	var images []v1.Descriptor
	for _, d := range m.Manifests {
		switch {
		case d.MediaType.IsImage():
			images = append(images, d)
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, errdefs.Wrap(api.CodeImageDamaged, err, "OCI layout index %s", d.Digest)
			}
			if img, err := imageFromIndex(child); err == nil {
				return img, nil
			}
		}
	}
	for _, d := range images {
		if len(images) == 1 || (d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, errdefs.Wrap(api.CodeImageDamaged, err, "OCI layout image %s", d.Digest)
			}
			return img, nil
		}
	}
	return nil, errdefs.New(api.CodeNoSuchImage, "the OCI layout holds no image for %s/%s", want.OS, want.Architecture)
}
