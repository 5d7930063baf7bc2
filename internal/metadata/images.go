package metadata

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Image is an image cairn holds besides the built-in ones (busybox,
// debian): pulled from a registry, imported from an archive or built from
// a Dockerfile. Images are the host's, not an account's.
type Image struct {
	Name      string      // unique on the host: what `cairn create --image NAME` takes
	Digest    string      // the manifest digest, "sha256:<64 hex>" (for a build: of its result)
	Source    string      // where it came from: the reference pulled ("127.0.0.1:5000/app:1"), "import:<file name>", "build:<dir>"
	Config    ImageConfig // the defaults of its sandboxes' execs and services
	SizeBytes int64       // bytes of its unpacked files
	// DiskPath is its read-only subvolume, relative to the pool's root
	// ("images/<name>"). Not unique: an image pulled again under another
	// name, with the same Digest, may name the first one's disk.
	DiskPath  string
	CreatedAt time.Time
}

// ImageConfig is the part of an OCI image config cairn applies.
//
// A store keeps it as one JSON object and does not tell an empty list
// from none: an empty Env, Entrypoint, Cmd or ExposedPorts reads back as
// nil. Nothing cairn does with a config tells them apart either (an image
// with "Entrypoint": [] has no entrypoint, as one without).
type ImageConfig struct {
	Env          []string `json:"env,omitempty"` // "KEY=value"
	Entrypoint   []string `json:"entrypoint,omitempty"`
	Cmd          []string `json:"cmd,omitempty"`
	WorkingDir   string   `json:"working_dir,omitempty"`
	User         string   `json:"user,omitempty"`
	ExposedPorts []int    `json:"exposed_ports,omitempty"` // TCP ports
}

// digestRE is what Image.Digest must match.
var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidateDigest checks that d is a sha256 digest in the form images
// carry: "sha256:" and 64 lower-case hex digits.
func ValidateDigest(d string) error {
	if !digestRE.MatchString(d) {
		return fmt.Errorf("digest %q is not sha256: and 64 lower-case hex digits", d)
	}
	return nil
}

// Validate checks an image given to CreateImage for what the store
// relies on: a name, a digest that passes ValidateDigest, a source, a
// non-negative size, a DiskPath that passes ValidatePoolPath and exposed
// ports that pass ValidatePort. Like Sandbox.Validate it does not judge
// the name's syntax, nor whether it is a built-in image's, nor whether
// DiskPath is under the directory cairnd puts images in: the image
// manager does.
func (img Image) Validate() error {
	switch {
	case img.Name == "":
		return errors.New("invalid image: empty name")
	case img.Source == "":
		return fmt.Errorf("invalid image %q: no source", img.Name)
	case img.SizeBytes < 0:
		return fmt.Errorf("invalid image %q: negative size %d", img.Name, img.SizeBytes)
	}
	if err := ValidateDigest(img.Digest); err != nil {
		return fmt.Errorf("invalid image %q: %w", img.Name, err)
	}
	if err := ValidatePoolPath(img.DiskPath); err != nil {
		return fmt.Errorf("invalid image %q: disk path: %w", img.Name, err)
	}
	for _, p := range img.Config.ExposedPorts {
		if err := ValidatePort(p); err != nil {
			return fmt.Errorf("invalid image %q: exposed %w", img.Name, err)
		}
	}
	return nil
}

// ImageStore is the part of the Store that keeps images, under the
// Store's guarantees (atomic, durable, sentinel errors). The built-in
// images have no rows.
type ImageStore interface {
	// CreateImage stores a new image. img must pass img.Validate (else a
	// plain error); a zero CreatedAt is set to now. ErrConflict if an
	// image is called img.Name already.
	CreateImage(ctx context.Context, img Image) error
	// Image returns the image called name, or ErrNotFound.
	Image(ctx context.Context, name string) (Image, error)
	// ImagesByDigest returns the images with that manifest digest, by
	// name (byte-wise), empty (not ErrNotFound) when there are none: an
	// image pulled again under another name can reuse their disk.
	ImagesByDigest(ctx context.Context, digest string) ([]Image, error)
	// Images returns every image, by name (byte-wise); empty, never nil,
	// when there are none.
	Images(ctx context.Context) ([]Image, error)
	// DeleteImage removes the image's row, or returns ErrNotFound if
	// there is no image called name. It does not look at who uses it:
	// the caller asks ImageUsers first, under a lock that keeps new users
	// away. Nor does it touch its disk: the caller deletes it once no
	// other image names the same DiskPath.
	DeleteImage(ctx context.Context, name string) error
	// ImageUsers returns how many sandboxes (Sandbox.Image) and
	// checkpoints (Checkpoint.Image, those of deleted sandboxes
	// included) of every account name the image called name; 0, 0 (not
	// ErrNotFound) for a name nobody uses, whether an image has it or
	// not.
	ImageUsers(ctx context.Context, name string) (sandboxes, checkpoints int, err error)
}
