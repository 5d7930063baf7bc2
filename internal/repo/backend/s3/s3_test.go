package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

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

// A pack (up to 17 MiB, past minio-go's 16 MiB part size) goes up in one
// PUT, not as a multipart upload, whose ETag would end in "-<parts>".
func TestLargeObjectIsOnePut(t *testing.T) {
	srv := s3test.Start(t)
	cfg := srv.Config
	cfg.Prefix = "p"
	b, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 17<<20+12345)
	_, _ = rand.Read(data)
	ctx := context.Background()
	if err := b.Save(ctx, "packs/big", data); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, "heads/big", data); err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"packs/big", "heads/big"} {
		oi, err := c.StatObject(ctx, cfg.Bucket, "p/"+name, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(oi.ETag, "-") {
			t.Errorf("%s: ETag %q of a multipart upload", name, oi.ETag)
		}
		got, err := b.Load(ctx, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: load = %d bytes, %v", name, len(got), err)
		}
	}
}
