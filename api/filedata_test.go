package api

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Bytes written through a FileDataWriter read back equal, in frames of at
// most FileChunk bytes, ended by io.EOF; an end with an error reads as a
// *FileDataError; a stream cut before its end is ErrFileDataCut.
func TestFileDataRoundTrip(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (2*FileChunk+100)/16)
	var stream bytes.Buffer
	fw := NewFileDataWriter(&stream)
	if _, err := fw.ReadFrom(bytes.NewReader(data[:FileChunk+7])); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(data[FileChunk+7:]); err != nil {
		t.Fatal(err)
	}
	if err := fw.End(nil); err != nil {
		t.Fatal(err)
	}
	whole := append([]byte(nil), stream.Bytes()...)
	got, err := io.ReadAll(NewFileDataReader(bytes.NewReader(whole)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d of %d bytes, %v", len(got), len(data), err)
	}

	for cut := 1; cut < len(whole); cut += len(whole) / 7 {
		_, err := io.ReadAll(NewFileDataReader(bytes.NewReader(whole[:cut])))
		if !errors.Is(err, ErrFileDataCut) {
			t.Errorf("cut at %d: %v, want ErrFileDataCut", cut, err)
		}
	}

	stream.Reset()
	fw = NewFileDataWriter(&stream)
	fw.Write([]byte("part"))
	fw.End(&AgentResult{Error: "read: input/output error", Code: "io"})
	got, err = io.ReadAll(NewFileDataReader(&stream))
	var fe *FileDataError
	if string(got) != "part" || !errors.As(err, &fe) || fe.Code != "io" {
		t.Errorf("an end with an error: %q %v", got, err)
	}
}

func TestCheckPath(t *testing.T) {
	for in, want := range map[string]string{
		"/":               "/",
		"/a/../../b":      "/b",
		"/../../../etc/x": "/etc/x",
		"//a//b/":         "/a/b",
		"/a/./b/.":        "/a/b",
	} {
		if got, err := CheckPath(in); err != nil || got != want {
			t.Errorf("CheckPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a/b", "./a", "/a\x00b", "/" + string(make([]byte, MaxPath))} {
		if _, err := CheckPath(in); err == nil {
			t.Errorf("CheckPath(%.20q) accepted", in)
		}
	}
}
