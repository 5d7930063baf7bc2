package pack

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/compress"
	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
)

// fixedKeys derive from a constant key so that committed fuzz seeds decrypt.
func fixedKeys(t testing.TB) *crypto.Keys {
	t.Helper()
	var k crypto.Key
	copy(k[:], "cairn pack fuzz seed key........")
	ks, err := k.Derive()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func buildPack(t testing.TB, ks *crypto.Keys, blobs ...[]byte) []byte {
	t.Helper()
	w := NewWriter(ks)
	for _, b := range blobs {
		if err := w.Add(Data, ks.ChunkID(b), b); err != nil {
			t.Fatal(err)
		}
	}
	p, _, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	ks := fixedKeys(t)
	blobs := [][]byte{[]byte("first"), bytes.Repeat([]byte("z"), 100000), {}, []byte("last")}
	w := NewWriter(ks)
	for _, b := range blobs {
		if err := w.Add(Data, ks.ChunkID(b), b); err != nil {
			t.Fatal(err)
		}
	}
	if w.Count() != 4 || w.Size() == 0 {
		t.Fatalf("count %d size %d", w.Count(), w.Size())
	}
	p, written, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ReadIndex(ks, p)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(entries) != fmt.Sprint(written) {
		t.Fatalf("index %v, written %v", entries, written)
	}
	for i, e := range entries {
		got, err := Blob(ks, p, e)
		if err != nil || !bytes.Equal(got, blobs[i]) {
			t.Fatalf("blob %d: %v", i, err)
		}
	}
	if entries[1].Length > 1000 {
		t.Errorf("compressible blob stored in %d bytes", entries[1].Length)
	}
	if bytes.Contains(p, []byte("first")) || bytes.Contains(p, []byte("zzzz")) {
		t.Error("plaintext visible in the pack")
	}
}

func TestAddSealedMovesBlobs(t *testing.T) {
	ks := fixedKeys(t)
	old := buildPack(t, ks, []byte("dead"), []byte("live"))
	entries, err := ReadIndex(ks, old)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(ks)
	e := entries[1]
	w.AddSealed(e, old[e.Offset:e.Offset+e.Length])
	p, _, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	moved, err := ReadIndex(ks, p)
	if err != nil || len(moved) != 1 || moved[0].Offset != 0 {
		t.Fatalf("index %v, %v", moved, err)
	}
	if got, err := Blob(ks, p, moved[0]); err != nil || string(got) != "live" {
		t.Fatalf("moved blob = %q, %v", got, err)
	}
}

func TestTooLarge(t *testing.T) {
	ks := fixedKeys(t)
	if err := NewWriter(ks).Add(Data, crypto.ID{}, make([]byte, MaxPlain+1)); err == nil {
		t.Fatal("oversized blob accepted")
	}
}

func TestDamage(t *testing.T) {
	ks := fixedKeys(t)
	p := buildPack(t, ks, []byte("alpha"), []byte("beta"))
	entries, err := ReadIndex(ks, p)
	if err != nil {
		t.Fatal(err)
	}
	// A flipped bit in a blob fails that blob only.
	bad := bytes.Clone(p)
	bad[entries[1].Offset+3] ^= 1
	if _, err := Blob(ks, bad, entries[1]); !errors.Is(err, crypto.ErrAuth) {
		t.Fatalf("damaged blob: %v", err)
	}
	if _, err := Blob(ks, bad, entries[0]); err != nil {
		t.Fatalf("intact blob: %v", err)
	}
	// A flipped bit in the index or footer fails the whole pack.
	for _, off := range []int{len(p) - 1, len(p) - FooterSize - 1} {
		bad := bytes.Clone(p)
		bad[off] ^= 1
		if _, err := ReadIndex(ks, bad); !errors.Is(err, crypto.ErrAuth) {
			t.Fatalf("damage at %d: %v", off, err)
		}
	}
	// An entry naming another id is caught by the id check.
	e := entries[0]
	e.ID = ks.ChunkID([]byte("other"))
	if _, err := Blob(ks, p, e); err == nil {
		t.Fatal("blob accepted under a wrong id")
	}
	e = entries[0]
	e.Length = uint32(len(p))
	if _, err := Blob(ks, p, e); err == nil {
		t.Fatal("blob past the end accepted")
	}
	// Another key cannot read the pack.
	k, _ := crypto.NewKey()
	other, _ := k.Derive()
	if _, err := ReadIndex(other, p); !errors.Is(err, crypto.ErrAuth) {
		t.Fatalf("other key: %v", err)
	}
}

func TestCheckEntries(t *testing.T) {
	ok := []Entry{{Type: Data, Offset: 0, Length: 40, PlainLength: 10}, {Type: Data, Offset: 40, Length: 30, PlainLength: 1}}
	if err := CheckEntries(ok, 70); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		mod func([]Entry)
		end int
	}{
		"gap":       {func(e []Entry) { e[1].Offset = 41 }, 70},
		"short end": {func([]Entry) {}, 71},
		"past end":  {func([]Entry) {}, 60},
		"type":      {func(e []Entry) { e[0].Type = 9 }, 70},
		"tiny blob": {func(e []Entry) { e[0].Length = 5; e[1].Offset = 5 }, 35},
		"huge":      {func(e []Entry) { e[0].PlainLength = MaxPlain + 1 }, 70},
	} {
		e := append([]Entry{}, ok...)
		tc.mod(e)
		if err := CheckEntries(e, tc.end); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzDecodeIndex runs in plain `go test` on the seeds under testdata/fuzz.
func FuzzDecodeIndex(f *testing.F) {
	f.Add(EncodeIndex([]Entry{{Type: Data, Length: 40, PlainLength: 3}}), 40)
	f.Add(EncodeIndex(nil), 0)
	f.Fuzz(func(t *testing.T, b []byte, end int) {
		entries, err := DecodeIndex(b, end)
		if err != nil {
			return
		}
		again, err := DecodeIndex(EncodeIndex(entries), end)
		if err != nil || fmt.Sprint(again) != fmt.Sprint(entries) {
			t.Fatalf("re-encoded index decodes to %v, %v", again, err)
		}
	})
}

// FuzzReadIndex feeds whole packs (seeds are real packs under the fixed key).
func FuzzReadIndex(f *testing.F) {
	ks := fixedKeys(f)
	f.Add(buildPack(f, ks, []byte("one"), []byte("two")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		entries, err := ReadIndex(ks, p)
		if err != nil {
			return
		}
		for _, e := range entries {
			_, _ = Blob(ks, p, e)
		}
	})
}

// Blobs sealed by Sealers on other goroutines and added with AddSealed read
// back like blobs added with Add.
func TestSealerConcurrent(t *testing.T) {
	ks := fixedKeys(t)
	var blobs [][]byte
	for i := range 64 {
		blobs = append(blobs, bytes.Repeat([]byte{byte(i)}, i*1000))
	}
	blobs = append(blobs, make([]byte, MaxPlain))
	type sealed struct {
		e    Entry
		data []byte
	}
	out := make(chan sealed)
	for w := range 4 {
		go func() {
			s := NewSealer(ks, compress.Default)
			for i := w; i < len(blobs); i += 4 {
				b := blobs[i]
				id := ks.ChunkID(b)
				data, err := s.Seal(Data, id, b)
				if err != nil {
					t.Error(err)
				}
				out <- sealed{Entry{Type: Data, ID: id, PlainLength: uint32(len(b))}, bytes.Clone(data)}
			}
		}()
	}
	w := NewWriter(ks)
	for range blobs {
		s := <-out
		w.AddSealed(s.e, s.data)
	}
	p, _, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ReadIndex(ks, p)
	if err != nil || len(entries) != len(blobs) {
		t.Fatalf("%d entries, %v", len(entries), err)
	}
	byID := map[crypto.ID][]byte{}
	for _, b := range blobs {
		byID[ks.ChunkID(b)] = b
	}
	for _, e := range entries {
		got, err := Blob(ks, p, e)
		if err != nil || !bytes.Equal(got, byID[e.ID]) {
			t.Fatalf("blob %s: %v", e.ID, err)
		}
	}
	if _, err := NewSealer(ks, compress.Default).Seal(Data, crypto.ID{}, make([]byte, MaxPlain+1)); err == nil {
		t.Error("blob over MaxPlain sealed")
	}
}
