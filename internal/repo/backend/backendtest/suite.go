// Package backendtest is the test suite every backend.Backend passes, and a
// fault-injecting wrapper for testing what sits above a backend.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
)

// Run runs the suite; newBackend returns a fresh, empty backend for each subtest.
func Run(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	ctx := context.Background()
	t.Run("NotFound", func(t *testing.T) {
		b := newBackend(t)
		if _, err := b.Load(ctx, "packs/missing"); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("Load of a missing object: %v, want ErrNotFound", err)
		}
		if _, err := b.Stat(ctx, "packs/missing"); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("Stat of a missing object: %v, want ErrNotFound", err)
		}
		if err := b.Remove(ctx, "packs/missing"); err != nil {
			t.Errorf("Remove of a missing object: %v", err)
		}
		if l, err := b.List(ctx, "packs/"); err != nil || len(l) != 0 {
			t.Errorf("List of an empty backend = %v, %v", l, err)
		}
	})
	t.Run("SaveLoad", func(t *testing.T) {
		b := newBackend(t)
		big := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
		for name, data := range map[string][]byte{"packs/big": big, "heads/empty": {}, "keys/k": []byte("key")} {
			if err := b.Save(ctx, name, data); err != nil {
				t.Fatalf("Save %s: %v", name, err)
			}
			got, err := b.Load(ctx, name)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("Load %s = %d bytes, %v; want %d bytes", name, len(got), err, len(data))
			}
			info, err := b.Stat(ctx, name)
			if err != nil || info.Size != int64(len(data)) || info.Name != name {
				t.Fatalf("Stat %s = %+v, %v", name, info, err)
			}
			// Saving the same object again is fine.
			if err := b.Save(ctx, name, data); err != nil {
				t.Fatalf("second Save %s: %v", name, err)
			}
		}
	})
	t.Run("Create", func(t *testing.T) {
		b := newBackend(t)
		if err := b.Create(ctx, "heads/0001", []byte("first")); err != nil {
			t.Fatalf("Create of a new name: %v", err)
		}
		if err := b.Create(ctx, "heads/0001", []byte("second")); !errors.Is(err, backend.ErrExists) {
			t.Fatalf("second Create of one name: %v, want ErrExists", err)
		}
		if got, err := b.Load(ctx, "heads/0001"); err != nil || string(got) != "first" {
			t.Fatalf("Load after a refused Create = %q, %v; want the first content", got, err)
		}
		// A name that Save wrote counts as taken too.
		if err := b.Save(ctx, "heads/0002", []byte("saved")); err != nil {
			t.Fatal(err)
		}
		if err := b.Create(ctx, "heads/0002", []byte("created")); !errors.Is(err, backend.ErrExists) {
			t.Fatalf("Create over a saved object: %v, want ErrExists", err)
		}
		// Once removed, the name can be created again.
		if err := b.Remove(ctx, "heads/0001"); err != nil {
			t.Fatal(err)
		}
		if err := b.Create(ctx, "heads/0001", []byte("again")); err != nil {
			t.Fatalf("Create after Remove: %v", err)
		}
		if got, err := b.Load(ctx, "heads/0001"); err != nil || string(got) != "again" {
			t.Fatalf("Load = %q, %v", got, err)
		}
		if l, err := b.List(ctx, ""); err != nil || len(l) != 2 {
			t.Fatalf("List after creates = %v, %v", l, err)
		}
	})
	t.Run("CreateConcurrent", func(t *testing.T) {
		b := newBackend(t)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				errs[i] = b.Create(ctx, "heads/race", bytes.Repeat([]byte{byte('a' + i)}, 100<<10))
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("Creates %d and %d of one name both succeeded", winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, backend.ErrExists):
				t.Fatalf("Create %d: %v, want ErrExists", i, err)
			}
		}
		if winner < 0 {
			t.Fatal("no concurrent Create succeeded")
		}
		got, err := b.Load(ctx, "heads/race")
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte('a' + winner)}, 100<<10)) {
			t.Fatalf("the object is not the winner's (%d): %d bytes, %v", winner, len(got), err)
		}
	})
	t.Run("List", func(t *testing.T) {
		b := newBackend(t)
		for _, n := range []string{"packs/aa", "packs/ab", "index/aa", "heads/x", "packsx"} {
			if err := b.Save(ctx, n, []byte(n)); err != nil {
				t.Fatal(err)
			}
		}
		for prefix, want := range map[string][]string{
			"packs/":  {"packs/aa", "packs/ab"},
			"packs/a": {"packs/aa", "packs/ab"},
			"packs":   {"packs/aa", "packs/ab", "packsx"},
			"index/":  {"index/aa"},
			"keys/":   nil,
			"":        {"heads/x", "index/aa", "packs/aa", "packs/ab", "packsx"},
		} {
			l, err := b.List(ctx, prefix)
			if err != nil {
				t.Fatalf("List %q: %v", prefix, err)
			}
			var got []string
			for _, i := range l {
				got = append(got, i.Name)
				if i.Size != int64(len(i.Name)) {
					t.Errorf("List %q: %s has size %d", prefix, i.Name, i.Size)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("List %q = %v, want %v", prefix, got, want)
			}
		}
	})
	t.Run("Remove", func(t *testing.T) {
		b := newBackend(t)
		if err := b.Save(ctx, "manifests/m", []byte("m")); err != nil {
			t.Fatal(err)
		}
		if err := b.Remove(ctx, "manifests/m"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Load(ctx, "manifests/m"); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Load after Remove: %v", err)
		}
		if err := b.Remove(ctx, "manifests/m"); err != nil {
			t.Fatalf("second Remove: %v", err)
		}
	})
	t.Run("InvalidNames", func(t *testing.T) {
		b := newBackend(t)
		for _, n := range []string{"", "/abs", "a//b", "../up", "a/../b", "sp ace", "a/"} {
			if err := b.Save(ctx, n, []byte("x")); err == nil {
				t.Errorf("Save(%q) accepted", n)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		b := newBackend(t)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Go(func() {
				name := fmt.Sprintf("packs/%02d", i)
				if err := b.Save(ctx, name, bytes.Repeat([]byte{byte(i)}, 1000+i)); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		l, err := b.List(ctx, "packs/")
		if err != nil || len(l) != 16 {
			t.Fatalf("List after concurrent saves: %d objects, %v", len(l), err)
		}
	})
	t.Run("Canceled", func(t *testing.T) {
		b := newBackend(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := b.Save(cctx, "packs/c", []byte("c")); err == nil {
			t.Fatal("Save with a canceled context succeeded")
		}
		if err := b.Create(cctx, "packs/c", []byte("c")); err == nil {
			t.Fatal("Create with a canceled context succeeded")
		}
		if _, err := b.Load(ctx, "packs/c"); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("object saved under a canceled context: %v", err)
		}
	})
}
