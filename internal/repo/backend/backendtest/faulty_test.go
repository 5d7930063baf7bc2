package backendtest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/local"
)

func TestFaultyPassesSuiteWithoutFaults(t *testing.T) {
	Run(t, func(t *testing.T) backend.Backend {
		l, err := local.New(filepath.Join(t.TempDir(), "loc"))
		if err != nil {
			t.Fatal(err)
		}
		return NewFaulty(l)
	})
}

func TestFaultyFails(t *testing.T) {
	l, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := NewFaulty(l)
	boom := errors.New("boom")
	f.Inject(func(op Op, name string) error {
		if op == OpSave && name == "packs/bad" {
			return boom
		}
		return nil
	})
	ctx := context.Background()
	if err := f.Save(ctx, "packs/bad", nil); !errors.Is(err, boom) {
		t.Fatalf("injected fault not returned: %v", err)
	}
	if err := f.Save(ctx, "packs/good", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stat(ctx, "packs/bad"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatal("a failed save reached the backend")
	}
}
