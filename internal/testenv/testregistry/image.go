package testregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the modification time of entries that give none, and the
// creation time of images: a fixed time keeps digests the same from run to
// run.
var Epoch = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// Entry is one tar entry of a layer. Its fields are written as they are,
// Mode included (File, Dir, Symlink and Hardlink give the usual modes).
type Entry struct {
	// Name is the path in the layer; a leading "/" is dropped, and a
	// directory's name gets a trailing "/".
	Name string
	// Type is a tar type flag: tar.TypeReg (or 0), TypeDir, TypeSymlink,
	// TypeLink, TypeChar, TypeBlock or TypeFifo.
	Type byte
	// Mode is the permission bits with setuid (04000), setgid (02000) and
	// sticky (01000).
	Mode     int64
	UID, GID int
	// Body is a regular file's content.
	Body string
	// Linkname is a symbolic link's target, stored as it is, or a hard
	// link's target, a path in this layer or a lower one.
	Linkname string
	// Xattrs are extended attributes, written as PAX records
	// SCHILY.xattr.NAME.
	Xattrs map[string]string
	// ModTime is the modification time; zero means Epoch.
	ModTime            time.Time
	Devmajor, Devminor int64
}

// File is a regular file owned by root.
func File(name, body string, mode int64) Entry {
	return Entry{Name: name, Type: tar.TypeReg, Mode: mode, Body: body}
}

// Dir is a directory owned by root.
func Dir(name string, mode int64) Entry {
	return Entry{Name: name, Type: tar.TypeDir, Mode: mode}
}

// Symlink is a symbolic link (mode 0777) owned by root.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Mode: 0o777, Linkname: target}
}

// Hardlink is a hard link named name to target.
func Hardlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeLink, Linkname: target}
}

// Whiteout is the marker that deletes p, with all it holds, from the
// layers below: an empty file named .wh.BASE in p's directory.
func Whiteout(p string) Entry {
	dir, base := path.Split(strings.TrimSuffix(p, "/"))
	return Entry{Name: dir + ".wh." + base, Type: tar.TypeReg}
}

// Opaque is the marker that makes dir opaque: what the layers below put
// in it is gone, what the same layer writes in it stays.
func Opaque(dir string) Entry {
	return Entry{Name: path.Join(dir, ".wh..wh..opq"), Type: tar.TypeReg}
}

// Owned returns e owned by uid:gid.
func (e Entry) Owned(uid, gid int) Entry {
	e.UID, e.GID = uid, gid
	return e
}

// Layer is a layer of the entries, in that order: a tar stream compressed
// with gzip, with Docker's layer media type (Image with Config.OCI gives
// it OCI's).
func Layer(t testing.TB, entries ...Entry) v1.Layer {
	t.Helper()
	var raw bytes.Buffer
	zw := gzip.NewWriter(&raw)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{
			Typeflag: e.Type, Name: strings.TrimLeft(e.Name, "/"), Linkname: e.Linkname,
			Mode: e.Mode, Uid: e.UID, Gid: e.GID, ModTime: e.ModTime,
			Devmajor: e.Devmajor, Devminor: e.Devminor,
		}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.ModTime.IsZero() {
			hdr.ModTime = Epoch
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			hdr.Size = int64(len(e.Body))
		case tar.TypeDir:
			if !strings.HasSuffix(hdr.Name, "/") {
				hdr.Name += "/"
			}
		}
		if len(e.Xattrs) > 0 {
			hdr.Format = tar.FormatPAX
			hdr.PAXRecords = map[string]string{}
			for k, v := range e.Xattrs {
				hdr.PAXRecords["SCHILY.xattr."+k] = v
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("layer entry %s: %v", e.Name, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if _, err := io.WriteString(tw, e.Body); err != nil {
			t.Fatalf("layer entry %s: %v", e.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	gz := raw.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// LayerDigests are the digests ("sha256:…") of img's layer blobs, bottom
// first.
func LayerDigests(t testing.TB, img v1.Image) []string {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var ds []string
	for _, l := range m.Layers {
		ds = append(ds, l.Digest.String())
	}
	return ds
}

// Config is an image's configuration.
type Config struct {
	// Platform is "OS/ARCH" or "OS/ARCH/VARIANT" (e.g. "linux/arm64");
	// empty means the host's, "linux/" + runtime.GOARCH.
	Platform         string
	Env              []string
	Entrypoint, Cmd  []string
	WorkingDir, User string
	// ExposedPorts are "PORT/PROTO" (e.g. "8080/tcp").
	ExposedPorts []string
	Labels       map[string]string
	// OCI gives the image OCI media types (manifest, config and layers);
	// otherwise they are Docker's (schema 2), as most registries serve.
	OCI bool
}

// Image is an image of the layers, bottom first, under cfg.
func Image(t testing.TB, cfg Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	plat := cfg.Platform
	if plat == "" {
		plat = hostPlatform()
	}
	p, err := v1.ParsePlatform(plat)
	if err != nil {
		t.Fatal(err)
	}
	cf := &v1.ConfigFile{
		Architecture: p.Architecture, OS: p.OS, Variant: p.Variant,
		Created: v1.Time{Time: Epoch},
		Config: v1.Config{
			Env: cfg.Env, Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd,
			WorkingDir: cfg.WorkingDir, User: cfg.User, Labels: cfg.Labels,
		},
		RootFS: v1.RootFS{Type: "layers", DiffIDs: []v1.Hash{}},
	}
	if len(cfg.ExposedPorts) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, port := range cfg.ExposedPorts {
			cf.Config.ExposedPorts[port] = struct{}{}
		}
	}
	img := empty.Image
	layerType := types.DockerLayer
	if cfg.OCI {
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		layerType = types.OCILayer
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	var adds []mutate.Addendum
	for i, l := range layers {
		adds = append(adds, mutate.Addendum{
			Layer: l, MediaType: layerType,
			History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: fmt.Sprintf("testregistry layer %d", i+1)},
		})
	}
	img, err = mutate.Append(img, adds...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// WrongDiffID is img with a config that names a wrong uncompressed digest
// (diff ID) for its layer i, bottom first: the layer's blob matches the
// manifest's digest, and only a check of the unpacked stream finds the
// mismatch.
func WrongDiffID(t testing.TB, img v1.Image, i int) v1.Image {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if i < 0 || i >= len(cf.RootFS.DiffIDs) {
		t.Fatalf("image has %d layers, no layer %d", len(cf.RootFS.DiffIDs), i)
	}
	h := cf.RootFS.DiffIDs[i]
	last := "0"
	if strings.HasSuffix(h.Hex, "0") {
		last = "1"
	}
	cf.RootFS.DiffIDs[i] = v1.Hash{Algorithm: h.Algorithm, Hex: h.Hex[:len(h.Hex)-1] + last}
	out, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// digest is img's manifest digest.
func digest(t testing.TB, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}
