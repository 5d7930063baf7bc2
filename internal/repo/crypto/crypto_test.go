package crypto

import (
	"bytes"
	"errors"
	"testing"
)

func testKeys(t *testing.T) *Keys {
	t.Helper()
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ks, err := k.Derive()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestSealOpen(t *testing.T) {
	ks := testKeys(t)
	msg := []byte("hello chunk")
	ad := []byte("ad")
	s1, err := ks.SealData(msg, ad)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := ks.SealData(msg, ad)
	if bytes.Equal(s1, s2) {
		t.Fatal("two seals of the same plaintext are equal: nonce reused")
	}
	if len(s1) != len(msg)+Overhead {
		t.Fatalf("sealed size %d, want %d", len(s1), len(msg)+Overhead)
	}
	got, err := ks.OpenData(s1, ad)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := ks.OpenData(s1, []byte("other ad")); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong ad: %v", err)
	}
	if _, err := ks.OpenMeta(s1, ad); !errors.Is(err, ErrAuth) {
		t.Fatalf("data sealed blob opened with the meta key: %v", err)
	}
	s1[len(s1)-1] ^= 1
	if _, err := ks.OpenData(s1, ad); !errors.Is(err, ErrAuth) {
		t.Fatalf("flipped bit: %v", err)
	}
	if _, err := ks.OpenData(s1[:5], ad); !errors.Is(err, ErrAuth) {
		t.Fatalf("short: %v", err)
	}
	other := testKeys(t)
	s3, _ := ks.SealMeta(msg, ad)
	if _, err := other.OpenMeta(s3, ad); !errors.Is(err, ErrAuth) {
		t.Fatalf("other key: %v", err)
	}
}

func TestKeyedHashes(t *testing.T) {
	a, b := testKeys(t), testKeys(t)
	p := []byte("same content")
	if id1, id2 := a.ChunkID(p), a.ChunkID(bytes.Clone(p)); id1 != id2 {
		t.Fatal("chunk id not deterministic")
	}
	if a.ChunkID(p) == b.ChunkID(p) {
		t.Fatal("chunk id does not depend on the key")
	}
	if a.ObjectName(p) == b.ObjectName(p) || len(a.ObjectName(p)) != 64 {
		t.Fatal("object name does not depend on the key or has the wrong length")
	}
	if a.ChunkID(p).String() == a.ObjectName(p) {
		t.Fatal("chunk ids and object names share a key")
	}
	if bytes.Equal(a.ChunkerKey(), b.ChunkerKey()) {
		t.Fatal("chunker key does not depend on the master key")
	}
}

func TestDeriveDeterministic(t *testing.T) {
	k, _ := NewKey()
	a, _ := k.Derive()
	b, _ := k.Derive()
	if a.ChunkID([]byte("x")) != b.ChunkID([]byte("x")) {
		t.Fatal("derivation not deterministic")
	}
	s, _ := a.SealMeta([]byte("m"), nil)
	if _, err := b.OpenMeta(s, nil); err != nil {
		t.Fatal(err)
	}
}

func TestKeySlot(t *testing.T) {
	k, _ := NewKey()
	fast := KDFParams{LogN: 10, R: 8, P: 1}
	slot, err := SealKey(k, []byte("correct horse"), fast)
	if err != nil {
		t.Fatal(err)
	}
	if len(slot) != SlotSize {
		t.Fatalf("slot size %d", len(slot))
	}
	got, err := OpenKey(slot, []byte("correct horse"))
	if err != nil || *got != *k {
		t.Fatalf("OpenKey = %v", err)
	}
	if _, err := OpenKey(slot, []byte("wrong")); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	if _, err := OpenKey(slot[:10], []byte("x")); err == nil {
		t.Fatal("short slot accepted")
	}
	bad := bytes.Clone(slot)
	bad[9] = 40 // logN
	if _, err := OpenKey(bad, []byte("correct horse")); err == nil {
		t.Fatal("absurd scrypt cost accepted")
	}
}

func TestAppendSealData(t *testing.T) {
	ks := testKeys(t)
	msg, ad := []byte("chunk body"), []byte("ad")
	buf := make([]byte, 0, 64)
	for range 2 { // the second reuses the buffer
		out, err := ks.AppendSealData(append(buf[:0], "prefix"...), msg, ad)
		if err != nil {
			t.Fatal(err)
		}
		if string(out[:6]) != "prefix" || len(out) != 6+len(msg)+Overhead {
			t.Fatalf("appended %d bytes after %q", len(out)-6, out[:6])
		}
		got, err := ks.OpenData(out[6:], ad)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("open = %q, %v", got, err)
		}
		buf = out
	}
}
