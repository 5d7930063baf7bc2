package buildctx_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
	"github.com/cairn-sandbox/cairn/internal/image/unpack"
	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// crafted is a tar a hostile or broken client could send as a build
// context.
func crafted(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if h.Format == tar.FormatUnknown {
			h.Format = tar.FormatPAX
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatalf("header %q: %v", h.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			w.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	must(t, w.Close())
	return buf.Bytes()
}

func regH(name string, mode int64, size int64) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size}
}

func dirH(name string, mode int64) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode}
}

// extractInto extracts data into a new directory (and a sentinel beside
// it that must stay empty) and returns the directory and the error.
func extractInto(t *testing.T, data []byte, opts buildctx.ExtractOptions) (string, unpack.Stats, error) {
	t.Helper()
	testenv.Require(t)
	base := t.TempDir()
	dir, outside := filepath.Join(base, "ctx"), filepath.Join(base, "outside")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.Mkdir(outside, 0o755))
	root, err := os.Open(dir)
	must(t, err)
	defer root.Close()
	st, err := buildctx.Extract(context.Background(), root, bytes.NewReader(data), opts)
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("written outside the context: %v", es)
	}
	return dir, st, err
}

// What a build context may not hold is refused with I13 (what it may not
// be) or I14 (how large it may not be), naming the entry; a malformed tar
// is V02.
func TestExtractRefuses(t *testing.T) {
	long := strings.Repeat("d/", 200) + "f"
	for name, tc := range map[string]struct {
		data []byte
		opts buildctx.ExtractOptions
		code string
		says string
	}{
		"char device":  {data: crafted(t, &tar.Header{Typeflag: tar.TypeChar, Name: "null", Mode: 0o666, Devmajor: 1, Devminor: 3}), code: api.CodeContextRefused, says: "device"},
		"block device": {data: crafted(t, &tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Mode: 0o660, Devmajor: 8}), code: api.CodeContextRefused, says: "device"},
		"fifo":         {data: crafted(t, &tar.Header{Typeflag: tar.TypeFifo, Name: "p", Mode: 0o644}), code: api.CodeContextRefused, says: "FIFO"},
		"hard link":    {data: crafted(t, regH("a", 0o644, 1), &tar.Header{Typeflag: tar.TypeLink, Name: "b", Linkname: "a"}), code: api.CodeContextRefused, says: "hard link"},
		"dot dot":      {data: crafted(t, regH("../outside/x", 0o644, 1)), code: api.CodeContextRefused, says: `".."`},
		"deep dot dot": {data: crafted(t, dirH("a/", 0o755), regH("a/../../outside/x", 0o644, 1)), code: api.CodeContextRefused, says: `".."`},
		"through a link": {data: crafted(t, &tar.Header{Typeflag: tar.TypeSymlink, Name: "up", Linkname: "../outside"}, regH("up/x", 0o644, 1)),
			code: api.CodeContextRefused, says: "symbolic link"},
		"whiteout":          {data: crafted(t, regH("dir/.wh.x", 0o644, 0)), code: api.CodeContextRefused, says: "whiteout"},
		"opaque marker":     {data: crafted(t, regH(".wh..wh..opq", 0o644, 0)), code: api.CodeContextRefused, says: "whiteout"},
		"escape in a name":  {data: crafted(t, regH("a\x1b]0;pwned\x07", 0o644, 0)), code: api.CodeContextRefused, says: "control character"},
		"newline in a name": {data: crafted(t, regH("a\nb", 0o644, 0)), code: api.CodeContextRefused, says: "control character"},
		"not UTF-8":         {data: crafted(t, regH("caf\xe9", 0o644, 0)), code: api.CodeContextRefused, says: "UTF-8"},
		"escape in a link": {data: crafted(t, &tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "\x1b[2J"}),
			code: api.CodeContextRefused, says: "target"},
		"too large": {data: crafted(t, regH("a", 0o644, 600), regH("b", 0o644, 600)), opts: buildctx.ExtractOptions{MaxBytes: 1000},
			code: api.CodeContextTooLarge, says: "more than 1000 bytes"},
		"too many entries": {data: crafted(t, regH("a", 0o644, 0), regH("b", 0o644, 0), regH("c", 0o644, 0), regH("d", 0o644, 0)),
			opts: buildctx.ExtractOptions{MaxEntries: 3}, code: api.CodeContextTooLarge, says: "more than 3 entries"},
		"parents count as entries": {data: crafted(t, regH("a/b/c/d", 0o644, 0)), opts: buildctx.ExtractOptions{MaxEntries: 3},
			code: api.CodeContextTooLarge, says: "more than 3 entries"},
		"too deep":       {data: crafted(t, regH(long, 0o644, 0)), opts: buildctx.ExtractOptions{MaxDepth: 100}, code: api.CodeContextTooLarge, says: "components"},
		"name too long":  {data: crafted(t, regH(strings.Repeat("n", 200), 0o644, 0)), opts: buildctx.ExtractOptions{MaxNameLen: 100}, code: api.CodeContextTooLarge, says: "bytes"},
		"not a tar":      {data: bytes.Repeat([]byte("not a tar "), 100), code: api.CodeInvalidArgument, says: "the build context"},
		"cut short":      {data: crafted(t, regH("a", 0o644, 4096))[:1024], code: api.CodeInvalidArgument, says: "the build context"},
		"default depth":  {data: crafted(t, regH(strings.Repeat("d/", unpack.RestrictedMaxDepth)+"f", 0o644, 0)), code: api.CodeContextTooLarge, says: "components"},
		"default length": {data: crafted(t, regH(strings.Repeat(strings.Repeat("n", 250)+"/", 20)+"f", 0o644, 0)), code: api.CodeContextTooLarge, says: "bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := extractInto(t, tc.data, tc.opts)
			if err == nil {
				t.Fatal("extracted")
			}
			if got := errdefs.CodeOf(err); got != tc.code || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v (%s), want %s saying %q", err, got, tc.code, tc.says)
			}
		})
	}
}

