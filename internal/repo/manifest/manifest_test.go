package manifest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/wire"
)

func sample() *Manifest {
	id := crypto.ID{1, 2, 3}
	return &Manifest{Created: 1700000000123456789, Meta: []byte(`{"sandbox":"web"}`), Nodes: []Node{
		{Path: ".", Type: Dir, Mode: 0o755},
		{Path: "dir", Type: Dir, Mode: 0o1777, UID: 1000, GID: 1000, Mtime: -5},
		{Path: "dir/file", Type: File, Mode: 0o4755, Size: 300, Inode: 42, Ctime: 7,
			Xattrs:  []Xattr{{Name: "user.a", Value: []byte{0, 1}}, {Name: "user.b"}},
			Extents: []Extent{{0, 100}, {200, 100}},
			Chunks:  []Chunk{{ID: id, Length: 150}, {ID: crypto.ID{9}, Length: 50}}},
		{Path: "dir/link", Type: Hardlink, Mode: 0o4755, Target: "dir/file"},
		{Path: "sym", Type: Symlink, Mode: 0o777, Target: "dir/../nowhere"},
		{Path: "empty", Type: File, Mode: 0o600},
		{Path: "fifo", Type: Fifo, Mode: 0o644},
		{Path: "null", Type: CharDev, Mode: 0o666, Rdev: 0x103},
	}}
}

func TestRoundTrip(t *testing.T) {
	m := sample()
	got, err := Decode(Encode(m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
}

// withMemory is sample with a memory image.
func withMemory() *Manifest {
	m := sample()
	m.Memory = []Node{
		{Path: ".", Type: Dir, Mode: 0o700},
		{Path: "checkpoint.img", Type: File, Mode: 0o600, Size: 10, Extents: []Extent{{0, 10}}, Chunks: []Chunk{{ID: crypto.ID{4}, Length: 10}}},
		{Path: "pages.img", Type: File, Mode: 0o600, Size: 1 << 20, Extents: []Extent{{0, 1 << 20}},
			Chunks: []Chunk{{ID: crypto.ID{1, 2, 3}, Length: 1 << 19}, {ID: crypto.ID{5}, Length: 1 << 19}}},
	}
	return m
}

func TestRoundTripMemory(t *testing.T) {
	m := withMemory()
	got, err := Decode(Encode(m))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	var ids []crypto.ID
	got.EachChunk(func(c Chunk) { ids = append(ids, c.ID) })
	want := []crypto.ID{{1, 2, 3}, {9}, {4}, {1, 2, 3}, {5}}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("EachChunk = %v, want both trees' chunks %v", ids, want)
	}
}

// A version 2 manifest (before Memory) reads as one without a memory
// image.
func TestVersion2(t *testing.T) {
	m := sample()
	b := Encode(m)
	// Version 2 is version 3 without the memory tree (here: its count 0).
	v2 := append([]byte{2}, b[1:len(b)-1]...)
	got, err := Decode(v2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("version 2:\n got %+v\nwant %+v", got, m)
	}
	// A version 2 manifest has nothing after its nodes.
	if _, err := Decode(append([]byte{2}, Encode(withMemory())[1:]...)); err == nil {
		t.Error("version 2 with a memory tree accepted")
	}
}

// A version 1 manifest (before Meta) reads as one without Meta.
func TestVersion1(t *testing.T) {
	m := sample()
	b := Encode(m)
	b = b[:len(b)-1] // without the memory tree: version 2
	// Version 1 is version 2 without the meta field.
	v1 := append([]byte{1}, b[1:1+varintLen(m.Created)]...)
	v1 = append(v1, b[1+varintLen(m.Created)+1+len(m.Meta):]...)
	got, err := Decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	m.Meta = nil
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("version 1:\n got %+v\nwant %+v", got, m)
	}
}

func varintLen(v int64) int {
	e := wire.Encoder{}
	e.Varint(v)
	return len(e.B)
}

func TestInvalid(t *testing.T) {
	for name, mod := range map[string]func(m *Manifest){
		"no root":           func(m *Manifest) { m.Nodes = m.Nodes[1:] },
		"absolute path":     func(m *Manifest) { m.Nodes[1].Path = "/dir" },
		"dotdot":            func(m *Manifest) { m.Nodes[1].Path = "../dir" },
		"unclean":           func(m *Manifest) { m.Nodes[2].Path = "dir//file" },
		"duplicate":         func(m *Manifest) { m.Nodes[5].Path = "sym" },
		"orphan":            func(m *Manifest) { m.Nodes[5].Path = "nodir/empty" },
		"parent is file":    func(m *Manifest) { m.Nodes[5].Path = "sym/empty" },
		"bad type":          func(m *Manifest) { m.Nodes[6].Type = 99 },
		"link to later":     func(m *Manifest) { m.Nodes[3].Target = "empty" },
		"link to dir":       func(m *Manifest) { m.Nodes[3].Target = "dir" },
		"empty symlink":     func(m *Manifest) { m.Nodes[4].Target = "" },
		"target on fifo":    func(m *Manifest) { m.Nodes[6].Target = "x" },
		"extent past size":  func(m *Manifest) { m.Nodes[2].Size = 250 },
		"overlapping":       func(m *Manifest) { m.Nodes[2].Extents[1].Offset = 50 },
		"chunks short":      func(m *Manifest) { m.Nodes[2].Chunks[1].Length = 49 },
		"data on dir":       func(m *Manifest) { m.Nodes[1].Chunks = m.Nodes[2].Chunks },
		"duplicate xattr":   func(m *Manifest) { m.Nodes[2].Xattrs[1].Name = "user.a" },
		"zero-length chunk": func(m *Manifest) { m.Nodes[2].Chunks = append(m.Nodes[2].Chunks, Chunk{}) },
	} {
		m := sample()
		mod(m)
		if _, err := Decode(Encode(m)); !errors.Is(err, wire.ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want a corrupt-encoding error", name, err)
		}
	}
	for name, mod := range map[string]func(m *Manifest){
		"memory without root": func(m *Manifest) { m.Memory = m.Memory[1:] },
		"memory dotdot":       func(m *Manifest) { m.Memory[1].Path = "../checkpoint.img" },
		"memory chunks short": func(m *Manifest) { m.Memory[2].Chunks[1].Length = 1 },
		"memory duplicate":    func(m *Manifest) { m.Memory[2].Path = "checkpoint.img" },
	} {
		m := withMemory()
		mod(m)
		if _, err := Decode(Encode(m)); !errors.Is(err, wire.ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want a corrupt-encoding error", name, err)
		}
	}
	b := Encode(sample())
	b[0] = Version + 1
	if _, err := Decode(b); err == nil {
		t.Error("unknown version accepted")
	}
	big := sample()
	big.Meta = make([]byte, MaxMeta+1)
	if _, err := Decode(Encode(big)); err == nil {
		t.Error("a meta past MaxMeta accepted")
	}
	for n := range len(b) {
		if _, err := Decode(Encode(sample())[:n]); err == nil {
			t.Fatalf("truncated at %d accepted", n)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode(sample()))
	f.Add(Encode(withMemory()))
	f.Add([]byte{Version, 0, 1, 1, '.', 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(Encode(m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encoded manifest decodes differently: %v", err)
		}
	})
}
