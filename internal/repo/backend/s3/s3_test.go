package s3_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/backendtest"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
)

func TestSuite(t *testing.T) {
	srv := s3test.Start(t)
	backendtest.Run(t, func(t *testing.T) backend.Backend {
		// A fresh random prefix gives every subtest an empty location.
		p := make([]byte, 8)
		_, _ = rand.Read(p)
		cfg := srv.Config
		cfg.Prefix = hex.EncodeToString(p)
		b, err := s3.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestBadCredentialsAreNotNotFound(t *testing.T) {
	srv := s3test.Start(t)
	cfg := srv.Config
	cfg.SecretKey = "wrong"
	b, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Load(context.Background(), "packs/x")
	if err == nil || errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Load with bad credentials = %v; want an error other than not found", err)
	}
	if err := b.Save(context.Background(), "packs/x", []byte("x")); err == nil {
		t.Fatal("Save with bad credentials succeeded")
	}
}

func TestBadPrefix(t *testing.T) {
	if _, err := s3.New(s3.Config{Endpoint: "127.0.0.1:1", Bucket: "b", Prefix: "a/../b"}); err == nil {
		t.Fatal("bad prefix accepted")
	}
}
