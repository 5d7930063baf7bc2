package repo

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// What a backup is given as Meta comes back, authenticated, from its
// manifest, with when it was made; too much is refused before anything is
// written.
func TestBackupMeta(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "src")
	must(t, os.MkdirAll(src, 0o755))
	must(t, os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644))
	before := time.Now()
	ref, _, err := f.repo.Backup(ctx, src, BackupOptions{Meta: []byte(`{"sandbox":"web","seq":"v3"}`)})
	must(t, err)
	info, err := f.repo.Info(ctx, ref)
	must(t, err)
	if string(info.Meta) != `{"sandbox":"web","seq":"v3"}` || info.Created.Before(before.Add(-time.Second)) || info.Created.After(time.Now()) {
		t.Fatalf("info %q %v", info.Meta, info.Created)
	}
	plain, _, err := f.repo.Backup(ctx, src, BackupOptions{})
	must(t, err)
	if info, err := f.repo.Info(ctx, plain); err != nil || info.Meta != nil {
		t.Fatalf("a backup without meta: %q %v", info.Meta, err)
	}
	n := len(f.repo.List())
	if _, _, err := f.repo.Backup(ctx, src, BackupOptions{Meta: make([]byte, 64<<10+1)}); err == nil {
		t.Fatal("a meta past the bound was stored")
	}
	if len(f.repo.List()) != n {
		t.Fatal("a refused backup left a manifest")
	}
}
