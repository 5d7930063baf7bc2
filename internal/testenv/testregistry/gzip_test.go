package testregistry

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

func TestGzipPadded(t *testing.T) {
	raw := []byte(strings.Repeat("layer content ", 100))
	plain, err := gzipMember(raw, gzip.Header{}, gzip.DefaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	for _, extra := range []int{0, 1, 2, 100, 511, 512, 513, 514, 600, 65557, 65558, 70000, 200000} {
		size := len(plain) + extra
		b, err := gzipPadded(raw, size)
		if err != nil && extra == 1 {
			continue // one byte too few may not be made up, it says so
		}
		if err != nil {
			t.Fatalf("+%d: %v", extra, err)
		}
		if len(b) != size {
			t.Fatalf("+%d: %d bytes, want %d", extra, len(b), size)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("+%d: %v", extra, err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("+%d: read back %d bytes (%v), want %d", extra, len(got), err, len(raw))
		}
	}
	if _, err := gzipPadded(raw, len(plain)-1); err == nil {
		t.Error("padded into less than its compressed size")
	}
}
