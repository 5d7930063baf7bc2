// Package chunker cuts a stream into content-defined chunks with FastCDC
// (64 KiB min, 256 KiB average, 1 MiB max) using a keyed gear table, so that
// cut points depend on the account key as well as on the content.
package chunker

import (
	"fmt"
	"io"

	chunkers "github.com/PlakarKorp/go-cdc-chunkers"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc" // registers fastcdc-v1.0.0
)

// Chunk size bounds.
const (
	MinSize    = 64 << 10
	NormalSize = 256 << 10
	MaxSize    = 1 << 20
)

const algorithm = "fastcdc-v1.0.0"

// Chunker splits one stream at a time. Its buffer (2 × MaxSize) is
// allocated once: Reset moves it to the next stream.
type Chunker struct {
	c    *chunkers.Chunker
	done bool
}

// New returns a Chunker reading r with the gear table keyed by key.
func New(r io.Reader, key []byte) (*Chunker, error) {
	c, err := chunkers.NewChunker(algorithm, r, &chunkers.ChunkerOpts{
		MinSize: MinSize, NormalSize: NormalSize, MaxSize: MaxSize, Key: key,
	})
	if err != nil {
		return nil, fmt.Errorf("chunker: %w", err)
	}
	return &Chunker{c: c}, nil
}

// Reset makes c split r from its start, as New would, keeping c's buffer.
// Chunks returned before are no longer valid.
func (c *Chunker) Reset(r io.Reader) {
	c.c.Reset(r)
	c.done = false
}

// Next returns the next chunk, or io.EOF after the last. An empty stream has
// no chunks. The chunk is only valid until the next call.
func (c *Chunker) Next() ([]byte, error) {
	if c.done {
		return nil, io.EOF
	}
	chunk, err := c.c.Next()
	switch {
	case err == io.EOF:
		c.done = true
		if len(chunk) == 0 {
			return nil, io.EOF
		}
		return chunk, nil
	case err != nil:
		return nil, fmt.Errorf("chunker: %w", err)
	}
	return chunk, nil
}
