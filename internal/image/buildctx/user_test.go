package buildctx_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
)

const passwd = `root:x:0:0:root:/root:/bin/sh
# a comment
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin

app:x:1000:1000:App:/home/app:/bin/sh
other:x:1001:100::/home/other:/bin/sh
short:x:1002
`

const group = `root:x:0:
wheel:x:10:app,other
users:x:100:app
app:x:1000:app
staff:x:50:
`

func accountRoot(t *testing.T) string {
	dir := t.TempDir()
	tree(t, dir, "etc/passwd", passwd, "etc/group", group)
	return dir
}

func TestLookupUser(t *testing.T) {
	root := openDir(t, accountRoot(t))
	for _, tt := range []struct {
		spec string
		want buildctx.User
	}{
		{"", buildctx.User{UID: 0, GID: 0, Groups: []uint32{}, Home: "/root"}},
		{"root", buildctx.User{UID: 0, GID: 0, Groups: []uint32{}, Home: "/root"}},
		{"app", buildctx.User{UID: 1000, GID: 1000, Groups: []uint32{10, 100}, Home: "/home/app"}},
		{"1000", buildctx.User{UID: 1000, GID: 1000, Groups: []uint32{10, 100}, Home: "/home/app"}},
		{"other", buildctx.User{UID: 1001, GID: 100, Groups: []uint32{10}, Home: "/home/other"}},
		{"app:staff", buildctx.User{UID: 1000, GID: 50, Groups: []uint32{}, Home: "/home/app"}},
		{"app:77", buildctx.User{UID: 1000, GID: 77, Groups: []uint32{}, Home: "/home/app"}},
		{"4242", buildctx.User{UID: 4242, GID: 0, Groups: []uint32{}}},
		{"4242:4343", buildctx.User{UID: 4242, GID: 4343, Groups: []uint32{}}},
		{"4242:users", buildctx.User{UID: 4242, GID: 100, Groups: []uint32{}}},
	} {
		got, err := buildctx.LookupUser(root, tt.spec)
		if err != nil {
			t.Errorf("%q: %v", tt.spec, err)
			continue
		}
		if got.UID != tt.want.UID || got.GID != tt.want.GID || got.Home != tt.want.Home ||
			!slices.Equal(got.Groups, tt.want.Groups) || got.Groups == nil {
			t.Errorf("%q: got %+v, want %+v", tt.spec, got, tt.want)
		}
	}
	for _, spec := range []string{"nobody", "app:nogroup", "nobody:0"} {
		_, err := buildctx.LookupUser(root, spec)
		name, _, _ := strings.Cut(strings.TrimPrefix(spec, "app:"), ":")
		if !errors.Is(err, buildctx.ErrNoUser) || !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("%q: got %v, want ErrNoUser naming %q", spec, err, name)
		}
	}
	if _, err := buildctx.LookupUser(root, ":0"); err == nil {
		t.Error(`":0": no error`)
	}
	if _, err := buildctx.LookupUser(root, "short"); err == nil {
		t.Error("a passwd line without a gid: no error")
	}
}

func TestLookupUserNoFiles(t *testing.T) {
	root := openDir(t, t.TempDir())
	u, err := buildctx.LookupUser(root, "123:456")
	must(t, err)
	if u.UID != 123 || u.GID != 456 || u.Home != "" {
		t.Errorf("got %+v", u)
	}
	if _, err := buildctx.LookupUser(root, "app"); !errors.Is(err, buildctx.ErrNoUser) {
		t.Errorf("a name with no /etc/passwd: got %v, want ErrNoUser", err)
	}
}

func TestLookupUserNeverReadsTheHost(t *testing.T) {
	// The host's own /etc/passwd has root; these roots point at it.
	for name, spec := range map[string][]string{
		"passwd a link to the host's": {"etc/passwd", "-> /etc/passwd"},
		"passwd a relative link out":  {"etc/passwd", "-> ../../../../../../../../etc/passwd"},
		"etc a link to the host's":    {"etc", "-> /etc"},
		"etc a relative link out":     {"etc", "-> ../../../../../../../../etc"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tree(t, dir, spec...)
			u, err := buildctx.LookupUser(openDir(t, dir), "root")
			if err == nil {
				t.Fatalf("found root (%+v): the host's /etc/passwd was read", u)
			}
		})
	}
	// A link inside the root is followed, as a container would.
	dir := t.TempDir()
	tree(t, dir, "real/passwd", passwd, "etc/passwd", "-> /real/passwd")
	u, err := buildctx.LookupUser(openDir(t, dir), "app")
	must(t, err)
	if u.UID != 1000 {
		t.Errorf("got %+v", u)
	}
}

func TestLookupUserRefusesOddFiles(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(dir, "etc/passwd"), 0o644))
	if _, err := buildctx.LookupUser(openDir(t, dir), "root"); err == nil {
		t.Error("a FIFO as /etc/passwd: no error")
	}
	dir = t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "etc"), 0o755))
	f, err := os.Create(filepath.Join(dir, "etc/passwd"))
	must(t, err)
	must(t, f.Truncate(5<<20))
	must(t, f.Close())
	if _, err := buildctx.LookupUser(openDir(t, dir), "root"); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("a 5 MiB /etc/passwd: got %v", err)
	}
}
