package wire

import (
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var e Encoder
	e.Byte(7)
	e.Uvarint(300)
	e.Varint(-5)
	e.String("name")
	e.Bytes([]byte{1, 2})
	e.Raw([]byte{9, 9, 9})
	d := NewDecoder(e.B)
	if d.Byte() != 7 || d.Uvarint() != 300 || d.Varint() != -5 || d.String() != "name" ||
		string(d.Bytes()) != "\x01\x02" || string(d.Raw(3)) != "\x09\x09\x09" {
		t.Fatal("round trip mismatch")
	}
	if err := d.Done(); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsStick(t *testing.T) {
	var e Encoder
	e.Uvarint(1 << 40) // a count far larger than the input
	d := NewDecoder(e.B)
	if d.Count(1) != 0 || !errors.Is(d.Err(), ErrCorrupt) {
		t.Fatalf("huge count accepted: %v", d.Err())
	}
	if d.Byte() != 0 || d.String() != "" || d.Raw(1) != nil {
		t.Fatal("reads after an error return data")
	}
	d = NewDecoder([]byte{5, 'a'})
	if d.String() != "" || d.Err() == nil {
		t.Fatal("string past the end accepted")
	}
	d = NewDecoder([]byte{1, 2})
	d.Byte()
	if d.Done() == nil {
		t.Fatal("trailing bytes accepted")
	}
	if NewDecoder(nil).Raw(-1) != nil {
		t.Fatal("negative length accepted")
	}
	if d := NewDecoder([]byte{0x80}); d.Uvarint() != 0 || d.Err() == nil {
		t.Fatal("truncated varint accepted")
	}
}
