// Package pack writes and reads packs: files of encrypted, compressed blobs
// followed by an encrypted index and a fixed-size encrypted footer
// (docs/repository-format.md §4). A reader never trusts a pack: every length
// is bounded and every blob is authenticated and checked against its id.
package pack

import (
	"encoding/binary"
	"fmt"

	"github.com/cairn-sandbox/cairn/internal/repo/compress"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/wire"
)

// Type is a blob's type.
type Type uint8

// Data is a chunk of file content, the only blob type of format version 1.
const Data Type = 1

const (
	// TargetSize is the size past which a pack is closed.
	TargetSize = 16 << 20
	// MaxPlain is the largest plaintext a blob may hold.
	MaxPlain = 1 << 20
	// FooterSize is the size of the encrypted footer.
	FooterSize = crypto.Overhead + 8

	version    = 1
	minSealed  = crypto.Overhead + 1 // a sealed blob holds at least the encoding byte
	entryBytes = 1 + 32 + 3          // smallest encoded entry
	// maxPack bounds what a reader accepts: blobs up to TargetSize, one more
	// blob, and the index.
	maxPack = TargetSize + 2*MaxPlain + 1<<20
)

var (
	indexAD  = []byte("cairn/v1/pack-index")
	footerAD = []byte("cairn/v1/pack-footer")
)

// Entry locates one blob in a pack.
type Entry struct {
	Type        Type
	ID          crypto.ID
	Offset      uint32 // of the sealed blob in the pack
	Length      uint32 // of the sealed blob
	PlainLength uint32 // of the plaintext
}

func blobAD(t Type, id crypto.ID) []byte {
	ad := make([]byte, 0, 13+1+32)
	ad = append(ad, "cairn/v1/blob"...)
	ad = append(ad, byte(t))
	return append(ad, id[:]...)
}

// MaxSealed is the largest sealed blob: MaxPlain kept raw, sealed.
const MaxSealed = crypto.Overhead + 1 + MaxPlain

// writerBuffer is what a Writer allocates up front: a full pack's blobs and
// room for its index, so that the buffer never grows by copying itself.
const writerBuffer = TargetSize + MaxSealed + 256<<10

// Writer builds one pack in memory.
type Writer struct {
	keys    *crypto.Keys
	buf     []byte
	entries []Entry
	sealer  *Sealer
}

// NewWriter returns an empty pack writer.
func NewWriter(keys *crypto.Keys) *Writer {
	return &Writer{keys: keys, buf: make([]byte, 0, writerBuffer)}
}

// Sealer compresses and encrypts blobs, reusing its buffers from one blob to
// the next. It is for one goroutine; Sealers of the same Keys may run
// concurrently.
type Sealer struct {
	keys  *crypto.Keys
	level compress.Level
	body  []byte // the encoded plaintext
	out   []byte // the sealed blob
}

// NewSealer returns a Sealer for keys that compresses at level l.
func NewSealer(keys *crypto.Keys, l compress.Level) *Sealer {
	return &Sealer{keys: keys, level: l, body: make([]byte, 0, 1+MaxPlain+1<<10), out: make([]byte, 0, MaxSealed+1<<10)}
}

// Seal compresses and encrypts a blob for AddSealed. The result is valid
// until the next call.
func (s *Sealer) Seal(t Type, id crypto.ID, plaintext []byte) ([]byte, error) {
	if len(plaintext) > MaxPlain {
		return nil, fmt.Errorf("pack: blob of %d bytes exceeds %d", len(plaintext), MaxPlain)
	}
	s.body = compress.AppendEncode(s.body[:0], plaintext, s.level)
	var err error
	if s.out, err = s.keys.AppendSealData(s.out[:0], s.body, blobAD(t, id)); err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	return s.out, nil
}

// Add compresses, encrypts and appends a blob.
func (w *Writer) Add(t Type, id crypto.ID, plaintext []byte) error {
	if w.sealer == nil {
		w.sealer = NewSealer(w.keys, compress.Default)
	}
	sealed, err := w.sealer.Seal(t, id, plaintext)
	if err != nil {
		return err
	}
	w.AddSealed(Entry{Type: t, ID: id, PlainLength: uint32(len(plaintext))}, sealed)
	return nil
}

// AddSealed appends a blob sealed by a Sealer, or earlier (by Add, in
// another pack), as is: a blob's encryption binds it to its type and id,
// not to a pack. e gives the type, id and plaintext length; the offset and
// length are set here. The Writer copies sealed.
func (w *Writer) AddSealed(e Entry, sealed []byte) {
	e.Offset, e.Length = uint32(len(w.buf)), uint32(len(sealed))
	w.entries = append(w.entries, e)
	w.buf = append(w.buf, sealed...)
}

// Size returns the bytes of blobs written so far.
func (w *Writer) Size() int { return len(w.buf) }

// Count returns the number of blobs written so far.
func (w *Writer) Count() int { return len(w.entries) }

// Finish appends the index and footer and returns the pack and its entries.
// The Writer must not be used afterwards.
func (w *Writer) Finish() ([]byte, []Entry, error) {
	sealedIndex, err := w.keys.SealMeta(EncodeIndex(w.entries), indexAD)
	if err != nil {
		return nil, nil, fmt.Errorf("pack index: %w", err)
	}
	footer := make([]byte, 8)
	footer[0] = version
	binary.LittleEndian.PutUint32(footer[4:], uint32(len(sealedIndex)))
	sealedFooter, err := w.keys.SealMeta(footer, footerAD)
	if err != nil {
		return nil, nil, fmt.Errorf("pack footer: %w", err)
	}
	out := append(w.buf, sealedIndex...)
	out = append(out, sealedFooter...)
	return out, w.entries, nil
}

