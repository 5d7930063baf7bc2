package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// The package cache of an apt build: copied into the tree (what it has
// already skipped), back into the cache, the cache pruned to what the tree
// kept, and the tree's copies removed with its partial downloads.
func TestAptPackageCache(t *testing.T) {
	cache, archives := t.TempDir(), filepath.Join(t.TempDir(), "var/cache/apt/archives")
	write := func(dir, name, content string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := func(dir string) []string {
		m, _ := filepath.Glob(filepath.Join(dir, "*"))
		for i := range m {
			m[i] = filepath.Base(m[i])
		}
		return m
	}
	write(cache, "git_1_amd64.deb", "git")
	write(cache, "old_1_all.deb", "old")
	write(cache, "notes.txt", "not a package")
	write(archives, "old_1_all.deb", "old")
	if n, err := copyDebs(cache, archives); err != nil || n != 1 {
		t.Fatalf("copied %d (%v), want 1", n, err)
	}
	// apt downloads python, autoclean drops old.
	write(archives, "python3_2_amd64.deb", "python")
	write(filepath.Join(archives, "partial"), "half_1_all.deb", "ha")
	os.Remove(filepath.Join(archives, "old_1_all.deb"))
	if n, err := copyDebs(archives, cache); err != nil || n != 1 {
		t.Fatalf("copied back %d (%v), want 1", n, err)
	}
	if err := pruneDebs(cache, archives); err != nil {
		t.Fatal(err)
	}
	if got := names(cache); !slices.Equal(got, []string{"git_1_amd64.deb", "notes.txt", "python3_2_amd64.deb"}) {
		t.Errorf("cache %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(cache, "python3_2_amd64.deb")); string(b) != "python" {
		t.Errorf("cached python3: %q", b)
	}
	if err := removeDebs(archives); err != nil {
		t.Fatal(err)
	}
	if got := names(archives); !slices.Equal(got, []string{"partial"}) {
		t.Errorf("archives after removeDebs %q", got)
	}
	if got := names(filepath.Join(archives, "partial")); len(got) != 0 {
		t.Errorf("partial downloads left %q", got)
	}
}

// Errors of debootstrap and apt that are the mirror's are tried again;
// others are not.
func TestMirrorFailed(t *testing.T) {
	for msg, want := range map[string]bool{
		"exit status 1: E: Failed getting release file http://deb.debian.org/debian/dists/bookworm/Release":                                       true,
		"exit status 100: E: Failed to fetch http://deb.debian.org/debian/pool/main/g/git/git_2.39.5_amd64.deb  404":                              true,
		"exit status 100: E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?":                                  true,
		"exit status 100: W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'": true,
		"exit status 100: E: Unable to locate package pyhton3":                                                                                    false,
		"exit status 100: E: Sub-process /usr/bin/dpkg returned an error code (1)":                                                                false,
	} {
		if got := mirrorFailed(errors.New(msg)); got != want {
			t.Errorf("mirrorFailed(%q) = %v, want %v", msg, got, want)
		}
	}
}

// A mirror's failure is tried again, after a reset, three tries in all;
// another failure at once.
func TestRetryMirror(t *testing.T) {
	defer func(d time.Duration) { mirrorRetryDelay = d }(mirrorRetryDelay)
	mirrorRetryDelay = time.Millisecond
	ctx := context.Background()
	for _, tc := range []struct {
		fails           []string // what each try returns; past its end, success
		tries, resets   int
		reported        int
		wantErrContains string
	}{
		{fails: nil, tries: 1},
		{fails: []string{"E: Failed to fetch x", "E: Unable to fetch some archives"}, tries: 3, resets: 2, reported: 2},
		{fails: []string{"E: Failed to fetch x", "E: Failed to fetch y", "E: Failed to fetch z"}, tries: 3, resets: 2, reported: 2, wantErrContains: "apt-get: E: Failed to fetch z"},
		{fails: []string{"E: Failed to fetch x", "E: Unable to locate package nope"}, tries: 2, resets: 1, reported: 1, wantErrContains: "apt-get: E: Unable to locate"},
	} {
		tries, resets, reported := 0, 0, 0
		err := retryMirror(ctx, func(api.Progress, string) { reported++ }, "apt-get", func() error {
			tries++
			if tries <= len(tc.fails) {
				return errors.New(tc.fails[tries-1])
			}
			return nil
		}, func() error { resets++; return nil })
		if tc.wantErrContains == "" && err != nil || tc.wantErrContains != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrContains)) {
			t.Errorf("%q: %v, want %q", tc.fails, err, tc.wantErrContains)
		}
		if tries != tc.tries || resets != tc.resets || reported != tc.reported {
			t.Errorf("%q: %d tries, %d resets, %d reported; want %d, %d, %d", tc.fails, tries, resets, reported, tc.tries, tc.resets, tc.reported)
		}
	}
}
