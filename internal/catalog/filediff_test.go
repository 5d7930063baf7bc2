package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
)

func TestDiffPath(t *testing.T) {
	if parts, err := diffPath("/etc/app.conf"); err != nil || strings.Join(parts, "|") != "etc|app.conf" {
		t.Fatalf("%v %v", parts, err)
	}
	for _, bad := range []string{"", "/", "etc/x", "/etc/../x", "/etc//x", "/etc/x/", "/a\x00b", "/" + strings.Repeat("a", 4096)} {
		if _, err := diffPath(bad); err == nil {
			t.Errorf("diffPath(%q) accepted", bad)
		}
	}
}

// A side is read below its root and never through a link: a link to a
// host file, or a directory that is a link, counts as not text.
func TestReadSide(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(outside, []byte("host secret\n"), 0o600))
	must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(os.WriteFile(filepath.Join(root, "etc", "text"), []byte("hello\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "etc", "bin"), []byte("a\x00b"), 0o644))
	must(os.WriteFile(filepath.Join(root, "etc", "big"), make([]byte, api.MaxTextDiff+1), 0o644))
	must(os.Symlink(outside, filepath.Join(root, "etc", "link")))
	must(os.Symlink(filepath.Dir(outside), filepath.Join(root, "dirlink")))
	for _, tc := range []struct {
		path string
		want side
	}{
		{"/etc/text", side{data: []byte("hello\n")}},
		{"/etc/none", side{missing: true}},
		{"/nodir/x", side{missing: true}},
		{"/etc/bin", side{binary: true}},
		{"/etc/big", side{tooLarge: true}},
		{"/etc/link", side{binary: true}},
		{"/dirlink/secret", side{binary: true}},
		{"/etc", side{binary: true}},
	} {
		parts, _ := diffPath(tc.path)
		got, err := readSide(root, parts)
		if err != nil || string(got.data) != string(tc.want.data) || got.missing != tc.want.missing || got.binary != tc.want.binary || got.tooLarge != tc.want.tooLarge {
			t.Errorf("%s: %+v %v, want %+v", tc.path, got, err, tc.want)
		}
	}
}
