package buildctx

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/unpack"
	"github.com/cairn-sandbox/cairn/internal/volume"
)

// Bounds of a build context as cairnd takes it (ExtractOptions' zero
// values).
const (
	MaxContextBytes   = 4 << 30 // file content
	MaxContextEntries = 1 << 20 // tar entries and the directories made for them
)

// ExtractOptions bound one Extract.
type ExtractOptions struct {
	MaxBytes   int64 // 0: MaxContextBytes
	MaxEntries int   // 0: MaxContextEntries
	// MaxNameLen and MaxDepth bound a name (0: unpack's restricted
	// defaults, PATH_MAX bytes and 128 components).
	MaxNameLen, MaxDepth int
	// UID and GID own every file of the context (0:0: root); the
	// archive's owners are never taken.
	UID, GID uint32
}

// Extract unpacks a build context's tar (what WriteContext wrote, or
// anything a client sent) into the directory root, in the layer
// applier's restricted mode (unpack.Restriction): regular files,
// directories and symbolic links only, kept as links and never followed
// while unpacking; setuid and setgid bits cleared; no extended
// attributes; every object owned by opts' UID:GID; names checked and
// bounded, and the whole bounded in bytes and entries.
//
// Errors carry their code: I13 for an entry the context may not hold (a
// device, FIFO, hard link, whiteout, a name with control characters, a
// "..", a path through a symbolic link), I14 for a context over a bound
// (bytes, entries, a name's length or depth), L07 when the pool is full,
// V02 for what is not a well-formed tar; ctx's error as it is. On error
// root holds what was made so far: the caller removes it.
func Extract(ctx context.Context, root *os.File, r io.Reader, opts ExtractOptions) (unpack.Stats, error) {
	uopts := unpack.Options{
		MaxBytes:   opts.MaxBytes,
		MaxEntries: opts.MaxEntries,
		Restricted: &unpack.Restriction{UID: opts.UID, GID: opts.GID, MaxNameLen: opts.MaxNameLen, MaxDepth: opts.MaxDepth},
	}
	if uopts.MaxBytes <= 0 {
		uopts.MaxBytes = MaxContextBytes
	}
	if uopts.MaxEntries <= 0 {
		uopts.MaxEntries = MaxContextEntries
	}
	st, err := unpack.Apply(ctx, root, r, uopts)
	return st, extractError(ctx, err)
}

// extractError gives an error of Extract its code.
func extractError(ctx context.Context, err error) error {
	switch {
	case err == nil, errdefs.HasCode(err):
		return err
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return err
	case errors.Is(err, unpack.ErrNotAllowed), errors.Is(err, unpack.ErrUnsafe):
		return errdefs.Wrap(api.CodeContextRefused, err, "the build context")
	case errors.Is(err, unpack.ErrLimit):
		return errdefs.Wrap(api.CodeContextTooLarge, err, "the build context")
	case volume.IsFull(err):
		return errdefs.Wrap(api.CodePoolFull, err, "the build context: the pool is full")
	}
	return errdefs.Wrap(api.CodeInvalidArgument, err, "the build context")
}
