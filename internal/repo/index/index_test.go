package index

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/crypto"
	"github.com/cairn-sandbox/cairn/internal/repo/pack"
)

var name1, name2 = strings.Repeat("a1", 32), strings.Repeat("0f", 32)

func TestSegmentRoundTrip(t *testing.T) {
	s := &Segment{Packs: []Pack{
		{Name: name1, Size: 200, Entries: []pack.Entry{
			{Type: pack.Data, ID: crypto.ID{1}, Offset: 0, Length: 50, PlainLength: 10},
			{Type: pack.Data, ID: crypto.ID{2}, Offset: 50, Length: 60, PlainLength: 99}}},
		{Name: name2, Size: 100, Entries: []pack.Entry{}},
	}}
	got, err := DecodeSegment(EncodeSegment(s))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	bad := *s
	bad.Packs = []Pack{{Name: "short", Size: 1}}
	if _, err := DecodeSegment(EncodeSegment(&bad)); err == nil {
		t.Error("bad pack name accepted")
	}
	bad.Packs = []Pack{{Name: name1, Size: 10, Entries: s.Packs[0].Entries}}
	if _, err := DecodeSegment(EncodeSegment(&bad)); err == nil {
		t.Error("entries past the pack size accepted")
	}
	b := EncodeSegment(s)
	for n := range len(b) {
		if _, err := DecodeSegment(b[:n]); err == nil {
			t.Fatalf("segment truncated at %d accepted", n)
		}
	}
}

func TestHeadRoundTrip(t *testing.T) {
	h := &Head{Generation: 7, Manifests: []string{name1}, Deleted: []string{name2}, Indexes: []string{name1, name2}}
	got, err := DecodeHead(EncodeHead(h))
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	if _, err := DecodeHead(EncodeHead(&Head{Manifests: []string{"../x"}})); err == nil {
		t.Error("bad name accepted")
	}
	b := EncodeHead(h)
	for n := range len(b) {
		if _, err := DecodeHead(b[:n]); err == nil {
			t.Fatalf("head truncated at %d accepted", n)
		}
	}
	if !ValidName(name1) || ValidName(strings.ToUpper(name1)) || ValidName(name1[1:]) {
		t.Error("ValidName")
	}
}