// What the restricted mode neutralises rather than refuses: setuid and
// setgid bits are cleared, the archive's owners and extended attributes
// are not taken (everything is the build's owner's), symbolic links are
// made as they are, whatever they point at.
func TestExtractNeutralises(t *testing.T) {
	owned := func(h *tar.Header) *tar.Header {
		h.Uid, h.Gid, h.Uname, h.Gname = 1234, 5678, "someone", "others"
		h.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02", "SCHILY.xattr.user.x": "1"}
		return h
	}
	data := crafted(t,
		owned(dirH("shared/", 0o3777)),      // setgid and sticky
		owned(regH("shared/su", 0o4755, 3)), // setuid
		owned(regH("sg", 0o2711, 0)),
		owned(&tar.Header{Typeflag: tar.TypeSymlink, Name: "etc-link", Linkname: "/etc"}),
		owned(&tar.Header{Typeflag: tar.TypeSymlink, Name: "up", Linkname: "../../.."}),
		regH("deep/made/parents/f", 0o644, 1),
	)
	for _, tc := range []struct {
		name     string
		uid, gid uint32
	}{{"root", 0, 0}, {"build user", 1000, 1000}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, st, err := extractInto(t, data, buildctx.ExtractOptions{UID: tc.uid, GID: tc.gid})
			if err != nil {
				t.Fatal(err)
			}
			if st.SetIDCleared != 3 {
				t.Errorf("%d setuid/setgid bits cleared, want 3", st.SetIDCleared)
			}
			for rel, mode := range map[string]os.FileMode{
				"shared":    os.ModeDir | os.ModeSticky | 0o777,
				"shared/su": 0o755,
				"sg":        0o711,
				"deep/made": os.ModeDir | 0o755,
			} {
				fi, err := os.Lstat(filepath.Join(dir, rel))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode() != mode {
					t.Errorf("%s: mode %v, want %v", rel, fi.Mode(), mode)
				}
			}
			for _, rel := range []string{".", "shared", "shared/su", "sg", "etc-link", "up", "deep", "deep/made/parents/f"} {
				fi, err := os.Lstat(filepath.Join(dir, rel))
				if err != nil {
					t.Fatal(err)
				}
				if s := fi.Sys().(*syscall.Stat_t); rel != "." && (s.Uid != tc.uid || s.Gid != tc.gid) {
					t.Errorf("%s owned by %d:%d, want %d:%d", rel, s.Uid, s.Gid, tc.uid, tc.gid)
				}
				buf := make([]byte, 1024)
				if n, _ := syscall.Listxattr(filepath.Join(dir, rel), buf); n > 0 && rel != "etc-link" && rel != "up" {
					t.Errorf("%s has extended attributes %q", rel, buf[:n])
				}
			}
			for link, target := range map[string]string{"etc-link": "/etc", "up": "../../.."} {
				if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != target {
					t.Errorf("%s -> %q (%v), want %q", link, got, err, target)
				}
			}
		})
	}
}

// What the CLI writes extracts as it was written.
func TestExtractWhatWriteContextWrites(t *testing.T) {
	src := t.TempDir()
	tree(t, src, "Dockerfile", "FROM busybox\n", "app/main.sh", "echo hi\n", "app/link", "-> main.sh", "empty/", "")
	var buf bytes.Buffer
	if _, err := buildctx.WriteContext(&buf, src, buildctx.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	dir, _, err := extractInto(t, buf.Bytes(), buildctx.ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.Open(dir)
	must(t, err)
	defer root.Close()
	if df, err := buildctx.ReadDockerfile(root); err != nil || string(df) != "FROM busybox\n" {
		t.Fatalf("Dockerfile %q (%v)", df, err)
	}
	if got, err := os.Readlink(filepath.Join(dir, "app/link")); err != nil || got != "main.sh" {
		t.Errorf("link -> %q (%v)", got, err)
	}
}
