package lazy

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cairn-sandbox/cairn/internal/repo/manifest"
)

// Messages of the fill socket (docs/lazy-restore.md, "Fill protocol").
// Each is a frame: kind (1 byte), slot (4 bytes, big endian), length of
// the payload (4 bytes, big endian), payload.
const (
	msgNeed = 1 // lazyfs → cairnd: a read waits for slot; no payload
	msgPut  = 2 // cairnd → lazyfs: slot's chunk, verified; payload the plaintext
	msgFail = 3 // cairnd → lazyfs: slot cannot be fetched now; payload the reason
)

// maxPayload bounds a frame's payload: a chunk at most.
const maxPayload = manifest.MaxChunk

type frame struct {
	kind    byte
	slot    uint32
	payload []byte
}

func writeFrame(w io.Writer, f frame) error {
	var h [9]byte
	h[0] = f.kind
	binary.BigEndian.PutUint32(h[1:5], f.slot)
	binary.BigEndian.PutUint32(h[5:9], uint32(len(f.payload)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(f.payload)
	return err
}

func readFrame(r io.Reader) (frame, error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	f := frame{kind: h[0], slot: binary.BigEndian.Uint32(h[1:5])}
	n := binary.BigEndian.Uint32(h[5:9])
	if n > maxPayload {
		return frame{}, fmt.Errorf("fill socket: frame of %d bytes", n)
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return frame{}, err
	}
	return f, nil
}
