package s3_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3"
	"github.com/cairn-sandbox/cairn/internal/repo/backend/s3/s3test"
	"github.com/cairn-sandbox/cairn/internal/testenv/faultproxy"
)

// A server that stops answering fails the call after the stall timeout,
// for a PUT whose body it stops reading as for a GET; a slow server that
// answers within it does not.
func TestStalledCallsFail(t *testing.T) {
	srv := s3test.Start(t)
	p, err := faultproxy.Start(srv.Config.Endpoint, faultproxy.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	cfg := srv.Config
	cfg.Endpoint = p.Addr()
	cfg.StallTimeout = 500 * time.Millisecond
	b, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 16<<20) // more than the socket buffers take
	if err := b.Save(ctx, "packs/a", data); err != nil {
		t.Fatal(err)
	}

	p.Set(faultproxy.Faults{Latency: 300 * time.Millisecond})
	if _, err := b.Load(ctx, "packs/a"); err != nil {
		t.Fatalf("a slow answer inside the stall timeout: %v", err)
	}
	p.Set(faultproxy.Faults{})

	if err := p.Partition(faultproxy.Hang, 0); err != nil {
		t.Fatal(err)
	}
	defer p.Heal()
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"save", func() error { return b.Save(ctx, "packs/b", data) }},
		{"load", func() error { _, err := b.Load(ctx, "packs/a"); return err }},
		{"list", func() error { _, err := b.List(ctx, "packs/"); return err }},
	} {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- call.do() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s against a hung server succeeded", call.name)
			}
			t.Logf("%s failed after %v: %v", call.name, time.Since(start).Round(10*time.Millisecond), err)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s against a hung server still waits after 20 s", call.name)
		}
	}
}
