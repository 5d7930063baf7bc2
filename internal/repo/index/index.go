// Package index encodes the repository's index segments (which blobs each
// pack holds) and heads (what one location holds: manifests, tombstones and
// index segments), per docs/repository-format.md §5 and §7. Decoders
// validate and return errors, never panic. Encryption is the caller's.
package index

import (
	"fmt"

	"github.com/cairn-sandbox/cairn/internal/repo/pack"
	"github.com/cairn-sandbox/cairn/internal/repo/wire"
)

const version = 1

// Pack is one pack as a segment lists it.
type Pack struct {
	Name    string // 64 hex digits
	Size    uint64
	Entries []pack.Entry
}

// Segment lists packs and their blobs.
type Segment struct{ Packs []Pack }

// EncodeSegment returns the plaintext encoding of s.
func EncodeSegment(s *Segment) []byte {
	e := wire.Encoder{}
	e.Byte(version)
	e.Uvarint(uint64(len(s.Packs)))
	for _, p := range s.Packs {
		e.String(p.Name)
		e.Uvarint(p.Size)
		e.Uvarint(uint64(len(p.Entries)))
		for _, x := range p.Entries {
			pack.AppendEntry(&e, x)
		}
	}
	return e.B
}

// DecodeSegment decodes and validates a segment.
func DecodeSegment(b []byte) (*Segment, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != version && d.Err() == nil {
		d.Fail("index segment version %d", v)
	}
	n := d.Count(66)
	s := &Segment{Packs: make([]Pack, 0, n)}
	for range n {
		p := Pack{Name: d.String(), Size: d.Uvarint()}
		k := d.Count(36)
		p.Entries = make([]pack.Entry, 0, k)
		for range k {
			p.Entries = append(p.Entries, pack.ReadEntry(d))
		}
		if d.Err() != nil {
			break
		}
		if !ValidName(p.Name) {
			d.Fail("bad pack name %q", p.Name)
		}
		end := 0
		if len(p.Entries) > 0 {
			last := p.Entries[len(p.Entries)-1]
			end = int(last.Offset) + int(last.Length)
		}
		if err := pack.CheckEntries(p.Entries, end); err != nil || uint64(end) > p.Size {
			d.Fail("pack %s: bad entries (%v)", p.Name, err)
		}
		s.Packs = append(s.Packs, p)
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("index segment: %w", err)
	}
	return s, nil
}

// Head is one location's head.
type Head struct {
	Generation uint64
	Manifests  []string // names of the manifests the location fully holds
	Deleted    []string // tombstones: manifests the account deleted
	Indexes    []string // index segments describing the location's packs
}

// EncodeHead returns the plaintext encoding of h.
func EncodeHead(h *Head) []byte {
	e := wire.Encoder{}
	e.Byte(version)
	e.Uvarint(h.Generation)
	for _, list := range [][]string{h.Manifests, h.Deleted, h.Indexes} {
		e.Uvarint(uint64(len(list)))
		for _, s := range list {
			e.String(s)
		}
	}
	return e.B
}

// DecodeHead decodes and validates a head.
func DecodeHead(b []byte) (*Head, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != version && d.Err() == nil {
		d.Fail("head version %d", v)
	}
	h := &Head{Generation: d.Uvarint()}
	for _, list := range []*[]string{&h.Manifests, &h.Deleted, &h.Indexes} {
		n := d.Count(65)
		for range n {
			s := d.String()
			if d.Err() == nil && !ValidName(s) {
				d.Fail("bad object name %q", s)
			}
			*list = append(*list, s)
		}
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	return h, nil
}

// ValidName reports whether s is a content name: 64 lowercase hex digits.
func ValidName(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
