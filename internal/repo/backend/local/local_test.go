package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
)

func newLocal(t *testing.T) backend.Backend {
	b, err := New(filepath.Join(t.TempDir(), "loc"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSuite(t *testing.T) { backendtest.Run(t, newLocal) }

func TestNoTemporaryFilesLeft(t *testing.T) {
	dir := t.TempDir()
	b, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Save(context.Background(), "packs/p", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(context.Background(), tmpDir+"/evil", []byte("x")); err == nil {
		t.Fatal("the temporary directory is writable as an object")
	}
	left, _ := os.ReadDir(filepath.Join(dir, tmpDir))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if l, _ := b.List(context.Background(), ""); len(l) != 1 {
		t.Fatalf("List = %v", l)
	}
}