// EncodeIndex returns the plaintext index of entries.
func EncodeIndex(entries []Entry) []byte {
	e := wire.Encoder{}
	e.Byte(version)
	e.Uvarint(uint64(len(entries)))
	for _, x := range entries {
		AppendEntry(&e, x)
	}
	return e.B
}

// AppendEntry encodes one entry (shared with the index segment format).
func AppendEntry(e *wire.Encoder, x Entry) {
	e.Byte(byte(x.Type))
	e.Raw(x.ID[:])
	e.Uvarint(uint64(x.Offset))
	e.Uvarint(uint64(x.Length))
	e.Uvarint(uint64(x.PlainLength))
}

// ReadEntry decodes one entry written by AppendEntry.
func ReadEntry(d *wire.Decoder) Entry {
	var x Entry
	x.Type = Type(d.Byte())
	copy(x.ID[:], d.Raw(32))
	x.Offset = u32(d, d.Uvarint())
	x.Length = u32(d, d.Uvarint())
	x.PlainLength = u32(d, d.Uvarint())
	return x
}

func u32(d *wire.Decoder, v uint64) uint32 {
	if v > maxPack {
		d.Fail("value %d out of range", v)
		return 0
	}
	return uint32(v)
}

// DecodeIndex decodes a plaintext index whose blobs end at dataEnd and checks
// that the entries tile [0, dataEnd) exactly.
func DecodeIndex(b []byte, dataEnd int) ([]Entry, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != version && d.Err() == nil {
		d.Fail("pack index version %d", v)
	}
	n := d.Count(entryBytes)
	entries := make([]Entry, 0, n)
	for range n {
		entries = append(entries, ReadEntry(d))
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("pack index: %w", err)
	}
	if err := CheckEntries(entries, dataEnd); err != nil {
		return nil, err
	}
	return entries, nil
}

// CheckEntries verifies that entries are well-formed and tile [0, dataEnd).
func CheckEntries(entries []Entry, dataEnd int) error {
	next := 0
	for i, x := range entries {
		switch {
		case x.Type != Data:
			return fmt.Errorf("pack index: entry %d: %w: type %d", i, wire.ErrCorrupt, x.Type)
		case int(x.Offset) != next:
			return fmt.Errorf("pack index: entry %d: %w: offset %d, want %d", i, wire.ErrCorrupt, x.Offset, next)
		case x.Length < minSealed || x.PlainLength > MaxPlain || int(x.Length) > dataEnd-next:
			return fmt.Errorf("pack index: entry %d: %w: length %d (plain %d)", i, wire.ErrCorrupt, x.Length, x.PlainLength)
		}
		next += int(x.Length)
	}
	if next != dataEnd {
		return fmt.Errorf("pack index: %w: blobs end at %d, index starts at %d", wire.ErrCorrupt, next, dataEnd)
	}
	return nil
}

// ReadIndex authenticates and decodes the footer and index of a whole pack.
func ReadIndex(keys *crypto.Keys, pack []byte) ([]Entry, error) {
	if len(pack) < FooterSize || len(pack) > maxPack {
		return nil, fmt.Errorf("pack: %w: size %d", wire.ErrCorrupt, len(pack))
	}
	footer, err := keys.OpenMeta(pack[len(pack)-FooterSize:], footerAD)
	if err != nil {
		return nil, fmt.Errorf("pack footer: %w", err)
	}
	if len(footer) != 8 || footer[0] != version {
		return nil, fmt.Errorf("pack footer: %w: version %d", wire.ErrCorrupt, footer[0])
	}
	indexLen := int(binary.LittleEndian.Uint32(footer[4:]))
	if indexLen > len(pack)-FooterSize {
		return nil, fmt.Errorf("pack footer: %w: index of %d bytes", wire.ErrCorrupt, indexLen)
	}
	dataEnd := len(pack) - FooterSize - indexLen
	plain, err := keys.OpenMeta(pack[dataEnd:len(pack)-FooterSize], indexAD)
	if err != nil {
		return nil, fmt.Errorf("pack index: %w", err)
	}
	return DecodeIndex(plain, dataEnd)
}

// OpenBlob authenticates and decompresses the sealed blob of e and checks
// that its plaintext has e's id.
func OpenBlob(keys *crypto.Keys, e Entry, sealed []byte) ([]byte, error) {
	body, err := keys.OpenData(sealed, blobAD(e.Type, e.ID))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", e.ID, err)
	}
	plain, err := compress.Decode(body, MaxPlain)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", e.ID, err)
	}
	if len(plain) != int(e.PlainLength) || keys.ChunkID(plain) != e.ID {
		return nil, fmt.Errorf("blob %s: %w: content does not match its id", e.ID, crypto.ErrAuth)
	}
	return plain, nil
}

// Blob reads the blob of e from a whole pack.
func Blob(keys *crypto.Keys, pack []byte, e Entry) ([]byte, error) {
	end := uint64(e.Offset) + uint64(e.Length)
	if end > uint64(len(pack)) {
		return nil, fmt.Errorf("blob %s: %w: past the end of the pack", e.ID, wire.ErrCorrupt)
	}
	return OpenBlob(keys, e, pack[e.Offset:end])
}
