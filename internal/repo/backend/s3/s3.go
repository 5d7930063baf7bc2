// Package s3 is a Backend over an S3-compatible bucket (any endpoint,
// path-style addressing) through minio-go. A PUT is atomic, so Save needs no
// temporary object; Create is a PUT with If-None-Match: *, which the server
// refuses with 412 Precondition Failed if the object exists (the server must
// support conditional writes, as AWS S3 and versitygw do). It does not
// retry: wrap it in retry.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/cairn-sandbox/cairn/internal/repo/backend"
)

// Config locates a bucket and an optional key prefix inside it.
type Config struct {
	Endpoint  string // host:port
	Secure    bool   // HTTPS
	Region    string // optional
	Bucket    string
	Prefix    string // optional, e.g. a random per-account string; never the account id
	AccessKey string
	SecretKey string
	// StallTimeout fails a call once no byte moved on its connection,
	// either way, for this long (default DefaultStallTimeout): a server
	// that stops answering fails the call instead of holding it.
	StallTimeout time.Duration
}

// Backend stores objects in a bucket.
type Backend struct {
	client *minio.Client
	bucket string
	prefix string
	md5    bool // send Content-MD5 (HTTPS only, see putOptions)
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend for cfg. It does not contact the server.
func New(cfg Config) (*Backend, error) {
	stall := cfg.StallTimeout
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	tr, err := transport(cfg.Secure, stall)
	if err != nil {
		return nil, fmt.Errorf("s3 backend: %w", err)
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Transport:    tr,
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       cfg.Secure,
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1, // retrying is the retry wrapper's job
	})
	if err != nil {
		return nil, fmt.Errorf("s3 backend: %w", err)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := backend.CheckName(prefix); err != nil {
			return nil, fmt.Errorf("s3 backend: prefix: %w", err)
		}
		prefix += "/"
	}
	return &Backend{client: c, bucket: cfg.Bucket, prefix: prefix, md5: cfg.Secure}, nil
}

// putOptions are the options of every PUT. An object goes up in one PUT
// whatever its size (it is in memory; a pack is below 17 MiB, just past
// minio-go's 16 MiB part size, which would make it a multipart upload of
// two parts). The server checks the body: over HTTP, minio-go signs it in
// SigV4 streaming chunks, each with its SHA-256; over HTTPS it does not, so
// a Content-MD5 goes with it.
func (b *Backend) putOptions() minio.PutObjectOptions {
	return minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true, SendContentMd5: b.md5}
}

func (b *Backend) key(name string) (string, error) {
	if err := backend.CheckName(name); err != nil {
		return "", err
	}
	return b.prefix + name, nil
}

// convert maps "no such object" to backend.ErrNotFound.
func convert(op, name string, err error) error {
	resp := minio.ToErrorResponse(err)
	if resp.Code == minio.NoSuchKey || resp.StatusCode == http.StatusNotFound && resp.Code == "" {
		return fmt.Errorf("%s %s: %w (%w)", op, name, backend.ErrNotFound, err)
	}
	return fmt.Errorf("%s %s: %w", op, name, err)
}

// Save implements backend.Backend.
func (b *Backend) Save(ctx context.Context, name string, data []byte) error {
	k, err := b.key(name)
	if err != nil {
		return err
	}
	_, err = b.client.PutObject(ctx, b.bucket, k, bytes.NewReader(data), int64(len(data)), b.putOptions())
	if err != nil {
		return convert("save", name, err)
	}
	return nil
}

// Create implements backend.Backend.
func (b *Backend) Create(ctx context.Context, name string, data []byte) error {
	k, err := b.key(name)
	if err != nil {
		return err
	}
	opts := b.putOptions()
	opts.SetMatchETagExcept("*")
	_, err = b.client.PutObject(ctx, b.bucket, k, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.PreconditionFailed {
			return fmt.Errorf("create %s: %w (%w)", name, backend.ErrExists, err)
		}
		return convert("create", name, err)
	}
	return nil
}

// Load implements backend.Backend.
func (b *Backend) Load(ctx context.Context, name string) ([]byte, error) {
	k, err := b.key(name)
	if err != nil {
		return nil, err
	}
	obj, err := b.client.GetObject(ctx, b.bucket, k, minio.GetObjectOptions{})
	if err != nil {
		return nil, convert("load", name, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, convert("load", name, err)
	}
	return data, nil
}

// Stat implements backend.Backend.
func (b *Backend) Stat(ctx context.Context, name string) (backend.Info, error) {
	k, err := b.key(name)
	if err != nil {
		return backend.Info{}, err
	}
	oi, err := b.client.StatObject(ctx, b.bucket, k, minio.StatObjectOptions{})
	if err != nil {
		return backend.Info{}, convert("stat", name, err)
	}
	return backend.Info{Name: name, Size: oi.Size}, nil
}

// List implements backend.Backend.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Info, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []backend.Info
	for oi := range b.client.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix + prefix, Recursive: true}) {
		if oi.Err != nil {
			return nil, fmt.Errorf("list %q: %w", prefix, oi.Err)
		}
		name := strings.TrimPrefix(oi.Key, b.prefix)
		if backend.CheckName(name) != nil {
			continue // not ours
		}
		out = append(out, backend.Info{Name: name, Size: oi.Size})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	return out, nil
}

// Remove implements backend.Backend.
func (b *Backend) Remove(ctx context.Context, name string) error {
	k, err := b.key(name)
	if err != nil {
		return err
	}
	if err := b.client.RemoveObject(ctx, b.bucket, k, minio.RemoveObjectOptions{}); err != nil {
		if errors.Is(convert("remove", name, err), backend.ErrNotFound) {
			return nil
		}
		return convert("remove", name, err)
	}
	return nil
}
