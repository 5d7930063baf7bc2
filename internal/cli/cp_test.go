package cli

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestParseCpEnd(t *testing.T) {
	for in, want := range map[string]cpEnd{
		"web:/srv":       {sandbox: "web", path: "/srv"},
		"web-2:/":        {sandbox: "web-2", path: "/"},
		"./web:/srv":     {path: "./web:/srv"},
		"/abs/x:y":       {path: "/abs/x:y"},
		"Web:/srv":       {path: "Web:/srv"}, // not a sandbox name
		"file.txt":       {path: "file.txt"},
		"-":              {path: "-"},
		"web:relative/p": {sandbox: "web", path: "relative/p"},
	} {
		if got := parseCpEnd(in); got != want {
			t.Errorf("parseCpEnd(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func TestRenamed(t *testing.T) {
	for _, c := range []struct{ name, from, top, want string }{
		{"site/", "site", "copy", "copy/"},
		{"site/a/b", "site", "copy", "copy/a/b"},
		{"sitemap", "site", "copy", "sitemap"},
		{"a/b", "", "root", "root/a/b"},
		{"/site/x", "site", "site", "site/x"},
	} {
		if got := renamed(c.name, c.from, c.top); got != c.want {
			t.Errorf("renamed(%q, %q, %q) = %q, want %q", c.name, c.from, c.top, got, c.want)
		}
	}
}

// A tar from a sandbox cannot put anything outside the destination, by
// name or through a link it made; setuid is dropped without -a.
func TestExtractLocalStaysInside(t *testing.T) {
	outside := t.TempDir()
	for _, entries := range [][]tar.Header{
		{{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside}, {Name: "l/escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		{{Name: "h", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, hdr := range entries {
			tw.WriteHeader(&hdr)
		}
		tw.Close()
		if _, err := extractLocal(&buf, t.TempDir(), "", "", false); err == nil {
			t.Errorf("tar with %q extracted", entries[len(entries)-1].Name)
		}
		if des, _ := os.ReadDir(outside); len(des) != 0 {
			t.Fatalf("an entry landed outside: %v", des)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o555})
	tw.WriteHeader(&tar.Header{Name: "d/suid", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 2})
	tw.Write([]byte("hi"))
	tw.Close()
	dst := t.TempDir()
	res, err := extractLocal(&buf, dst, "d", "out", false)
	if err != nil || res.Entries != 2 || res.Bytes != 2 {
		t.Fatalf("extract: %+v %v", res, err)
	}
	fi, err := os.Stat(filepath.Join(dst, "out/suid"))
	if err != nil || fi.Mode() != 0o755 {
		t.Errorf("out/suid: %v %v, want -rwxr-xr-x", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "out")); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("read-only directory: %v %v (set after it was filled)", fi.Mode(), err)
	}
}
