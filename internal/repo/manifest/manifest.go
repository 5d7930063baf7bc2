// Package manifest encodes and decodes the tree of one checkpoint: names,
// types, modes, owners, times, xattrs, symlink targets, hard links, sparse
// extents and the chunk list of every regular file (docs/repository-format.md
// §6). Decode validates everything it reads and returns errors, never panics.
// Encryption is the caller's business.
package manifest

import (
	"fmt"
	"path"
	"strings"

	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/wire"
)

// Version is the format version Encode writes. Versions 1 (no Meta) and
// 2 (no Memory) are still read.
const Version = 3

// MaxMeta bounds Manifest.Meta.
const MaxMeta = 64 << 10

// MaxChunk bounds a chunk's length.
const MaxChunk = 1 << 20

// Type is a node's file type.
type Type uint8

// File types.
const (
	Dir Type = iota + 1
	File
	Symlink
	Hardlink // another name of an earlier File; Target is that node's path
	Fifo
	CharDev
	BlockDev
	Socket
)

// Extent is a data range of a file; what lies between extents is a hole.
type Extent struct{ Offset, Length uint64 }

// Chunk is one chunk of a file's data.
type Chunk struct {
	ID     crypto.ID
	Length uint32
}

// Xattr is an extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// Node is one entry of the tree.
type Node struct {
	Path     string // "." for the root, else slash-separated and relative
	Type     Type
	Mode     uint32 // permission bits, 07777
	UID, GID uint32
	Mtime    int64 // Unix ns
	Ctime    int64 // Unix ns; only for change detection
	Inode    uint64
	Size     uint64
	Rdev     uint64
	Xattrs   []Xattr
	Target   string   // symlink text, or the path a Hardlink names
	Extents  []Extent // File only
	Chunks   []Chunk  // File only: the chunks of the extents' data, in order
}

// Manifest is one checkpoint's tree, root first, each directory before its
// children.
type Manifest struct {
	Created int64 // Unix ns
	// Meta is what the writer says about the checkpoint (cairnd: its
	// metadata as JSON, so a new host can list and import it); opaque
	// here, at most MaxMeta bytes, nil in a version 1 manifest.
	Meta  []byte
	Nodes []Node
	// Memory is a second tree, the checkpoint's memory image (the
	// directory runsc wrote), under the same rules as Nodes; nil for a
	// checkpoint without one and in manifests before version 3.
	Memory []Node
}

// EachChunk calls fn with every chunk of both trees, in order.
func (m *Manifest) EachChunk(fn func(Chunk)) {
	for _, tree := range [][]Node{m.Nodes, m.Memory} {
		for i := range tree {
			for _, c := range tree[i].Chunks {
				fn(c)
			}
		}
	}
}

// Encode returns the plaintext encoding of m.
func Encode(m *Manifest) []byte {
	e := wire.Encoder{}
	e.Byte(Version)
	e.Varint(m.Created)
	e.Bytes(m.Meta)
	encodeTree(&e, m.Nodes)
	encodeTree(&e, m.Memory)
	return e.B
}

// encodeTree writes a tree: its node count, then each node.
func encodeTree(e *wire.Encoder, nodes []Node) {
	e.Uvarint(uint64(len(nodes)))
	for i := range nodes {
		n := &nodes[i]
		e.String(n.Path)
		e.Byte(byte(n.Type))
		e.Uvarint(uint64(n.Mode))
		e.Uvarint(uint64(n.UID))
		e.Uvarint(uint64(n.GID))
		e.Varint(n.Mtime)
		e.Varint(n.Ctime)
		e.Uvarint(n.Inode)
		e.Uvarint(n.Size)
		e.Uvarint(n.Rdev)
		e.Uvarint(uint64(len(n.Xattrs)))
		for _, x := range n.Xattrs {
			e.String(x.Name)
			e.Bytes(x.Value)
		}
		e.String(n.Target)
		e.Uvarint(uint64(len(n.Extents)))
		for _, x := range n.Extents {
			e.Uvarint(x.Offset)
			e.Uvarint(x.Length)
		}
		e.Uvarint(uint64(len(n.Chunks)))
		for _, c := range n.Chunks {
			e.Raw(c.ID[:])
			e.Uvarint(uint64(c.Length))
		}
	}
}

// minNode is the fewest bytes an encoded node takes.
const minNode = 18

