// Package s3test starts a real S3 server (versitygw over a temporary
// directory) for tests, and stops it when the test ends. Without versitygw
// on PATH the test is skipped, or fails under CI=true.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3"
	"github.com/cairn-sandbox/cairn/internal/testenv"
)

// Server is one running versitygw with one bucket.
type Server struct {
	Config s3.Config // reaches the bucket
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts a server with an empty bucket; it stops at the end of t.
func Start(t testing.TB) *Server {
	t.Helper()
	testenv.Require(t, "versitygw")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{
		Config: s3.Config{Endpoint: addr, Bucket: "cairn", AccessKey: "cairntest", SecretKey: randomSecret(t)},
		dir:    t.TempDir(),
	}
	t.Cleanup(s.Stop)
	s.Restart(t)
	client, err := minio.New(addr, &minio.Options{
		Creds:        credentials.NewStaticV4(s.Config.AccessKey, s.Config.SecretKey, ""),
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.MakeBucket(context.Background(), s.Config.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	return s
}

func randomSecret(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Dir is the directory holding the server's buckets (one subdirectory each).
func (s *Server) Dir() string { return s.dir }

// Restart starts the server again after Stop, on the same address and data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	cmd := exec.Command("versitygw", "--port", s.Config.Endpoint, "--quiet", "posix", s.dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.Config.AccessKey, "ROOT_SECRET_KEY="+s.Config.SecretKey)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.exited)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Config.Endpoint, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-s.exited:
			t.Fatalf("versitygw exited at start: %v", cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("versitygw did not listen on %s: %w", s.Config.Endpoint, err))
		}
	}
}

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}
