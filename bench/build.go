package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-sandbox/cairn/api"
	"github.com/cairn-sandbox/cairn/internal/image/buildctx"
)

// benchDockerfile is a build of the usual shape: a base, files copied,
// commands run over them, config set.
const benchDockerfile = `FROM busybox
ARG VERSION=1
ENV APP=/srv/app
WORKDIR /srv/app
COPY lib/ lib/
COPY main.sh .
RUN sh main.sh > out.txt && cat lib/* | wc -c > size.txt
RUN mkdir -p data && echo "$VERSION" > data/version
USER 1000
CMD ["sh", "main.sh"]
`

// benchBuild measures a build of an unchanged Dockerfile (every step
// from the cache) against the same build with --no-cache (every step
// run), with a context of 20 MiB in 200 files.
func benchBuild(ctx context.Context, e *env) error {
	dir, err := os.MkdirTemp("", "cairn-bench-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files := map[string][]byte{"Dockerfile": []byte(benchDockerfile), "main.sh": []byte("echo built\n")}
	for i := range 200 {
		b := make([]byte, 100<<10)
		rand.Read(b)
		files[fmt.Sprintf("lib/part-%03d.bin", i)] = b
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	build := func(noCache bool) (time.Duration, error) {
		t0 := time.Now()
		pr, pw := io.Pipe()
		go func() {
			_, err := buildctx.WriteContext(pw, dir, buildctx.WriteOptions{})
			pw.CloseWithError(err)
		}()
		op, err := e.c.BuildImage(ctx, pr, api.BuildImageRequest{Name: "bench-build", Network: "none", NoCache: noCache})
		pr.Close()
		if err != nil {
			return 0, err
		}
		if _, err := e.c.WaitImage(ctx, op, nil); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	if _, err := build(false); err != nil { // fills the cache
		return fmt.Errorf("build: %w", err)
	}
	var cached, full []time.Duration
	for range max(3, e.n/3) {
		d, err := build(false)
		if err != nil {
			return err
		}
		cached = append(cached, d)
		d, err = build(true)
		if err != nil {
			return err
		}
		full = append(full, d)
	}
	report("build of an unchanged Dockerfile (10 instructions, 20 MiB context), every step cached",
		cached, "the same build with --no-cache (every step run)", full)
	p50, _ := percentiles(cached)
	goal(p50 <= time.Second, "an unchanged build takes %s at p50 (goal ≤ 1s)", round(p50))
	fmt.Println()
	return nil
}