// Decode decodes and validates a manifest.
func Decode(b []byte) (*Manifest, error) {
	d := wire.NewDecoder(b)
	v := d.Byte()
	if (v < 1 || v > Version) && d.Err() == nil {
		d.Fail("manifest version %d not supported", v)
	}
	m := &Manifest{Created: d.Varint()}
	if v >= 2 {
		if m.Meta = d.Bytes(); len(m.Meta) > MaxMeta {
			d.Fail("manifest meta of %d bytes exceeds %d", len(m.Meta), MaxMeta)
		}
		if len(m.Meta) == 0 {
			m.Meta = nil
		}
	}
	m.Nodes = decodeTree(d)
	if v >= 3 {
		m.Memory = decodeTree(d)
	}
	if err := d.Done(); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeTree reads a tree written by encodeTree; nil for none. On a
// decoding error it stops early, leaving the error in d.
func decodeTree(d *wire.Decoder) []Node {
	count := d.Count(minNode)
	nodes := make([]Node, 0, count)
	for range count {
		n := Node{Path: d.String(), Type: Type(d.Byte())}
		n.Mode = small(d, d.Uvarint(), 0o7777)
		n.UID = small(d, d.Uvarint(), 1<<32-1)
		n.GID = small(d, d.Uvarint(), 1<<32-1)
		n.Mtime = d.Varint()
		n.Ctime = d.Varint()
		n.Inode = d.Uvarint()
		n.Size = d.Uvarint()
		n.Rdev = d.Uvarint()
		if k := d.Count(2); k > 0 {
			n.Xattrs = make([]Xattr, 0, k)
			for range k {
				n.Xattrs = append(n.Xattrs, Xattr{Name: d.String(), Value: d.Bytes()})
			}
		}
		n.Target = d.String()
		if k := d.Count(2); k > 0 {
			n.Extents = make([]Extent, 0, k)
			for range k {
				n.Extents = append(n.Extents, Extent{Offset: d.Uvarint(), Length: d.Uvarint()})
			}
		}
		if k := d.Count(33); k > 0 {
			n.Chunks = make([]Chunk, 0, k)
			for range k {
				var c Chunk
				copy(c.ID[:], d.Raw(32))
				c.Length = small(d, d.Uvarint(), MaxChunk)
				n.Chunks = append(n.Chunks, c)
			}
		}
		if d.Err() != nil {
			break
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil
	}
	return nodes
}

func small(d *wire.Decoder, v, limit uint64) uint32 {
	if v > limit {
		d.Fail("value %d exceeds %d", v, limit)
		return 0
	}
	return uint32(v)
}

// Validate checks the invariants of docs/repository-format.md §6: of the
// disk's tree, and of the memory image's if there is one.
func (m *Manifest) Validate() error {
	if len(m.Nodes) == 0 {
		return fmt.Errorf("manifest: %w: the first node must be the root directory", wire.ErrCorrupt)
	}
	if err := validateTree(m.Nodes); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if len(m.Memory) == 0 {
		return nil
	}
	if err := validateTree(m.Memory); err != nil {
		return fmt.Errorf("manifest: memory image: %w", err)
	}
	return nil
}

func validateTree(nodes []Node) error {
	if nodes[0].Path != "." || nodes[0].Type != Dir {
		return fmt.Errorf("%w: the first node must be the root directory", wire.ErrCorrupt)
	}
	types := make(map[string]Type, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if err := n.validate(i, types); err != nil {
			return fmt.Errorf("node %d (%q): %w", i, n.Path, err)
		}
		types[n.Path] = n.Type
	}
	return nil
}

func (n *Node) validate(i int, seen map[string]Type) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", wire.ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if i > 0 {
		if !validPath(n.Path) {
			return bad("bad path")
		}
		if _, dup := seen[n.Path]; dup {
			return bad("duplicate path")
		}
		if seen[path.Dir(n.Path)] != Dir {
			return bad("parent is not an earlier directory")
		}
	}
	if n.Type < Dir || n.Type > Socket {
		return bad("type %d", n.Type)
	}
	if n.Mode > 0o7777 {
		return bad("mode %o", n.Mode)
	}
	names := make(map[string]bool, len(n.Xattrs))
	for _, x := range n.Xattrs {
		if x.Name == "" || strings.IndexByte(x.Name, 0) >= 0 || names[x.Name] {
			return bad("bad or duplicate xattr name %q", x.Name)
		}
		names[x.Name] = true
	}
	switch n.Type {
	case Symlink:
		if n.Target == "" || strings.IndexByte(n.Target, 0) >= 0 {
			return bad("bad symlink target")
		}
	case Hardlink:
		if seen[n.Target] != File {
			return bad("hard link to %q, which is not an earlier regular file", n.Target)
		}
	default:
		if n.Target != "" {
			return bad("target on a %d node", n.Type)
		}
	}
	if n.Type != File {
		if len(n.Extents) != 0 || len(n.Chunks) != 0 {
			return bad("data on a non-file")
		}
		return nil
	}
	var end, data uint64
	for _, x := range n.Extents {
		if x.Length == 0 || x.Offset < end || x.Offset+x.Length < x.Offset || x.Offset+x.Length > n.Size {
			return bad("bad extent %+v", x)
		}
		end = x.Offset + x.Length
		data += x.Length
	}
	var sum uint64
	for _, c := range n.Chunks {
		if c.Length == 0 {
			return bad("empty chunk")
		}
		sum += uint64(c.Length)
	}
	if sum != data {
		return bad("chunks hold %d bytes, extents %d", sum, data)
	}
	return nil
}

func validPath(p string) bool {
	if p == "" || p == "." || strings.IndexByte(p, 0) >= 0 || path.Clean(p) != p || path.IsAbs(p) {
		return false
	}
	return p != ".." && !strings.HasPrefix(p, "../")
}

// DataSize returns how many bytes of data a file's extents hold.
func (n *Node) DataSize() uint64 {
	var s uint64
	for _, x := range n.Extents {
		s += x.Length
	}
	return s
}
