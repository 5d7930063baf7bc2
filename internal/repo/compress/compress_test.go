package compress

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestRoundTrip(t *testing.T) {
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	for name, p := range map[string][]byte{
		"empty":        {},
		"compressible": bytes.Repeat([]byte("cairn "), 10000),
		"small":        bytes.Repeat([]byte("ab"), 60),
		"random":       random,
	} {
		enc := Encode(p)
		if name == "compressible" && (enc[0] != zstd1 || len(enc) > len(p)/10) {
			t.Errorf("%s: not compressed (%d bytes)", name, len(enc))
		}
		if name == "random" && enc[0] != raw {
			t.Errorf("%s: stored as zstd although it does not shrink", name)
		}
		got, err := Decode(enc, len(p))
		if err != nil || !bytes.Equal(got, p) {
			t.Errorf("%s: decode = %d bytes, %v", name, len(got), err)
		}
	}
}

func TestDecodeLimits(t *testing.T) {
	big := Encode(bytes.Repeat([]byte{0}, 1<<20))
	if _, err := Decode(big, 1000); err == nil {
		t.Error("zstd body past the limit accepted")
	}
	if _, err := Decode(Encode([]byte("abc")), 2); err == nil {
		t.Error("raw body past the limit accepted")
	}
	for _, b := range [][]byte{nil, {7}, {zstd1}, {zstd1, 1, 2, 3}, append([]byte{zstd1}, big[1:20]...)} {
		if _, err := Decode(b, 1<<20); err == nil {
			t.Errorf("Decode(%x) accepted", b)
		}
	}
}

func TestAppendEncode(t *testing.T) {
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	for _, p := range [][]byte{{}, bytes.Repeat([]byte("cairn "), 10000), random} {
		out := AppendEncode([]byte("prefix"), p, Default)
		if string(out[:6]) != "prefix" || !bytes.Equal(out[6:], Encode(p)) {
			t.Fatalf("AppendEncode of %d bytes differs from Encode", len(p))
		}
	}
	// No frame checksum: the body is sealed and the chunk checked by id.
	var h zstd.Header
	if err := h.Decode(Encode(bytes.Repeat([]byte("cairn "), 10000))[1:]); err != nil || h.HasCheckSum {
		t.Fatalf("frame header %+v, %v", h, err)
	}
}

func TestLevels(t *testing.T) {
	var text bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&text, "line %d: the sandbox %x was checkpointed\n", i, i*7919)
	}
	def, better := AppendEncode(nil, text.Bytes(), Default), AppendEncode(nil, text.Bytes(), Better)
	if len(better) >= len(def) {
		t.Errorf("Better is not smaller than Default: %d ≥ %d bytes", len(better), len(def))
	}
	for _, enc := range [][]byte{def, better} {
		if got, err := Decode(enc, text.Len()); err != nil || !bytes.Equal(got, text.Bytes()) {
			t.Fatalf("decode: %v", err)
		}
	}
}

func TestIncompressible(t *testing.T) {
	random := make([]byte, 256<<10)
	_, _ = rand.Read(random)
	repeated := bytes.Repeat([]byte("cairn keeps every checkpoint "), 10000)
	binaryish := make([]byte, 256<<10) // skewed bytes: compressible although nothing repeats
	for i := range binaryish {
		binaryish[i] = random[i] & 0x3f
	}
	for _, c := range []struct {
		name string
		p    []byte
		want bool
	}{
		{"random", random, true},
		{"random, smallest judged", random[:entropySample], true},
		{"random, too short to judge", random[:entropySample-1], false},
		{"text", repeated, false},
		{"six bits per byte", binaryish, false},
	} {
		if got := Incompressible(c.p); got != c.want {
			t.Errorf("%s: Incompressible = %v, want %v", c.name, got, c.want)
		}
	}
	// Kept raw without trying, and decoded back.
	enc := AppendEncode(nil, random, Better)
	if enc[0] != raw || !bytes.Equal(enc[1:], random) {
		t.Fatal("random body not kept raw")
	}
	if enc := AppendEncode(nil, binaryish, Default); enc[0] != zstd1 || len(enc) > len(binaryish)*7/8 {
		t.Fatalf("six-bit body: encoding %d, %d bytes", enc[0], len(enc))
	}
}
