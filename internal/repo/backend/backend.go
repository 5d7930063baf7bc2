// Package backend is the storage interface of one repository location (a
// directory or an S3 bucket). Implementations live in subpackages (local,
// s3); retries and concurrency limits are wrappers (retry, limit); every
// implementation passes the shared suite in backendtest.
package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned (possibly wrapped) by Load and Stat when no object
// has the name. Test for it with errors.Is.
var ErrNotFound = errors.New("object not found")

// ErrExists is returned (possibly wrapped) by Create when an object already
// has the name. Test for it with errors.Is.
var ErrExists = errors.New("object already exists")

// Info describes a stored object.
type Info struct {
	Name string
	Size int64
}

// Backend stores immutable named objects. Names are slash-separated paths of
// segments made of [A-Za-z0-9._-] (see CheckName). Implementations are safe
// for concurrent use.
type Backend interface {
	// Save stores data under name. It is atomic (a reader sees the whole
	// object or none of it, even after a crash) and idempotent (saving a name
	// again replaces the object; the repository only does so with the same
	// bytes). It returns only once the object is durable.
	Save(ctx context.Context, name string, data []byte) error
	// Create stores data under name only if no object has that name, and
	// returns an error wrapping ErrExists otherwise. Of several Creates of
	// one name, concurrent or not, from any number of clients, exactly one
	// succeeds. It is atomic and durable like Save. The repository commits
	// its heads with it, so that a stale writer cannot overwrite a head.
	Create(ctx context.Context, name string, data []byte) error
	// Load returns the whole object, or an error wrapping ErrNotFound.
	Load(ctx context.Context, name string) ([]byte, error)
	// Stat returns the object's size, or an error wrapping ErrNotFound.
	Stat(ctx context.Context, name string) (Info, error)
	// List returns every object whose name starts with prefix, in no
	// particular order.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Remove deletes the object. Removing a missing object is not an error.
	Remove(ctx context.Context, name string) error
}

// CheckName returns an error unless name is a valid object name.
func CheckName(name string) error {
	if name == "" || len(name) > 512 {
		return fmt.Errorf("invalid object name %q", name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid object name %q", name)
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return fmt.Errorf("invalid object name %q", name)
			}
		}
	}
	return nil
}
