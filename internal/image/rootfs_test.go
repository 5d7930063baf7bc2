package image

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/errdefs"
)

// Every root gets its mount points, /tmp world-writable and sticky; a
// /tmp that is a symbolic link is refused and its target left alone.
func TestPrepareRoot(t *testing.T) {
	dir := t.TempDir()
	if err := prepareRoot(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".cairn", "proc", "sys", "dev", "tmp"} {
		if fi, err := os.Lstat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("/%s: %v", d, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "tmp")); fi.Mode()&os.ModePerm != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("/tmp mode %v, want 1777", fi.Mode())
	}

	evil, outside := t.TempDir(), t.TempDir()
	os.Chmod(outside, 0o700)
	if err := os.Symlink(outside, filepath.Join(evil, "tmp")); err != nil {
		t.Fatal(err)
	}
	if err := prepareRoot(evil); errdefs.CodeOf(err) != api.CodeImageDamaged {
		t.Fatalf("a /tmp that is a link: %v, want %s", err, api.CodeImageDamaged)
	}
	if fi, _ := os.Stat(outside); fi.Mode()&os.ModePerm != 0o700 {
		t.Errorf("the link's target was changed: %v", fi.Mode())
	}
}
