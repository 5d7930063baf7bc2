package buildctx_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
	"github.com/cairn-sandbox/cairn/internal/image/unpack"
	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// tarOf returns a tar of entries: name, then content ("/" ending a
// directory's name, "-> " starting a link's target).
func tarOf(t testing.TB, spec ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < len(spec); i += 2 {
		name, content := spec[i], spec[i+1]
		h := &tar.Header{Name: name, Mode: 0o644, ModTime: t0, Uid: 7, Gid: 8, Typeflag: tar.TypeReg, Size: int64(len(content))}
		switch {
		case name[len(name)-1] == '/':
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case len(content) > 3 && content[:3] == "-> ":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, content[3:], 0
		}
		must(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(content))
			must(t, err)
		}
	}
	must(t, tw.Close())
	return buf.Bytes()
}

func gzipped(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	_, err := z.Write(data)
	must(t, err)
	must(t, z.Close())
	return buf.Bytes()
}

func zstded(t testing.TB, data []byte) []byte {
	z, err := zstd.NewWriter(nil)
	must(t, err)
	defer z.Close()
	return z.EncodeAll(data, nil)
}

// compressed runs tool (bzip2, xz) on data.
func compressed(t *testing.T, tool string, data []byte) []byte {
	testenv.Require(t, tool)
	cmd := exec.Command(tool, "-c")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	must(t, err)
	return out
}

func TestAddExtractsArchives(t *testing.T) {
	archive := tarOf(t, "top/", "", "top/f", "in the archive", "top/l", "-> f")
	ctxDir := t.TempDir()
	tree(t, ctxDir, "not.tar.gz", "plain text", "empty.tar", "")
	for name, data := range map[string][]byte{
		"a.tar":      archive,
		"a.tar.gz":   gzipped(t, archive),
		"a.tzst":     zstded(t, archive),
		"notar.gz":   gzipped(t, []byte("gzip, but no tar")),
		"a.tar.bz2":  compressed(t, "bzip2", archive),
		"zeroes.tar": make([]byte, 1024),
	} {
		must(t, os.WriteFile(filepath.Join(ctxDir, name), data, 0o644))
	}
	for _, name := range []string{"a.tar", "a.tar.gz", "a.tzst", "a.tar.bz2"} {
		t.Run(name, func(t *testing.T) {
			im := newImage(t)
			tree(t, im.root, "x", "-> /opt", "opt/", "")
			opts := buildctx.CopyOptions{ExtractArchives: true, UID: 1, GID: 1}
			// A destination with no slash is a directory all the same.
			must(t, im.copy(t, ctxDir, []string{name}, "/x/dest", opts))
			equal(t, listing(t, im.path("opt/dest")), []string{
				"top drwxr-xr-x",
				"top/f -rw-r--r-- in the archive",
				"top/l Lrwxrwxrwx -> f",
			})
			if uid, gid := owner(t, im.path("opt/dest/top/f")); uid != 7 || gid != 8 {
				t.Errorf("owner %d:%d, want the archive's 7:8", uid, gid)
			}
			// Without ExtractArchives (COPY), it is a file.
			must(t, im.copy(t, ctxDir, []string{name}, "/copied/", buildctx.CopyOptions{}))
			if _, err := os.Stat(im.path("copied/" + name)); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("not archives", func(t *testing.T) {
		im := newImage(t)
		must(t, im.copy(t, ctxDir, []string{"not.tar.gz", "notar.gz", "empty.tar", "zeroes.tar"}, "/d/", buildctx.CopyOptions{ExtractArchives: true}))
		equal(t, dirNames(t, im.path("d")), []string{"empty.tar", "not.tar.gz", "notar.gz", "zeroes.tar"})
	})
	t.Run("xz", func(t *testing.T) {
		im := newImage(t)
		must(t, os.WriteFile(filepath.Join(ctxDir, "a.tar.xz"), compressed(t, "xz", archive), 0o644))
		err := im.copy(t, ctxDir, []string{"a.tar.xz"}, "/d/", buildctx.CopyOptions{ExtractArchives: true})
		if !errors.Is(err, buildctx.ErrArchive) {
			t.Errorf("got %v, want ErrArchive", err)
		}
	})
}

func TestAddArchiveAttacks(t *testing.T) {
	for name, archive := range map[string][]byte{
		"dot-dot":             tarOf(t, "../../outside/keep", "overwritten"),
		"through a link":      tarOf(t, "l", "-> ../../outside", "l/keep", "overwritten"),
		"through a root link": tarOf(t, "up/keep", "overwritten"),
	} {
		t.Run(name, func(t *testing.T) {
			im := newImage(t)
			// up is a link the image already has, to the outside.
			tree(t, im.root, "d/up", "-> "+im.outside)
			ctxDir := t.TempDir()
			must(t, os.WriteFile(filepath.Join(ctxDir, "a.tar"), archive, 0o644))
			err := im.copy(t, ctxDir, []string{"a.tar"}, "/d/", buildctx.CopyOptions{ExtractArchives: true})
			if !errors.Is(err, unpack.ErrUnsafe) {
				t.Errorf("got %v, want unpack.ErrUnsafe", err)
			}
		})
	}
}
